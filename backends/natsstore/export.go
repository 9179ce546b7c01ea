package natsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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
	// scanBatch is how many messages one batched direct get asks for,
	// scanMaxBytes how many bytes at most.
	scanBatch    = 256
	scanMaxBytes = 4 << 20
	// importBatch is how many jobs an import pipelines at once, below the
	// connection's limit of pending async publishes.
	importBatch = 2000
)

// directGetRequest is JetStream's direct get request, batched: from seq
// (or the first message stored at or after StartTime) on, the next
// messages whose subjects match NextFor.
type directGetRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
	NextFor   string     `json:"next_by_subj"`
	Batch     int        `json:"batch"`
	MaxBytes  int        `json:"max_bytes,omitempty"`
}

// scan passes fn the messages of stream whose subjects match filter, in
// stream order, from the first stored at or after since (zero: from the
// first), by batched direct gets. fn returns false to stop. Errors: fn's,
// ErrUnavailable.
func scan(ctx context.Context, nc *nats.Conn, stream, filter string, since time.Time, fn func(m *nats.Msg, seq uint64) (bool, error)) error {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return unavailable("scan", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req := directGetRequest{Seq: 1, NextFor: filter, Batch: scanBatch, MaxBytes: scanMaxBytes}
	if !since.IsZero() {
		req.Seq, req.StartTime = 0, &since
	}
	for {
		next, more, err := scanBatchOnce(ctx, nc, sub, inbox, stream, req, fn)
		if err != nil || !more {
			return err
		}
		req.Seq, req.StartTime = next, nil
	}
}

// scanBatchOnce runs one batched direct get of scan. It returns the
// sequence to read from next, and whether more messages may follow.
func scanBatchOnce(ctx context.Context, nc *nats.Conn, sub *nats.Subscription, inbox, stream string, req directGetRequest, fn func(*nats.Msg, uint64) (bool, error)) (uint64, bool, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	data, _ := json.Marshal(req)
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, data); err != nil {
		return 0, false, unavailable("scan", err)
	}
	next, n, stop := req.Seq, 0, false
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return 0, false, unavailable("scan", err)
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "404":
			// Nothing from there on (it comes only in place of a first message).
			return next, false, nil
		case "204":
			// End of the batch: the server says how many messages follow.
			pending, err := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			if err != nil {
				return 0, false, unavailable("scan", fmt.Errorf("bad end of batch: %q", m.Header))
			}
			return next, !stop && pending > 0 && n > 0, nil
		default:
			return 0, false, unavailable("scan", fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description")))
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return 0, false, unavailable("scan", fmt.Errorf("direct get: bad sequence %q", m.Header.Get(jetstream.SequenceHeader)))
		}
		next, n = seq+1, n+1
		if stop {
			continue // the rest of the batch still comes
		}
		m.Subject = m.Header.Get(jetstream.SubjectHeader)
		goOn, err := fn(m, seq)
		if err != nil {
			return 0, false, err
		}
		stop = !goOn
	}
}

// ExportJobs implements core.JobExporter. It reads the job messages in
// stream order by batched direct gets, and passes on each job whose
// message is its last one and that is not finished as of now (GetJob's view: a scheduled job past run_at is ready,
// a reserved job past its lease ready or dead). A job that changes during
// the export gets a new message at the end of the stream, where the export
// meets it again; it remembers the ids it passed on (ids only) so that no
// job is passed twice. Errors: fn's, ErrClosed, ErrUnavailable.
func (s *Store) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	sent := make(map[string]struct{})
	keys := s.names.prefix + "." + kindKey + "."
	return scan(ctx, s.nc, s.names.stream, s.names.prefix+".>", time.Time{}, func(msg *nats.Msg, seq uint64) (bool, error) {
		if strings.HasPrefix(msg.Subject, keys) {
			return true, nil
		}
		m, err := s.decodeStored(msg.Subject, seq, msg.Data)
		if err != nil {
			return false, err
		}
		if _, dup := sent[m.job.ID]; dup {
			return true, nil
		}
		// Only a job's last message is the job: a stale one (a move under
		// way, a delete lost to a crash) is passed over, and the job's last
		// message comes later in the stream.
		cur, err := s.load(ctx, m.job.ID)
		if err != nil {
			return false, err
		}
		if cur == nil || cur.seq != seq {
			return true, nil
		}
		v := m.view(s.now())
		if v.State.Finished() {
			return true, nil
		}
		sent[m.job.ID] = struct{}{}
		return true, fn(v)
	})
}

// ImportJobs implements core.JobImporter: PutJobs' create of every job in
// its imported state (Job.Import), pipelined a batch at a time; a job
// whose id has a message, of any state, is refused by the server's
// compare-and-set and skipped. Errors: ErrInvalidArgument for a job of a
// finished or unknown state (nothing stored), ErrClosed, ErrStorageFull
// while the disk is full (nothing stored) or at JetStream's storage limit,
// ErrUnavailable (some jobs may have been stored).
func (s *Store) ImportJobs(ctx context.Context, jobs []*core.Job) ([]bool, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	if err := s.admit(); err != nil {
		return nil, err
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
	futs := make([]jetstream.PubAckFuture, len(in))
	for i, j := range in {
		j = j.Clone()
		j.Import(now)
		in[i] = j
		m, _, err := s.message(j, now, nil)
		if err != nil {
			return err
		}
		if futs[i], err = s.js.PublishMsgAsync(m); err != nil {
			return unavailable("import job", err)
		}
	}
	for i, f := range futs {
		_, err := await(ctx, f)
		switch {
		case isWrongSeq(err): // the id is in use
		case err != nil:
			return unavailable("import job", err)
		default:
			done[i] = true
		}
	}
	s.keyAll(ctx, in, done)
	return nil
}
