package core

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// leases are the deliveries this engine's claims made (for pull consumers
// and subscribers of every transport), id to lease and expiry, until an
// ack, nack, release, a touch that finds the lease gone, or the expiry ends
// each: the one record of deliveries in flight. A drain waits for it to
// empty (WaitSettled), and each Subscription counts its credit in it, so that a
// delivery settled through any transport of this engine gives its
// subscriber's credit back at once.
type leases struct {
	mu sync.Mutex
	m  map[string]heldLease
	// sweepAt is the size at which add drops the expired entries: those
	// of deliveries settled through other instances, which no call here
	// ends.
	sweepAt int
}

// heldLease is one delivery in flight.
type heldLease struct {
	lease   string
	expires time.Time
	// sub is the subscription that holds it, nil for a pull claim.
	sub *Subscription
	// sent is set once the subscription began to send it: a delivery
	// claimed and never sent is released without spending its attempt.
	sent bool
	// claimed is when the claim made it, for Subscription.recheck.
	claimed time.Time
	// told is set once its subscriber is being told that its job was
	// cancelled, so that a cancel here and a recheck that found it tell
	// once.
	told bool
}

// leasesSweepMin is the smallest sweepAt.
const leasesSweepMin = 1024

// add records the deliveries of claimed jobs, held by sub (nil for a pull
// claim). A job recorded already lost that lease when it was claimed again:
// its subscriber, if any, gets the credit back.
func (l *leases) add(jobs []*Job, now time.Time, sub *Subscription) {
	if len(jobs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]heldLease)
	}
	for _, j := range jobs {
		if old, ok := l.m[j.ID]; ok && old.sub != nil {
			old.sub.drop(j.ID)
		}
		l.m[j.ID] = heldLease{lease: j.Lease, expires: j.LeaseExpiresAt, sub: sub, claimed: now}
		if sub != nil {
			sub.hold(j)
		}
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
	l.end(id, lease)
}

// end forgets the delivery of id if it is held under lease; l.mu is held.
func (l *leases) end(id, lease string) {
	h, ok := l.m[id]
	if !ok || h.lease != lease {
		return
	}
	delete(l.m, id)
	if h.sub != nil {
		h.sub.drop(id)
	}
}

