package held

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/core"
)

// ReleaseReason is the last_error of a delivery released because its
// subscriber went away.
const ReleaseReason = "subscriber disconnected"

// releaseConcurrency bounds the releases in flight when a subscriber with
// many unsettled deliveries goes away.
const releaseConcurrency = 16

// Config configures a Set.
type Config struct {
	// Prefetch is the credit: how many deliveries may be held at once.
	Prefetch int
	// HoldFunc, when not nil, is called with the id of each delivery Hold
	// records, and DropFunc with the id of each the set stops holding
	// (forgotten, expired or released), both under the set's lock: so an
	// index of who holds a delivery (connecttransport's, for the acks of
	// unary calls) is never behind the set.
	HoldFunc func(id string)
	// DropFunc: see HoldFunc.
	DropFunc func(id string)
}

// Set is the deliveries one subscriber holds unsettled and its credit.
// It is safe for concurrent use: the claim loop holds and waits, while
// the goroutines settling deliveries forget and extend.
type Set struct {
	cfg Config

	mu sync.Mutex
	// held maps the id of each unsettled delivery to its lease.
	held map[string]entry
	// free is the credit: how many more deliveries may be sent.
	free int
	// firstExpiry is at or before the earliest lease expiry in held, so
	// that Credit need not look through held before then.
	firstExpiry time.Time
	// wake tells the claim loop that credit came back.
	wake chan struct{}
}

// entry is an unsettled delivery.
type entry struct {
	lease   string
	expires time.Time
}

// New returns an empty Set with cfg.Prefetch credits.
func New(cfg Config) *Set {
	return &Set{cfg: cfg, held: map[string]entry{}, free: cfg.Prefetch, wake: make(chan struct{}, 1)}
}

// Credit drops the deliveries whose lease expired by now, returning their
// credit, and returns the free credit and a time at or before the earliest
// expiry still held (zero when none is held). It looks through what is
// held only once that time has come: a claim per few jobs must not cost a
// pass over a thousand held deliveries.
func (s *Set) Credit(now time.Time) (free int, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held) == 0 {
		s.firstExpiry = time.Time{}
		return s.free, time.Time{}
	}
	if now.Before(s.firstExpiry) {
		return s.free, s.firstExpiry
	}
	for id, e := range s.held {
		if !now.Before(e.expires) {
			s.drop(id)
			continue
		}
		if next.IsZero() || e.expires.Before(next) {
			next = e.expires
		}
	}
	s.firstExpiry = next
	return s.free, next
}

// Hold records claimed jobs as held, taking their credit. A job held
// already lost that lease when it was claimed again: its credit comes
// back.
func (s *Set) Hold(jobs []*core.Job) {
	if len(jobs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range jobs {
		if _, ok := s.held[j.ID]; ok {
			s.free++
		}
		s.held[j.ID] = entry{lease: j.Lease, expires: j.LeaseExpiresAt}
		if s.cfg.HoldFunc != nil {
			s.cfg.HoldFunc(j.ID)
		}
		s.free--
		if s.firstExpiry.IsZero() || j.LeaseExpiresAt.Before(s.firstExpiry) {
			s.firstExpiry = j.LeaseExpiresAt
		}
	}
}

// drop stops holding id, returning its credit; s.mu is held.
func (s *Set) drop(id string) {
	delete(s.held, id)
	if s.cfg.DropFunc != nil {
		s.cfg.DropFunc(id)
	}
	s.free++
}

// Forget drops the delivery id if it is held under lease (it was settled,
// or its lease is gone), returning its credit and waking Wait. Forgetting
// what is not held under lease does nothing.
func (s *Set) Forget(id, lease string) {
	s.mu.Lock()
	e, ok := s.held[id]
	ok = ok && e.lease == lease
	if ok {
		s.drop(id)
	}
	s.mu.Unlock()
	if ok {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Extend records a touched lease's new expiry, if id is held under lease.
func (s *Set) Extend(id, lease string, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.held[id]; ok && e.lease == lease {
		e.expires = expires
		s.held[id] = e
	}
}

// Leases returns the lease of each delivery held, by id: a copy, to read
// back without holding the set.
func (s *Set) Leases() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.held))
	for id, e := range s.held {
		out[id] = e.lease
	}
	return out
}

// Wait waits, with no credit left, until some comes back (Forget), the
// earliest held lease expires (next, from Credit, when not zero), recheck
// has passed (when not zero) or ctx ends, on clock. It reports ok false
// when ctx ended, and recheckDue true when recheck passed first: time to
// read the held deliveries back.
func (s *Set) Wait(ctx context.Context, clock core.Clock, next time.Time, recheck time.Duration) (ok, recheckDue bool) {
	var expiry, rechecked <-chan time.Time
	if !next.IsZero() {
		t := clock.NewTimer(max(next.Sub(clock.Now()), 0))
		defer t.Stop()
		expiry = t.Chan()
	}
	if recheck > 0 {
		t := clock.NewTimer(recheck)
		defer t.Stop()
		rechecked = t.Chan()
	}
	select {
	case <-ctx.Done():
		return false, false
	case <-s.wake:
	case <-expiry:
	case <-rechecked:
		return true, true
	}
	return true, false
}

// ReleaseParams are the parameters of Release.
type ReleaseParams struct {
	// NackFunc hands one delivery back: the engine's Nack.
	NackFunc func(ctx context.Context, p *core.NackParams) error
	// Timeout bounds each NackFunc call.
	Timeout time.Duration
	// FailedFunc, when not nil, is told of each delivery NackFunc failed
	// to release for another reason than its lease being gone; it comes
	// back when its lease expires.
	FailedFunc func(id string, err error)
}

// Release takes every delivery out of the set and hands each back for
// redelivery at once, with its attempt counted: NackFunc with delay 0 and
// last_error ReleaseReason, releaseConcurrency at a time, each call under
// ctx without its cancellation (its values, such as the transport, stay)
// and within Timeout. It returns how many it released; a delivery settled
// meanwhile or whose lease ran out (core.ErrConflict, core.ErrNotFound) is
// not counted.
func (s *Set) Release(ctx context.Context, p *ReleaseParams) int {
	s.mu.Lock()
	hs := s.held
	s.held = map[string]entry{}
	if s.cfg.DropFunc != nil {
		for id := range hs {
			s.cfg.DropFunc(id)
		}
	}
	s.mu.Unlock()
	if len(hs) == 0 {
		return 0
	}
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, releaseConcurrency)
		released atomic.Int64
		zero     time.Duration
	)
	for id, e := range hs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.Timeout)
			defer cancel()
			err := p.NackFunc(rctx, &core.NackParams{ID: id, Lease: e.lease, Delay: &zero, Error: ReleaseReason})
			switch {
			case err == nil:
				released.Add(1)
			case errors.Is(err, core.ErrConflict), errors.Is(err, core.ErrNotFound):
				// Settled meanwhile, or its lease ran out: nothing to release.
			default:
				if p.FailedFunc != nil {
					p.FailedFunc(id, err)
				}
			}
		})
	}
	wg.Wait()
	return int(released.Load())
}
