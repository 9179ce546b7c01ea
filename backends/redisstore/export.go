package redisstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/delayq/delayq/core"
)

// The store exports and imports jobs (delayq export and import).
var (
	_ core.JobExporter = (*Store)(nil)
	_ core.JobImporter = (*Store)(nil)
)

// exportPage is how many members of a structure one export script reads.
const exportPage = 500

// importChunk is the most jobs one import script stores, so that a large
// batch does not hold the server for long; a shard's chunks run in order.
const importChunk = 1000

// ExportJobs implements core.JobExporter. It walks, shard by shard, the
// structures that hold unfinished jobs: the lease set, and the queues,
// dead set and parked set (jobs held back by their key) of every topic
// that is configured or in the topic registry, a page
// at a time (export.lua: members after a cursor of score and id, with
// their jobs), so memory stays bounded by a page. A member whose job no
// longer has that structure's state moved meanwhile and is skipped there.
// Jobs are reported as of now (see view). A job that moves from one
// structure to another during the export may be seen in both; importing
// skips the second. Errors: fn's, ErrClosed, ErrUnavailable.
func (s *Store) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	topics, err := s.knownTopics(ctx)
	if err != nil {
		return unavailable("export jobs", err)
	}
	// states are the states a job of a structure may be stored with;
	// level is the priority of a queue.
	type walk struct {
		which, topic, level string
		states              []core.State
	}
	for n := range s.cfg.Shards {
		walks := []walk{{"lease", "", "", []core.State{core.StateReserved}}}
		for _, t := range topics {
			levels, err := s.run(ctx, []call{s.shardCall(scriptExport, n, "levels", t)})[0].StringSlice()
			if err != nil {
				return unavailable("export jobs", err)
			}
			for _, y := range levels {
				walks = append(walks, walk{"queue", t, y, []core.State{core.StateScheduled, core.StateReady}})
			}
			walks = append(walks, walk{"dead", t, "", []core.State{core.StateDead}},
				walk{"parked", t, "", []core.State{core.StateScheduled, core.StateReady}})
		}
		for _, w := range walks {
			var score, member string
			for {
				if err := ctx.Err(); err != nil {
					return err
				}
				c := s.shardCall(scriptExport, n, w.which, w.topic, score, member, exportPage, w.level)
				rows, err := s.run(ctx, []call{c})[0].Slice()
				if err != nil {
					return unavailable("export jobs", err)
				}
				now := s.serverTime()
				for _, r := range rows {
					row := asSlice(r)
					if len(row) < 3 {
						return unavailable("export jobs", errShortReply)
					}
					member, score = asString(row[0]), asString(row[1])
					flat := asSlice(row[2])
					if len(flat) == 0 {
						continue // finished and expired meanwhile
					}
					j, err := decodeFlat(member, flat)
					if err != nil {
						return err
					}
					if !slices.Contains(w.states, j.State) {
						continue // moved meanwhile: seen where it went, if anywhere
					}
					if err := fn(view(j, now)); err != nil {
						return err
					}
				}
				if len(rows) < exportPage {
					break
				}
			}
		}
	}
	return nil
}

// ImportJobs implements core.JobImporter: one import script per shard and
// chunk (import.lua), all in one pipeline, as PutJobs does; a shard's jobs
// are applied in order, so a later duplicate id of a batch is skipped.
// Errors: ErrClosed, ErrUnavailable (some jobs may have been stored).
func (s *Store) ImportJobs(ctx context.Context, jobs []*core.Job) ([]bool, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	results := make([]bool, len(jobs))
	if len(jobs) == 0 {
		return results, nil
	}
	if err := s.markSeen(ctx, jobs, s.clock.Now()); err != nil {
		return nil, err
	}
	byShard := map[int][]int{}
	var order []int
	for i, j := range jobs {
		n := s.keys.shardOf(j.ID)
		if byShard[n] == nil {
			order = append(order, n)
		}
		byShard[n] = append(byShard[n], i)
	}
	type chunk struct {
		shard int
		idx   []int
	}
	var chunks []chunk
	var calls []call
	for _, n := range order {
		for idx := range slices.Chunk(byShard[n], importChunk) {
			args := make([]any, 0, 1+20*len(idx))
			args = append(args, s.inlineBody)
			for _, i := range idx {
				j := jobs[i]
				var updated int64
				if !j.UpdatedAt.IsZero() {
					updated = j.UpdatedAt.UnixMilli()
				}
				args = append(args, j.ID, j.Topic, j.Key, string(j.Body), j.RunAt.UnixMilli(),
					j.TTR.Milliseconds(), j.MaxAttempts, j.TraceParent, string(j.State), j.Attempt,
					core.CutError(j.LastError), j.CreatedAt.UnixMilli(), updated, encodeDelays(j.RetryDelays),
					encodePriority(j.Priority), j.URL, importedHistory(j, s.clock.Now()), encodeExpiresAt(j.ExpiresAt),
					encodeRetention(j.Retention), encodeChanges(j.Changes))
			}
			chunks = append(chunks, chunk{n, idx})
			calls = append(calls, s.shardCall(scriptImport, n, args...))
		}
	}
	var firstErr error
	for ci, cmd := range s.write(ctx, calls) {
		res, err := cmd.Slice()
		if err == nil && len(res) < 2 {
			err = errShortReply
		}
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		s.applyQueued(res[1])
		out := asSlice(res[0])
		if len(out) != len(chunks[ci].idx) {
			firstErr = cmp.Or(firstErr, errShortReply)
			continue
		}
		for k, i := range chunks[ci].idx {
			results[i] = asInt(out[k]) == 1
		}
	}
	if firstErr != nil {
		return nil, unavailable("import jobs", firstErr)
	}
	return results, nil
}

// importedHistory is the fHistory field of an imported job: its History
// with an attempt in progress ended as core.Job.Import ends it, at now.
func importedHistory(j *core.Job, now time.Time) string {
	c := &core.Job{History: slices.Clone(j.History)}
	c.EndAttempt(core.OutcomeLeaseExpired, "", now)
	return encodeHistory(c.History)
}