// cancelled tells the subscription that held the delivery of id that its
// job was cancelled while it ran, then forgets the delivery: under lease,
// or whatever its lease when lease is empty. In that order: forgetting it
// frees the subscription's credit for its next delivery, whose frame must
// come after the one that tells.
func (l *leases) cancelled(id, lease string) {
	l.mu.Lock()
	h, ok := l.m[id]
	if !ok || h.told || (lease != "" && h.lease != lease) {
		l.mu.Unlock()
		return
	}
	h.told = true
	l.m[id] = h
	l.mu.Unlock()
	if h.sub != nil && h.sub.p.CancelledFunc != nil {
		h.sub.p.CancelledFunc(id)
	}
	l.mu.Lock()
	if cur, still := l.m[id]; still && cur.lease == h.lease {
		l.end(id, h.lease)
	}
	l.mu.Unlock()
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

// held drops the expired deliveries and returns how many are left.
func (l *leases) held(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	return len(l.m)
}

// sweep drops the expired deliveries; l.mu is held.
func (l *leases) sweep(now time.Time) {
	for id, h := range l.m {
		if !h.expires.After(now) {
			l.end(id, h.lease)
		}
	}
}

// Subscription bounds of SubscriptionParams.Prefetch.
const (
	// SubscriptionPrefetchDefault is how many deliveries a subscriber
	// holds unsettled at once when it does not say.
	SubscriptionPrefetchDefault = 16
	// SubscriptionPrefetchMax is the largest prefetch.
	SubscriptionPrefetchMax = 1000
)

// SubscriptionReleaseReason is the last_error of a delivery released
// because its subscriber went away.
const SubscriptionReleaseReason = "subscriber disconnected"

// releaseConcurrency bounds the releases in flight when a subscriber with
// many unsettled deliveries goes away.
const releaseConcurrency = 16

// SubscriptionParams configure a Subscription.
type SubscriptionParams struct {
	Topic string
	// Prefetch is the subscriber's credit: how many deliveries it may
	// hold unsettled at once, 1 to SubscriptionPrefetchMax.
	Prefetch int
	// Via is how the jobs will be delivered (ViaWebSocket, ViaGRPC).
	Via string
	// Consumer is the subscriber's network address, kept in the attempts
	// (ClaimJobsParams.Consumer).
	Consumer string
	// ClaimWait is how long each claim waits for due jobs, at most
	// ClaimWaitLimit; zero takes 30s.
	ClaimWait time.Duration
	// Recheck, when not zero, is how often a subscription reads back the
	// deliveries it has held for Recheck or longer: those settled through
	// another instance give their credit back, and those whose job was
	// cancelled through another instance are told (CancelledFunc). Without
	// it they give it back when their lease expires, untold.
	Recheck time.Duration
	// ReleaseTimeout bounds the release of each delivery by Release.
	ReleaseTimeout time.Duration
	// CancelledFunc, when set, is called once with the id of a delivery
	// the subscription holds whose job was cancelled while it ran
	// (Engine.Cancel with Running): through this engine at once, from the
	// cancelling goroutine; through another instance when a recheck finds
	// it (Recheck), from the subscription's. The transport tells its
	// subscriber; calls may come from several goroutines at once.
	CancelledFunc func(id string)
}

// Subscription is one streaming subscriber of this engine (a WebSocket
// connection, a gRPC Subscribe stream): Run claims due jobs of its topic
// while it holds fewer than Prefetch unsettled, and hands each to the
// transport to send. What it holds is part of the engine's record of
// deliveries in flight, so an ack, nack, touch or release of one of them
// through any transport of this engine gives the credit back at once (or
// moves its expiry), and a lease that expires gives it back then. Run and
// Release are called from one goroutine; the settling calls of others may
// run at any time.
type Subscription struct {
	e *Engine
	p SubscriptionParams

	// The fields below are guarded by e.leases.mu.

	// held holds the id of each delivery whose entry in e.leases names
	// this subscription.
	held map[string]struct{}
	// firstExpiry is at or before the earliest lease expiry held, so
	// that credit need not look through held before then.
	firstExpiry time.Time
	// wake tells Run that credit came back.
	wake chan struct{}
}

// NewSubscription returns a subscription to p.Topic; Run serves it.
// Errors: *FieldError for a bad topic or prefetch, claim wait or
// negative recheck.
func (e *Engine) NewSubscription(p SubscriptionParams) (*Subscription, error) {
	if err := ValidateTopicName(p.Topic); err != nil {
		return nil, err
	}
	if p.Prefetch < 1 || p.Prefetch > SubscriptionPrefetchMax {
		return nil, Invalid("prefetch", "prefetch must be between 1 and %d", SubscriptionPrefetchMax)
	}
	if p.ClaimWait < 0 || p.ClaimWait > ClaimWaitLimit || p.Recheck < 0 || p.ReleaseTimeout < 0 {
		return nil, Invalid("", "a subscription's claim wait must be between 0 and %s, its recheck and release timeout not negative", ClaimWaitLimit)
	}
	p.ClaimWait = cmp.Or(p.ClaimWait, subscriptionClaimWaitDefault)
	return &Subscription{e: e, p: p, held: map[string]struct{}{}, wake: make(chan struct{}, 1)}, nil
}

// hold records j as held; e.leases.mu is held.
func (s *Subscription) hold(j *Job) {
	s.held[j.ID] = struct{}{}
	if s.firstExpiry.IsZero() || j.LeaseExpiresAt.Before(s.firstExpiry) {
		s.firstExpiry = j.LeaseExpiresAt
	}
}

// drop stops holding id, which gives its credit back, and wakes Run;
// e.leases.mu is held.
func (s *Subscription) drop(id string) {
	delete(s.held, id)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// credit drops the deliveries whose lease expired by now and returns the
// free credit and a time at or before the earliest expiry still held (zero
// when none is). It looks through what is held only once that time has
// come: a claim per few jobs must not cost a pass over a thousand held
// deliveries.
func (s *Subscription) credit(now time.Time) (free int, next time.Time) {
	l := &s.e.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(s.held) == 0 {
		s.firstExpiry = time.Time{}
		return s.p.Prefetch, time.Time{}
	}
	if now.Before(s.firstExpiry) {
		return s.p.Prefetch - len(s.held), s.firstExpiry
	}
	for id := range s.held {
		h := l.m[id]
		if !now.Before(h.expires) {
			l.end(id, h.lease)
			continue
		}
		if next.IsZero() || h.expires.Before(next) {
			next = h.expires
		}
	}
	s.firstExpiry = next
	return s.p.Prefetch - len(s.held), next
}

// Run claims due jobs of the topic while the subscription has credit and
// hands each to send, until ctx ends (nil) or send fails (its error).
// Jobs claimed and not yet sent when it returns stay held, for Release.
// While the engine drains it claims nothing more and waits for ctx to end,
// so that what it holds is not released while its acks may still come. A
// claim that fails is tried again after a pause that grows.
func (s *Subscription) Run(ctx context.Context, send func(*Job) error) error {
	clock := s.e.clock
	backoff := NewClaimBackoff(clock)
	if s.p.Recheck > 0 {
		// Ended before Run returns: nothing is told after it.
		watchCtx, stop := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			s.watch(watchCtx)
		}()
		defer func() {
			stop()
			<-watched
		}()
	}
	for {
		n, next := s.credit(clock.Now())
		if n == 0 {
			if !s.wait(ctx, next) {
				return nil
			}
			continue
		}
		jobs, err := s.e.claimFor(ctx, &ClaimJobsParams{Topic: s.p.Topic, Max: min(n, ClaimMaxLimit), Wait: s.p.ClaimWait, Via: s.p.Via, Consumer: s.p.Consumer}, s)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrDraining) {
			<-ctx.Done()
			return nil
		}
		if err != nil {
			s.e.log.Warn("core: a subscription's claim failed", "topic", s.p.Topic, "err", err, "retry_in", backoff.Failed())
			if !backoff.Wait(ctx) {
				return nil
			}
			continue
		}
		backoff.Succeeded()
		// Marked before the sends: one that fails may have reached the
		// subscriber, and its attempt then counts; those after it did not.
		s.markSent(jobs, true)
		for i, j := range jobs {
			if err := send(j); err != nil {
				s.markSent(jobs[i+1:], false)
				return err
			}
		}
	}
}

