package natsstore

import (
	"cmp"
	"context"
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/delayq/delayq/core"
)

// The record of finished jobs is the job stream itself: a finish writes
// the job's done, cancelled or dead message (a lease that runs out on the
// last attempt is fired by the server into the dead subject), so
// ListFinished reads those messages in stream order, and a cursor is the
// stream sequence of the last one read. A finish costs no write more; but
// a message goes when its job moves on (a requeue or a cancel of a dead
// job, a put that reuses a finished id) or when a done or cancelled job's
// TTL ends, and so does its entry; and a dead job's entry stays while the
// job is dead, past the retention.

// finishedKinds are the kinds of message that record a finish.
var finishedKinds = []string{kindDone, kindCancelled, kindDead}

// ListFinished implements core.Store: up to params.Limit messages of each
// finished kind after the cursor, up to the stream's last sequence when
// the read began, merged by sequence. Errors: ErrInvalidArgument,
// ErrClosed, ErrUnavailable.
func (s *Store) ListFinished(ctx context.Context, params *core.ListFinishedParams) (core.FinishedPage, error) {
	if err := core.CheckListFinished(params); err != nil {
		return core.FinishedPage{}, err
	}
	after, err := core.ParseFinishedSeq(params.After)
	if err != nil {
		return core.FinishedPage{}, err
	}
	if s.isClosed() {
		return core.FinishedPage{}, core.ErrClosed
	}
	page := core.FinishedPage{Jobs: []core.FinishedJob{}, Next: params.After}
	// Each kind is read up to the stream's last sequence when the read
	// began: a message of one kind stored while another kind is read waits
	// for the next read, rather than being passed over by a cursor that a
	// later message of the other kind moved.
	infoCtx, cancel := opContext(ctx)
	info, err := s.stream.Info(infoCtx)
	cancel()
	if err != nil {
		return core.FinishedPage{}, unavailable("list finished", err)
	}
	upTo := info.State.LastSeq
	var found []*stored
	for _, kind := range finishedKinds {
		got, err := s.finishedMsgs(ctx, s.names.prefix+"."+kind+".>", after+1, upTo, params.Limit)
		if err != nil {
			return core.FinishedPage{}, err
		}
		found = append(found, got...)
	}
	slices.SortFunc(found, func(a, b *stored) int { return cmp.Compare(a.seq, b.seq) })
	now := s.now()
	for _, m := range found[:min(len(found), params.Limit)] {
		page.Jobs = append(page.Jobs, core.FinishedOf(m.view(now)))
		page.Next = core.FinishedSeqCursor(m.seq)
	}
	return page, nil
}

// finishedMsgs returns up to n messages of filter with sequences from from
// to upTo, in order. A replicated stream is read through its leader, one
// message a request: a replica may not have applied all up to upTo yet.
func (s *Store) finishedMsgs(ctx context.Context, filter string, from, upTo uint64, n int) ([]*stored, error) {
	var got []*stored
	if s.cfg.Replicas <= 1 {
		err := scanFrom(ctx, s.nc, s.names.stream, filter, from, func(msg *nats.Msg, seq uint64) (bool, error) {
			if seq > upTo {
				return false, nil
			}
			m, err := s.decodeStored(msg.Subject, seq, msg.Data)
			if err != nil {
				return false, err
			}
			got = append(got, m)
			return len(got) < n, nil
		})
		return got, err
	}
	for seq := from; seq <= upTo && len(got) < n; {
		ctx, cancel := opContext(ctx)
		msg, err := s.leaderGet(ctx, map[string]any{"seq": seq, "next_by_subj": filter})
		cancel()
		if err != nil {
			return nil, err
		}
		if msg == nil || msg.Sequence > upTo {
			break
		}
		m, err := s.decodeStored(msg.Subject, msg.Sequence, msg.Data)
		if err != nil {
			return nil, err
		}
		got = append(got, m)
		seq = msg.Sequence + 1
	}
	return got, nil
}
