package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrDraining answers claims on an engine that drains (Engine.Drain): the
// instance is shutting down, and a consumer should claim from another.
var ErrDraining = fmt.Errorf("%w: draining: this instance is shutting down; claim from another", ErrUnavailable)

// Drain is the first step of a graceful shutdown: from now on Claim (the
// claims of pull consumers and subscribers of every transport) answers
// ErrDraining, claims waiting in Claim return what they have, and Ready
// reports ErrDraining, so that consumers and load balancers turn to other
// instances. Everything else goes on: pushes, reads, and the acks, nacks
// and touches of deliveries already made, so that they can finish here.
// Stop then stops the push deliveries, letting those in flight finish. It
// is idempotent.
func (e *Engine) Drain() {
	e.draining.Store(true)
	e.cancelDrain()
}

// drainPoll is how often Settled looks at the deliveries still held.
const drainPoll = 50 * time.Millisecond

// Settled waits until every delivery this engine's Claim made (for pull
// consumers and subscribers of every transport) has ended: acknowledged,
// nacked or touched to its end here, or its lease run out (a delivery
// settled through another instance counts as held until then); or until
// ctx is done, returning its error. A drain waits for it so that the
// consumers of this instance can settle what they were sent before the
// API stops serving them.
func (e *Engine) Settled(ctx context.Context) error {
	t := e.clock.NewTicker(drainPoll)
	defer t.Stop()
	for e.leases.holding(e.clock.Now()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.Chan():
		}
	}
	return nil
}

// leases are the deliveries an engine's Claim made: id to lease and its
// expiry, until an ack, nack or the expiry ends each.
type leases struct {
	mu sync.Mutex
	m  map[string]heldLease
	// sweepAt is the size at which add drops the expired entries: those
	// of deliveries settled through other instances, which no call here
	// ends.
	sweepAt int
}

type heldLease struct {
	lease   string
	expires time.Time
}

// leasesSweepMin is the smallest sweepAt.
const leasesSweepMin = 1024

func (l *leases) add(jobs []*Job, now time.Time) {
	if len(jobs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]heldLease)
	}
	for _, j := range jobs {
		l.m[j.ID] = heldLease{lease: j.Lease, expires: j.LeaseExpiresAt}
	}
	if len(l.m) >= max(l.sweepAt, leasesSweepMin) {
		l.sweep(now)
		l.sweepAt = 2 * len(l.m)
	}
}

// ended forgets the delivery of id under lease after a settling call
// answered err: it ended unless the store failed.
func (l *leases) ended(id, lease string, err error) {
	if err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrNotFound) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.m[id]; ok && h.lease == lease {
		delete(l.m, id)
	}
}

// touched records the new expiry of a touched delivery.
func (l *leases) touched(j *Job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.m[j.ID]; ok && h.lease == j.Lease {
		h.expires = j.LeaseExpiresAt
		l.m[j.ID] = h
	}
}

// holding drops the expired deliveries and reports whether any is left.
func (l *leases) holding(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	return len(l.m) > 0
}

func (l *leases) sweep(now time.Time) {
	for id, h := range l.m {
		if !h.expires.After(now) {
			delete(l.m, id)
		}
	}
}
