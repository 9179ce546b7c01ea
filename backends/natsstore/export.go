package natsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

var (
	_ core.JobExporter = (*Store)(nil)
	_ core.JobImporter = (*Store)(nil)
)

const (
	// exportBatch is how many records one batched direct get of an export
	// asks for, exportMaxBytes how many bytes at most.
	exportBatch    = 256
	exportMaxBytes = 4 << 20
	// importBatch is how many jobs an import pipelines at once, below the
	// connection's limit of pending async publishes.
	importBatch = 2000
)

// directGetRequest is JetStream's direct get request, batched: from seq on,
// the next messages whose subjects match NextFor.
type directGetRequest struct {
	Seq      uint64 `json:"seq"`
	NextFor  string `json:"next_by_subj"`
	Batch    int    `json:"batch"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// ExportJobs implements core.JobExporter. It reads the job records in
// stream order by batched direct gets over <prefix>.job.*, a batch at a
// time, and passes on each job that is not finished as of now (GetJob's
// view: a scheduled job past run_at is ready, a reserved job past its lease
// ready or dead). A record rewritten during the export moves to the end of
// the stream, where the export meets it again; the ids passed on are
// remembered (ids only) so that no job is passed twice. Errors: fn's,
// ErrClosed, ErrUnavailable.
func (s *Store) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return unavailable("export", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	sent := make(map[string]struct{})
	for seq := uint64(1); ; {
		jobs, next, more, err := s.exportBatch(ctx, sub, inbox, seq)
		if err != nil {
			return err
		}
		now := s.now()
		for _, j := range jobs {
			if _, dup := sent[j.ID]; dup {
				continue
			}
			v := view(j, now)
			if v.State.Finished() {
				continue
			}
			sent[j.ID] = struct{}{}
			if err := fn(v); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		seq = next
	}
}

// exportBatch reads the records from seq on, up to exportBatch of them. It
// returns them, the sequence to read from next, and whether more records
// may follow.
func (s *Store) exportBatch(ctx context.Context, sub *nats.Subscription, inbox string, seq uint64) ([]*core.Job, uint64, bool, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	req, _ := json.Marshal(directGetRequest{Seq: seq, NextFor: s.names.prefix + ".job.*", Batch: exportBatch, MaxBytes: exportMaxBytes})
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+s.names.stream, inbox, req); err != nil {
		return nil, 0, false, unavailable("export", err)
	}
	var jobs []*core.Job
	next := seq
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, 0, false, unavailable("export", err)
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "404":
			// Nothing from seq on (it comes only in place of a first record).
			return jobs, next, false, nil
		case "204":
			// End of the batch: the server says how many records follow.
			pending, err := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			if err != nil {
				return nil, 0, false, unavailable("export", fmt.Errorf("bad end of batch: %q", m.Header))
			}
			return jobs, next, pending > 0 && len(jobs) > 0, nil
		default:
			return nil, 0, false, unavailable("export", fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description")))
		}
		n, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return nil, 0, false, unavailable("export", fmt.Errorf("direct get: bad sequence %q", m.Header.Get(jetstream.SequenceHeader)))
		}
		next = n + 1
		j, err := decodeRecord(m.Data)
		if err != nil {
			return nil, 0, false, fmt.Errorf("natsstore: record %s: bad record: %w", m.Header.Get(jetstream.SubjectHeader), err)
		}
		jobs = append(jobs, j)
	}
}

// ImportJobs implements core.JobImporter. Like a create of PutJobs, it
// publishes the wake-ups of every job's state (pipelined, a batch at a
// time), then every record with "no record yet" expected: a job whose id
// has a record, of any state, is refused by the server, and its wake-ups
// are undone as a collided create's are. Errors: ErrInvalidArgument for a
// job of a finished or unknown state (nothing stored), ErrClosed,
// ErrUnavailable (some jobs may have been stored).
func (s *Store) ImportJobs(ctx context.Context, jobs []*core.Job) ([]bool, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	for _, j := range jobs {
		switch j.State {
		case core.StateScheduled, core.StateReady, core.StateReserved, core.StateDead:
		default:
			return nil, core.Invalid("state", "natsstore: import job %q: state %q is not scheduled, ready, reserved or dead", j.ID, j.State)
		}
	}
	for _, j := range jobs {
		if err := s.markSeen(ctx, j.Topic); err != nil {
			return nil, err
		}
	}
	done := make([]bool, len(jobs))
	for i := 0; i < len(jobs); i += importBatch {
		end := min(i+importBatch, len(jobs))
		if err := s.importBatch(ctx, jobs[i:end], done[i:end]); err != nil {
			return nil, err
		}
	}
	return done, nil
}

// importBatch imports jobs and sets done[i] for each one stored.
func (s *Store) importBatch(ctx context.Context, in []*core.Job, done []bool) error {
	now := s.now()
	jobs := make([]*core.Job, len(in))
	wakes := make([][]jetstream.PubAckFuture, len(in))
	for i, j := range in {
		jobs[i] = importedJob(j, now)
		for _, m := range s.wakesFor(jobs[i], now, pendingAfter(0)) {
			f, err := s.js.PublishMsgAsync(m)
			if err != nil {
				return unavailable("publish wake-up", err)
			}
			wakes[i] = append(wakes[i], f)
		}
	}
	wakeSeqs := make([][]uint64, len(jobs))
	for i, fs := range wakes {
		for _, f := range fs {
			ack, err := await(ctx, f)
			if err != nil {
				return unavailable("publish wake-up", err)
			}
			wakeSeqs[i] = append(wakeSeqs[i], ack.Sequence)
		}
	}
	recs := make([]jetstream.PubAckFuture, len(jobs))
	for i, j := range jobs {
		m, err := s.recordMsg(j, 0)
		if err != nil {
			return err
		}
		if recs[i], err = s.js.PublishMsgAsync(m); err != nil {
			return unavailable("write job", err)
		}
	}
	var taken []int
	for i, f := range recs {
		_, err := await(ctx, f)
		switch {
		case isWrongSeq(err):
			taken = append(taken, i)
		case err != nil:
			return unavailable("write job", err)
		default:
			done[i] = true
		}
	}
	// The id is in use: delete the wake-ups published for it, which may
	// have replaced the existing job's own, and publish those again.
	return s.each(ctx, len(taken), func(k int) error {
		i := taken[k]
		s.undo(ctx, wakeSeqs[i], jobs[i].ID)
		return nil
	})
}

// importedJob returns the record of an imported job (Job.Import).
func importedJob(in *core.Job, now time.Time) *core.Job {
	j := in.Clone()
	j.Import(now)
	return j
}
