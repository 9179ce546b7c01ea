package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq/core"
)

// OutcomeKind names the store call an Outcome comes from.
type OutcomeKind string

// The kinds of Outcome.
const (
	// OutcomePut is a job PutJobs stored.
	OutcomePut OutcomeKind = "put"
	// OutcomeAck is a job AckJob marked done.
	OutcomeAck OutcomeKind = "ack"
	// OutcomeRetry is a job RetryJob scheduled again.
	OutcomeRetry OutcomeKind = "retry"
	// OutcomeBury is a job BuryJob made dead.
	OutcomeBury OutcomeKind = "bury"
)

// Outcome is a change a SignalStore saw the store below it make.
type Outcome struct {
	Kind OutcomeKind
	// ID is the job's id.
	ID string
}

// SignalStore wraps a core.Store and sends an Outcome on Outcomes for each
// job put, acked, retried or buried, once the store below recorded it
// without error, so that a test waits on what an engine stored instead of
// polling or sleeping. Calls that fail are passed on and not reported.
//
//	store := &storetest.SignalStore{Store: mem, Outcomes: make(chan storetest.Outcome, 1000),
//		Kinds: []storetest.OutcomeKind{storetest.OutcomeAck}}
//	engine, err := core.NewEngine(core.EngineConfig{Store: store})
//	...
//	ids := store.Wait(t, storetest.OutcomeAck, 3, 10*time.Second)
type SignalStore struct {
	core.Store
	// Outcomes receives the outcomes in the order the store calls
	// returned. Required; a full channel blocks the store call, so buffer
	// it for every outcome the test may leave unread.
	Outcomes chan Outcome
	// Kinds are the kinds reported; nil reports every kind.
	Kinds []OutcomeKind
	// BeforeAck, when set before the first AckJob, runs at the start of
	// each AckJob, before the store below is called.
	BeforeAck func(id string)
}

var _ core.Store = (*SignalStore)(nil)

// Unwrap returns the store it decorates, so that an engine finds the
// optional capabilities of the stores under it (core.TopicObserver).
func (s *SignalStore) Unwrap() core.Store { return s.Store }

// PutJobs stores the jobs and reports each one stored (OutcomePut).
func (s *SignalStore) PutJobs(ctx context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	res, err := s.Store.PutJobs(ctx, p)
	if err == nil {
		for i, r := range res {
			s.signal(OutcomePut, r.Err, p.Jobs[i].ID)
		}
	}
	return res, err
}

// AckJob acks the job and reports it (OutcomeAck).
func (s *SignalStore) AckJob(ctx context.Context, p *core.AckJobParams) (core.SettleResult, error) {
	if s.BeforeAck != nil {
		s.BeforeAck(p.ID)
	}
	res, err := s.Store.AckJob(ctx, p)
	s.signal(OutcomeAck, err, p.ID)
	return res, err
}

// AckJobs acks the jobs and reports each (OutcomeAck).
func (s *SignalStore) AckJobs(ctx context.Context, p *core.AckJobsParams) ([]core.AckResult, error) {
	if s.BeforeAck != nil {
		for _, a := range p.Acks {
			s.BeforeAck(a.ID)
		}
	}
	res, err := s.Store.AckJobs(ctx, p)
	if err == nil {
		for i, r := range res {
			s.signal(OutcomeAck, r.Err, p.Acks[i].ID)
		}
	}
	return res, err
}

// RetryJob retries the job and reports it (OutcomeRetry).
func (s *SignalStore) RetryJob(ctx context.Context, p *core.RetryJobParams) (core.SettleResult, error) {
	res, err := s.Store.RetryJob(ctx, p)
	s.signal(OutcomeRetry, err, p.ID)
	return res, err
}

// BuryJob buries the job and reports it (OutcomeBury).
func (s *SignalStore) BuryJob(ctx context.Context, p *core.BuryJobParams) (core.SettleResult, error) {
	res, err := s.Store.BuryJob(ctx, p)
	s.signal(OutcomeBury, err, p.ID)
	return res, err
}

// signal sends the outcome of a call that returned err, when it succeeded
// and kind is reported.
func (s *SignalStore) signal(kind OutcomeKind, err error, id string) {
	if err == nil && (s.Kinds == nil || slices.Contains(s.Kinds, kind)) {
		s.Outcomes <- Outcome{Kind: kind, ID: id}
	}
}

// Wait waits for the next n outcomes of kind and returns their job ids in
// order; outcomes of other kinds that come meanwhile are dropped. It fails
// t when timeout passes first.
func (s *SignalStore) Wait(t testing.TB, kind OutcomeKind, n int, timeout time.Duration) []string {
	t.Helper()
	var ids []string
	deadline := time.After(timeout)
	for len(ids) < n {
		select {
		case o := <-s.Outcomes:
			if o.Kind == kind {
				ids = append(ids, o.ID)
			}
		case <-deadline:
			t.Fatalf("%d of %d %s outcomes within %s", len(ids), n, kind, timeout)
		}
	}
	return ids
}
