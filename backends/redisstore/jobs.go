package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/core"
)

// PutJobs implements core.Store. Jobs go to their shards (crc32 of the id),
// one put script per shard, all in one pipeline; within a shard they are
// applied in order, so a later duplicate id of a batch conflicts (or, with
// Replace, wins). Errors: ErrClosed, ErrUnavailable (some jobs may have been
// stored).
func (s *Store) PutJobs(ctx context.Context, params *core.PutJobsParams) ([]core.PutResult, error) {
	if params == nil {
		return nil, core.Invalid("", "redisstore: put jobs: no params")
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	results := make([]core.PutResult, len(params.Jobs))
	if len(params.Jobs) == 0 {
		return results, nil
	}
	now := s.clock.Now()
	if err := s.markSeen(ctx, params.Jobs, now); err != nil {
		return nil, err
	}
	replace := "0"
	switch {
	case params.IfAbsent:
		replace = "2"
	case params.Replace:
		replace = "1"
	}
	byShard := map[int][]int{}
	var order []int
	for i, j := range params.Jobs {
		n := s.keys.shardOf(j.ID)
		if byShard[n] == nil {
			order = append(order, n)
		}
		byShard[n] = append(byShard[n], i)
	}
	calls := make([]call, len(order))
	packer := newPackedMap()
	for ci, n := range order {
		idx := byShard[n]
		fair := s.fairOf(params, idx)
		args := make([]any, 0, 3+len(fair)+8*len(idx))
		args = append(args, replace, s.inlineBody, len(fair))
		for _, t := range fair {
			args = append(args, t)
		}
		for _, i := range idx {
			j := params.Jobs[i]
			p, err := newPutPart(j, s.inlineBody, packer)
			if err != nil {
				return nil, err
			}
			args = append(args, j.ID, j.Topic, j.Key, p.body, j.RunAt.UnixMilli(),
				encodePriority(j.Priority), p.changes, p.packed)
		}
		calls[ci] = s.shardCall(scriptPut, n, args...)
	}
	cmds := s.write(ctx, calls)
	var (
		firstErr error
		released []any // the key slots of a Cluster the scripts gave back
	)
	defer func() { s.freeSlots(ctx, released) }()
	for ci, n := range order {
		res, err := cmds[ci].Slice()
		if err == nil && len(res) < 3 {
			err = errShortReply
		}
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		s.applyQueued(res[1])
		released = append(released, asSlice(res[2])...)
		out := asSlice(res[0])
		idx := byShard[n]
		if len(out) != len(idx) {
			firstErr = cmp.Or(firstErr, errShortReply)
			continue
		}
		for k, i := range idx {
			switch r := out[k].(type) {
			case int64:
				results[i].Replaced = r == 1
			case []any:
				id := params.Jobs[i].ID
				existing, err := decodeFlat(id, r)
				if err != nil {
					firstErr = cmp.Or(firstErr, err)
					continue
				}
				view(existing, s.serverTime())
				results[i].Err = core.ExistsConflict(id, existing)
				if params.Replace && !params.IfAbsent {
					results[i].Err = core.ReservedConflict(id, existing)
				}
			}
		}
	}
	if firstErr != nil {
		return nil, unavailable("put jobs", firstErr)
	}
	return results, nil
}

// applyQueued wakes this store's claims of the topics whose queues a
// script made due earlier: its answer {topic, ms, shard, ...} (announced
// in lib.lua; other stores learn it from the wake-up channel).
func (s *Store) applyQueued(v any) {
	q := asSlice(v)
	for i := 0; i+2 < len(q); i += 3 {
		if n := int(asInt(q[i+2])); n >= 0 && n < s.cfg.Shards {
			s.queued(asString(q[i]), n, asInt(q[i+1]))
		}
	}
}

// seenRefresh is how often a store marks a topic it puts jobs on as seen
// in the topic registry; pruneAfter is how long after its last mark an
// empty, unconfigured topic is dropped from the registry. pruneAfter must
// exceed seenRefresh (and clock skew between stores).
const (
	seenRefresh = 10 * time.Minute
	pruneAfter  = time.Hour
)

// fairOf returns the topics of p.Jobs[idx] that p says are fair
// (PutJobsParams.Fair), whose jobs put.lua parks by key.
func (s *Store) fairOf(p *core.PutJobsParams, idx []int) []string {
	if len(p.Fair) == 0 {
		return nil
	}
	var out []string
	for _, i := range idx {
		t := p.Jobs[i].Topic
		if slices.Contains(p.Fair, t) && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// markSeen records the topics of jobs in the topic registry, unless this
// store did so lately.
func (s *Store) markSeen(ctx context.Context, jobs []*core.Job, now time.Time) error {
	var members []redis.Z
	need := map[string]bool{}
	s.mu.Lock()
	for _, j := range jobs {
		if need[j.Topic] {
			continue
		}
		if at, ok := s.seen[j.Topic]; ok && now.Sub(at) < seenRefresh && !now.Before(at) {
			continue
		}
		need[j.Topic] = true
		members = append(members, redis.Z{Score: float64(now.UnixMilli()), Member: j.Topic})
	}
	s.mu.Unlock()
	if len(members) == 0 {
		return nil
	}
	if err := s.rdb.ZAddArgs(ctx, s.keys.seen, redis.ZAddArgs{GT: true, Members: members}).Err(); err != nil {
		return unavailable("mark topics", err)
	}
	s.mu.Lock()
	for t := range need {
		s.seen[t] = now
	}
	s.mu.Unlock()
	return nil
}

// GetJob implements core.Store: the get script reads the job hash (and the
// body, when it lives apart) at once; the job is reported as of now (see
// view). Errors: ErrNotFound, ErrClosed, ErrUnavailable.
func (s *Store) GetJob(ctx context.Context, id string) (*core.Job, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	n := s.keys.shardOf(id)
	res, err := s.run(ctx, []call{s.shardCall(scriptGet, n, id)})[0].Slice()
	if err == nil && len(res) != 2 {
		err = errShortReply
	}
	if err != nil {
		return nil, unavailable("get job", err)
	}
	now := msTime(s.sawServerNow(res[1]))
	flat := asSlice(res[0])
	if len(flat) == 0 {
		return nil, fmt.Errorf("redisstore: job %q: %w", id, core.ErrNotFound)
	}
	j, err := decodeFlat(id, flat)
	if err != nil {
		return nil, err
	}
	return view(j, now), nil
}

// CancelJob implements core.Store. Not idempotent: a second cancel gets
// ErrNotFound. Errors: ErrNotFound (unknown or finished),
// *core.ConflictError (ErrConflict) while reserved without
// params.Running, ErrClosed, ErrUnavailable.
func (s *Store) CancelJob(ctx context.Context, params *core.CancelJobParams) error {
	id := params.ID
	running := "0"
	if params.Running {
		running = "1"
	}
	code, job, err := s.byID(ctx, scriptCancel, "cancel", id, id, running)
	if err != nil {
		return err
	}
	switch code {
	case 0:
		return nil
	case 2:
		return core.ReservedConflict(id, job)
	default:
		return fmt.Errorf("redisstore: cancel %q: %w", id, core.ErrNotFound)
	}
}

// ExpireJob implements core.Store. Errors: ErrNotFound (unknown or
// finished), *core.ConflictError (ErrConflict) when reserved, dead or not
// expired, ErrClosed, ErrUnavailable.
func (s *Store) ExpireJob(ctx context.Context, id string) error {
	code, job, err := s.byID(ctx, scriptExpireJob, "expire", id, id)
	if err != nil {
		return err
	}
	switch code {
	case 0:
		return nil
	case 2:
		return core.NotExpiredConflict(id, job)
	default:
		return fmt.Errorf("redisstore: expire %q: %w", id, core.ErrNotFound)
	}
}

// RequeueJob implements core.Store: the dead job's run_at becomes now.
// Errors: ErrNotFound, *core.ConflictError (ErrConflict) when not dead,
// ErrClosed, ErrUnavailable.
func (s *Store) RequeueJob(ctx context.Context, id string) error {
	code, job, err := s.byID(ctx, scriptRequeue, "requeue", id, id)
	if err != nil {
		return err
	}
	switch code {
	case 0:
		return nil
	case 2:
		return core.NotDeadConflict(id, job, job.State)
	default:
		return fmt.Errorf("redisstore: requeue %q: %w", id, core.ErrNotFound)
	}
}

// AckJob implements core.Store. A second ack of the same lease gets
// ErrLeaseLost. Errors: ErrNotFound, ErrLeaseLost, ErrClosed,
// ErrUnavailable.
func (s *Store) AckJob(ctx context.Context, params *core.AckJobParams) (core.SettleResult, error) {
	res, err := s.leased(ctx, "ack", params.ID, params.Lease, 0, "")
	return settled("ack", res, err)
}

// AckJobs implements core.Store: the acks go to the lease batcher
// together, so that they share its scripts (one per shard on a Cluster,
// one in all on a standalone server, up to leaseBatchMax acks each), in
// order: a second ack of an id in the same call finds it done. Errors:
// ErrClosed, ErrUnavailable.
func (s *Store) AckJobs(ctx context.Context, params *core.AckJobsParams) ([]core.AckResult, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	if len(params.Acks) == 0 {
		return []core.AckResult{}, nil
	}
	ops := make([]*leaseOp, len(params.Acks))
	for k, a := range params.Acks {
		ops[k] = &leaseOp{op: "ack", id: a.ID, lease: a.Lease, shard: s.keys.shardOf(a.ID)}
	}
	if err := s.leases.do(ctx, ops...); err != nil {
		return nil, err
	}
	res := make([]core.AckResult, len(ops))
	for k, op := range ops {
		job, err := op.answer()
		if err != nil && !errors.Is(err, core.ErrNotFound) && !errors.Is(err, core.ErrLeaseLost) {
			return nil, err
		}
		res[k].Settled, res[k].Err = settled("ack", job, err)
	}
	return res, nil
}

// RetryJob implements core.Store. A zero params.RunAt means now. Errors:
// ErrNotFound, ErrLeaseLost, ErrClosed, ErrUnavailable.
func (s *Store) RetryJob(ctx context.Context, params *core.RetryJobParams) (core.SettleResult, error) {
	runAt := params.RunAt.UnixMilli()
	if params.RunAt.IsZero() {
		runAt = 0 // now, in the script
	}
	op := "retry"
	if params.Unsent {
		op = "release" // retry, the attempt given back (core.Job.Release)
	}
	res, err := s.leased(ctx, op, params.ID, params.Lease, runAt, core.CutError(params.Error))
	return settled(op, res, err)
}

// BuryJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost,
// ErrClosed, ErrUnavailable.
func (s *Store) BuryJob(ctx context.Context, params *core.BuryJobParams) (core.SettleResult, error) {
	res, err := s.leased(ctx, "bury", params.ID, params.Lease, 0, core.CutError(params.Error))
	return settled("bury", res, err)
}

// TouchJob implements core.Store. A job that holds a slot of its key on a
// Cluster has the slot extended first, then its lease, never past the
// slot. Errors: ErrNotFound, ErrLeaseLost, ErrClosed, ErrUnavailable.
func (s *Store) TouchJob(ctx context.Context, params *core.TouchJobParams) (*core.Job, error) {
	res, err := s.leased(ctx, "touch", params.ID, params.Lease, 0, "")
	if errors.Is(err, errExtendSlot) {
		var until int64
		if until, err = s.extendSlot(ctx, params.ID, res); err == nil {
			res, err = s.leased(ctx, "touch", params.ID, params.Lease, until, "")
		}
	}
	if err != nil {
		return nil, err
	}
	return decodeFlat(params.ID, res)
}

// RewriteBody implements core.BodyRewriter: the job's body, wherever it
// lives, and nothing else changes, its expiry included. Errors:
// ErrNotFound, *core.ConflictError (ErrConflict) when the body is not
// params.Old, ErrClosed, ErrUnavailable.
func (s *Store) RewriteBody(ctx context.Context, params *core.RewriteBodyParams) error {
	id := params.ID
	code, _, err := s.byID(ctx, scriptRewrite, "rewrite body", id, id, string(params.Old), string(params.Body), s.inlineBody)
	if err != nil {
		return err
	}
	switch code {
	case 0:
		return nil
	case 3:
		return core.BodyChangedConflict(id)
	default:
		return fmt.Errorf("redisstore: rewrite body %q: %w", id, core.ErrNotFound)
	}
}

// byID runs a script of the form {code, job, woke} on the shard of id.
func (s *Store) byID(ctx context.Context, sc *shardScript, what, id string, args ...any) (int64, *core.Job, error) {
	if s.isClosed() {
		return 0, nil, core.ErrClosed
	}
	n := s.keys.shardOf(id)
	res, err := s.write(ctx, []call{s.shardCall(sc, n, args...)})[0].Slice()
	if err == nil && len(res) < 3 {
		err = errShortReply
	}
	if err != nil {
		return 0, nil, unavailable(what, err)
	}
	s.applyQueued(res[2])
	if len(res) > 3 {
		s.freeSlots(ctx, asSlice(res[3]))
	}
	code := asInt(res[0])
	var job *core.Job
	if flat := asSlice(res[1]); len(flat) > 0 {
		if job, err = decodeFlat(id, flat); err != nil {
			return 0, nil, err
		}
		view(job, s.serverTime())
	}
	if code == 2 && job == nil {
		return 0, nil, unavailable(what, errShortReply)
	}
	return code, job, nil
}

// ListDeadJobs implements core.Store: the heads of the topic's dead sets of
// every shard, merged by time of death. A topic without dead jobs gives an
// empty slice. Errors: ErrInvalidArgument when params.Limit < 1, ErrClosed,
// ErrUnavailable.
func (s *Store) ListDeadJobs(ctx context.Context, params *core.ListDeadJobsParams) ([]*core.Job, error) {
	if params == nil || params.Limit < 1 {
		return nil, core.Invalid("limit", "limit must be at least 1")
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	pipe := s.rdb.Pipeline()
	heads := make([]*redis.ZSliceCmd, s.cfg.Shards)
	// Dead sets are scored by time of death in µs.
	since := "-inf"
	if !params.Since.IsZero() {
		since = strconv.FormatInt(params.Since.UnixMicro(), 10)
	}
	for n := range heads {
		heads[n] = pipe.ZRangeByScoreWithScores(ctx, s.keys.dead(n, params.Topic),
			&redis.ZRangeBy{Min: since, Max: "+inf", Count: int64(params.Limit)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, unavailable("list dead jobs", err)
	}
	type dead struct {
		id string
		at float64
	}
	var all []dead
	for _, h := range heads {
		for _, z := range h.Val() {
			id, _ := z.Member.(string)
			all = append(all, dead{id, z.Score})
		}
	}
	slices.SortFunc(all, func(a, b dead) int { return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.id, b.id)) })
	all = all[:min(len(all), params.Limit)]
	ids := make([]string, len(all))
	for i, d := range all {
		ids[i] = d.id
	}
	got, err := s.getJobs(ctx, "list dead jobs", ids)
	if err != nil {
		return nil, err
	}
	jobs := []*core.Job{}
	for _, id := range ids {
		if j := got[id]; j != nil && j.State == core.StateDead {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// getJobs reads jobs as they are stored, with one get script per shard
// they are in, all at once: the jobs found by id (a missing one expired
// or never was). what names the caller's operation in errors.
func (s *Store) getJobs(ctx context.Context, what string, ids []string) (map[string]*core.Job, error) {
	byShard := map[int][]any{}
	var order []int
	for _, id := range ids {
		n := s.keys.shardOf(id)
		if byShard[n] == nil {
			order = append(order, n)
		}
		byShard[n] = append(byShard[n], id)
	}
	calls := make([]call, len(order))
	for i, n := range order {
		calls[i] = s.shardCall(scriptGet, n, byShard[n]...)
	}
	got := make(map[string]*core.Job, len(ids))
	for i, cmd := range s.run(ctx, calls) {
		res, err := cmd.Slice()
		if err == nil && len(res) != len(byShard[order[i]])+1 {
			err = errShortReply
		}
		if err != nil {
			return nil, unavailable(what, err)
		}
		s.sawServerNow(res[len(res)-1]) // the view below is as of the server's time
		for k, r := range res[:len(res)-1] {
			flat := asSlice(r)
			if len(flat) == 0 {
				continue
			}
			id := byShard[order[i]][k].(string)
			j, err := decodeFlat(id, flat)
			if err != nil {
				return nil, err
			}
			got[id] = j
		}
	}
	return got, nil
}

// FindJobs implements core.Store: it reads the key's zset of every shard
// (its members that are still found, by score), then the page of jobs.
// Errors: ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) FindJobs(ctx context.Context, params *core.FindJobsParams) ([]*core.Job, error) {
	if err := core.CheckFind(params); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	now := s.serverTime()
	pipe := s.rdb.Pipeline()
	members := make([]*redis.StringSliceCmd, s.cfg.Shards)
	for n := range members {
		members[n] = pipe.ZRangeByScore(ctx, s.keys.byKey(n, params.Topic, params.Key),
			&redis.ZRangeBy{Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, unavailable("find jobs", err)
	}
	var ids []string
	for _, m := range members {
		for _, id := range m.Val() {
			if id > params.After {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return core.FindPage(ids, params, func(page []string) ([]*core.Job, error) {
		got, err := s.getJobs(ctx, "find jobs", page)
		if err != nil {
			return nil, err
		}
		jobs := make([]*core.Job, len(page))
		for i, id := range page {
			if j := got[id]; j != nil {
				jobs[i] = view(j, now)
			}
		}
		return jobs, nil
	})
}
