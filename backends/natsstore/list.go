package natsstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/delayq/delayq/core"
)

// listKinds are the kinds of message that may hold a job listed in a state
// as of now: a due message not yet due is scheduled, a lease schedule that
// ran out ready or dead. A lease is read before the kind its schedule
// fires into: read after, a lease that fired between the two reads was in
// neither (a listing of dead jobs missed one in one of three CI runs). A schedule message past its run_at (one the server
// fires more than Lead late) is not read for ready: it would take reading
// every scheduled job of the topic; it is listed once it fired.
var listKinds = map[core.State][]string{
	core.StateScheduled: {kindSched, kindDue},
	core.StateReady:     {kindLease, kindDue},
	core.StateReserved:  {kindLease},
	core.StateDead:      {kindLease, kindDead},
	core.StateDone:      {kindDone},
	core.StateCancelled: {kindCancelled},
}

// ListJobs implements core.Store. The stream keeps no order by time, so a
// listing follows the stream: it reads the topic's messages of the kinds
// that may hold the state (listKinds) by batched direct gets from the
// cursor on, the stream sequence of the last message listed, keeps those
// whose job is in the state as of now and still the job's last message,
// and merges the kinds by sequence: the order in which the jobs got to
// where they are. Done and cancelled go newest first: it reads back from
// the cursor in windows that grow fourfold until they hold the page. Due
// messages are read for scheduled only from those stored within the last
// Lead (and a second), the only ones that may not be due yet. A page costs
// reading the messages of those kinds it passes over. Errors:
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) ListJobs(ctx context.Context, params *core.ListJobsParams) (core.JobPage, error) {
	if err := core.CheckList(params); err != nil {
		return core.JobPage{}, err
	}
	var after uint64
	if params.After != "" {
		c, err := core.ParseListCursor(params.After)
		if err != nil {
			return core.JobPage{}, err
		}
		if c.At < 1 {
			return core.JobPage{}, core.Invalid("after", "after is not a cursor of this listing")
		}
		after = uint64(c.At)
	}
	if s.isClosed() {
		return core.JobPage{}, core.ErrClosed
	}
	now := s.now()
	want := params.Limit + 1
	newest := params.State.Finished()
	match := func(msg *nats.Msg, seq uint64) *stored {
		m, err := s.decodeStored(msg.Subject, seq, msg.Data)
		if err != nil || m.job.Topic != params.Topic || m.view(now).State != params.State {
			return nil
		}
		return m
	}
	var found []*stored
	for _, kind := range listKinds[params.State] {
		filter := s.names.kindFilter(kind, params.Topic)
		var (
			got []*stored
			err error
		)
		switch {
		case newest:
			got, err = s.listBack(ctx, filter, after, want, match)
		case kind == kindDue && params.State == core.StateScheduled:
			since := time.Now().Add(-s.cfg.Lead - time.Second) // the server's timestamps: real time
			err = scan(ctx, s.nc, s.names.stream, filter, since, func(msg *nats.Msg, seq uint64) (bool, error) {
				if m := match(msg, seq); m != nil && seq > after {
					got = append(got, m)
				}
				return len(got) < want, nil
			})
		default:
			err = scanFrom(ctx, s.nc, s.names.stream, filter, after+1, func(msg *nats.Msg, seq uint64) (bool, error) {
				if m := match(msg, seq); m != nil {
					got = append(got, m)
				}
				return len(got) < want, nil
			})
		}
		if err != nil {
			return core.JobPage{}, err
		}
		found = append(found, got...)
	}
	slices.SortFunc(found, func(a, b *stored) int {
		if newest {
			return cmp.Compare(b.seq, a.seq)
		}
		return cmp.Compare(a.seq, b.seq)
	})
	page := core.JobPage{Jobs: []*core.Job{}}
	if len(found) > params.Limit {
		found = found[:params.Limit]
		last := found[len(found)-1]
		page.Next = core.ListCursor{At: int64(last.seq), ID: last.job.ID}.String()
	}
	// Only a job's last message is the job: a stale one (a delete lost to
	// a crash, a move under way) is left out.
	current := make([]*core.Job, len(found))
	err := s.each(ctx, len(found), func(i int) error {
		m, err := s.load(ctx, found[i].job.ID)
		if err == nil && m != nil && m.seq == found[i].seq {
			current[i] = m.view(now)
		}
		return err
	})
	if err != nil {
		return core.JobPage{}, err
	}
	for _, j := range current {
		if j != nil && j.State == params.State && j.Topic == params.Topic {
			page.Jobs = append(page.Jobs, j)
		}
	}
	return page, nil
}

// listBack returns up to n of the messages of filter that match, the last
// ones before the sequence before (0: the end of the stream), newest
// first: it reads windows of sequences back from there, each four times
// the last, until one holds n or starts at the stream's first message.
func (s *Store) listBack(ctx context.Context, filter string, before uint64, n int, match func(*nats.Msg, uint64) *stored) ([]*stored, error) {
	if before == 0 {
		info, err := s.stream.Info(ctx)
		if err != nil {
			return nil, unavailable("list jobs", err)
		}
		before = info.State.LastSeq + 1
	}
	for width := uint64(4 * n); ; width *= 4 {
		from := uint64(1)
		if before > width {
			from = before - width
		}
		var got []*stored
		err := scanFrom(ctx, s.nc, s.names.stream, filter, from, func(msg *nats.Msg, seq uint64) (bool, error) {
			if seq >= before {
				return false, nil
			}
			if m := match(msg, seq); m != nil {
				got = append(got, m)
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
		if len(got) >= n || from == 1 {
			slices.Reverse(got)
			return got[:min(n, len(got))], nil
		}
	}
}

// scanFrom is scan from the sequence from on.
func scanFrom(ctx context.Context, nc *nats.Conn, stream, filter string, from uint64, fn func(m *nats.Msg, seq uint64) (bool, error)) error {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return unavailable("scan", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req := directGetRequest{Seq: max(from, 1), NextFor: filter, Batch: scanBatch, MaxBytes: scanMaxBytes}
	for {
		next, more, err := scanBatchOnce(ctx, nc, sub, inbox, stream, req, fn)
		if err != nil || !more {
			return err
		}
		req.Seq = next
	}
}