// markSent records whether the deliveries of jobs began to be sent.
func (s *Subscription) markSent(jobs []*Job, sent bool) {
	l := &s.e.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, j := range jobs {
		if h, ok := l.m[j.ID]; ok && h.lease == j.Lease {
			h.sent = sent
			l.m[j.ID] = h
		}
	}
}

// wait waits, with no credit left, until some comes back, the earliest
// held lease expires (next, when not zero) or ctx ends. It reports false
// when ctx ended.
func (s *Subscription) wait(ctx context.Context, next time.Time) bool {
	var expiry <-chan time.Time
	if !next.IsZero() {
		clock := s.e.clock
		t := clock.NewTimer(max(next.Sub(clock.Now()), 0))
		defer t.Stop()
		expiry = t.Chan()
	}
	select {
	case <-ctx.Done():
		return false
	case <-s.wake:
	case <-expiry:
	}
	return true
}

// heldDelivery is a delivery a subscription holds, as Release and recheck
// read it.
type heldDelivery struct {
	id, lease string
	sent      bool
	claimed   time.Time
}

// deliveries returns what the subscription holds; with detach, it stops
// holding them (their entries stay in the record until each is released).
func (s *Subscription) deliveries(detach bool) []heldDelivery {
	l := &s.e.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]heldDelivery, 0, len(s.held))
	for id := range s.held {
		h := l.m[id]
		out = append(out, heldDelivery{id: id, lease: h.lease, sent: h.sent, claimed: h.claimed})
		if detach {
			h.sub = nil
			l.m[id] = h
		}
	}
	if detach {
		clear(s.held)
	}
	return out
}

// watch rechecks the deliveries held, every Recheck, until ctx ends. It
// runs beside Run, whose claims may wait for due jobs meanwhile.
func (s *Subscription) watch(ctx context.Context) {
	clock := s.e.clock
	for {
		t := clock.NewTimer(s.p.Recheck)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
		s.recheck(ctx)
	}
}

// recheck reads back each delivery held for Recheck or longer: one whose
// job was cancelled is told (leases.cancelled), and one settled through
// another instance (no longer reserved under the lease sent) is forgotten.
// Younger deliveries are left alone: most are settled here soon, and a
// read of each would cost the store a call per delivery.
func (s *Subscription) recheck(ctx context.Context) {
	cutoff := s.e.clock.Now().Add(-s.p.Recheck)
	for _, d := range s.deliveries(false) {
		if d.claimed.After(cutoff) {
			continue
		}
		job, err := s.e.store.GetJob(ctx, d.id)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return // the store is down; leases still expire
		case job.State == StateReserved && job.Lease == d.lease:
			continue
		case job.State == StateCancelled:
			s.e.leases.cancelled(d.id, d.lease)
			continue
		}
		s.e.leases.ended(d.id, d.lease, ErrLeaseLost)
	}
}

// Release hands every delivery the subscription holds back for
// redelivery at once, and returns how many it released: one sent with its
// attempt counted (a nack with delay 0), one claimed and never sent with
// its attempt given back (Engine.Release), both with last_error
// SubscriptionReleaseReason, releaseConcurrency at a time, each call under
// ctx without its cancellation (its values, such as the transport, stay)
// and within the release timeout. A delivery settled meanwhile or whose
// lease ran out is not counted; one whose release fails is logged and
// comes back when its lease expires. The subscription holds nothing after
// it. Call it after Run returned.
func (s *Subscription) Release(ctx context.Context) int {
	ds := s.deliveries(true)
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, releaseConcurrency)
		released atomic.Int64
		zero     time.Duration
	)
	for _, d := range ds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(s.p.ReleaseTimeout, releaseTimeoutDefault))
			defer cancel()
			var err error
			if d.sent {
				err = s.e.Nack(rctx, &NackParams{ID: d.id, Lease: d.lease, Delay: &zero, Error: SubscriptionReleaseReason})
			} else {
				err = s.e.Release(rctx, &ReleaseParams{ID: d.id, Lease: d.lease, Error: SubscriptionReleaseReason})
			}
			switch {
			case err == nil:
				released.Add(1)
			case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
				// Settled meanwhile, or its lease ran out: nothing to release.
			default:
				s.e.log.Warn("core: releasing a subscriber's delivery failed; it comes back when its lease expires", "topic", s.p.Topic, "id", d.id, "err", err)
			}
		})
	}
	wg.Wait()
	return int(released.Load())
}

// subscriptionClaimWaitDefault is how long a subscription's claim waits
// when SubscriptionParams.ClaimWait is zero.
const subscriptionClaimWaitDefault = 30 * time.Second

// releaseTimeoutDefault bounds each release when
// SubscriptionParams.ReleaseTimeout is zero.
const releaseTimeoutDefault = 10 * time.Second
