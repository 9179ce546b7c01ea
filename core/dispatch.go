package core

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"
)

// dispatcher runs the claim-and-deliver loop of one push-delivered topic.
type dispatcher struct {
	topic  *Topic
	cancel context.CancelFunc
	done   chan struct{}
}

// claimWait is how long a dispatcher's claim waits for due jobs; it bounds
// how soon a stopped dispatcher notices, not lateness.
const claimWait = 5 * time.Second

// Start loads topic configurations and starts a dispatcher for every topic
// delivered by webhook or NATS, and the loop that follows configuration
// changes made by other instances. It returns once they run.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.started || e.stopped {
		e.mu.Unlock()
		return errors.New("core: engine already started or stopped")
	}
	e.started = true
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel = cancel
	e.deliverCtx, e.cancelDeliveries = context.WithCancel(context.WithoutCancel(ctx))
	e.mu.Unlock()

	if err := e.refreshTopics(ctx); err != nil {
		e.log.Warn("engine: first topic load failed; retrying in the background", "err", err)
	}
	e.migrateSchedules(ctx) // else again by the schedule loop

	e.loops.Add(2)
	go func() {
		defer e.loops.Done()
		e.refreshLoop(loopCtx)
	}()
	go func() {
		defer e.loops.Done()
		e.scheduleLoop(loopCtx)
	}()
	return nil
}

// Stop stops claiming, waits until ctx is done for in-flight deliveries to
// finish, and releases those still running then for redelivery. It is
// idempotent and safe before Start.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if e.stopped || !e.started {
		e.stopped = true
		e.mu.Unlock()
		return nil
	}
	e.stopped = true
	e.cancel()
	ds := make([]*dispatcher, 0, len(e.dispatchers))
	for name, d := range e.dispatchers {
		d.cancel()
		ds = append(ds, d)
		delete(e.dispatchers, name)
	}
	e.mu.Unlock()

	done := make(chan struct{})
	go func() {
		e.loops.Wait()
		for _, d := range ds {
			<-d.done
		}
		close(done)
	}()
	select {
	case <-done:
		e.cancelDeliveries()
		return nil
	case <-ctx.Done():
	}
	// Out of time: interrupt deliveries; each releases its job at once.
	e.cancelDeliveries()
	<-done
	return ctx.Err()
}

// poke asks the refresh loop to re-read topics now.
func (e *Engine) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *Engine) refreshLoop(ctx context.Context) {
	t := e.clock.NewTicker(e.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		case <-e.kick:
		}
		if err := e.refreshTopics(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("engine: topic refresh failed", "err", err)
		}
		e.tellDeaths(ctx)
	}
}

func (e *Engine) refreshTopics(ctx context.Context) error {
	list, err := e.store.ListTopicConfigs(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]*Topic, len(list))
	for _, t := range list {
		m[t.Name] = t
	}
	e.applyTopics(ctx, m, true)
	return nil
}

// applyTopics updates the topic cache with ts (replacing it whole when full)
// and starts, restarts or stops dispatchers to match.
func (e *Engine) applyTopics(_ context.Context, ts map[string]*Topic, full bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if full {
		e.topics = make(map[string]*Topic, len(ts))
	}
	for name, t := range ts {
		d := t.WithDefaults()
		d.Counts = Counts{}
		e.topics[name] = &d
	}
	if !e.started || e.stopped {
		return
	}
	for name, d := range e.dispatchers {
		t := e.topics[name]
		if t == nil || e.deliverers[t.Delivery.Type] == nil || !sameDispatch(t, d.topic) {
			d.cancel()
			delete(e.dispatchers, name)
		}
	}
	for name, t := range e.topics {
		deliverer := e.deliverers[t.Delivery.Type]
		if deliverer == nil || e.dispatchers[name] != nil {
			continue
		}
		ctx, cancel := context.WithCancel(e.deliverCtx)
		d := &dispatcher{topic: t, cancel: cancel, done: make(chan struct{})}
		e.dispatchers[name] = d
		go func() {
			defer close(d.done)
			e.dispatch(ctx, d.topic, deliverer)
		}()
	}
}

// sameDispatch reports whether a running dispatcher for b serves a as is.
func sameDispatch(a, b *Topic) bool {
	return reflect.DeepEqual(a.Delivery, b.Delivery) && a.Concurrency == b.Concurrency && reflect.DeepEqual(a.Backoff, b.Backoff)
}

// dispatch claims due jobs of one topic while slots are free and delivers
// each in its own goroutine, at most topic.Concurrency at once. While the
// deliverer's DeliveryGate refuses the topic's deliveries it claims nothing,
// and while it takes only n probes it claims at most n jobs.
func (e *Engine) dispatch(ctx context.Context, topic *Topic, deliverer Deliverer) {
	slots := make(chan struct{}, topic.Concurrency)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	backoff := NewClaimBackoff(e.clock)
	// ended is signalled when a delivery ends, so that a dispatcher waiting
	// for its destination's breaker learns at once how its probe went.
	ended := make(chan struct{}, 1)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
		for n < min(topic.Concurrency, ClaimMaxLimit) {
			select {
			case slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		if admits, wait := DeliveryAdmits(deliverer, topic); admits >= 0 && admits < n {
			// The destination refuses deliveries now (its breaker is open)
			// or takes only a few probes: claim no more than it takes, so
			// that no job is claimed only to be refused.
			for range n - admits {
				<-slots
			}
			n = admits
			if n == 0 {
				if !e.waitGate(ctx, wait, ended) {
					return
				}
				continue
			}
		}
		jobs, err := e.claim(ctx, &ClaimJobsParams{Topic: topic.Name, Max: n, Wait: claimWait, Via: topic.Delivery.Type})
		for range n - len(jobs) {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.log.Warn("engine: claim failed", "topic", topic.Name, "err", err, "retry_in", backoff.Failed())
			if !backoff.Wait(ctx) {
				return
			}
			continue
		}
		backoff.Succeeded()
		for _, job := range jobs {
			inflight.Add(1)
			go func() {
				defer func() { <-slots; inflight.Done() }()
				e.deliver(topic, deliverer, job)
				select {
				case ended <- struct{}{}:
				default:
				}
			}()
		}
	}
}

// gateWaitMin is the shortest a dispatcher waits on a destination that
// refuses deliveries, so that a gate answering no wait does not spin.
const gateWaitMin = 10 * time.Millisecond

// waitGate waits, on the engine's clock, until wait has passed or one of the
// dispatcher's deliveries ended (ended), and reports false when ctx ended
// first.
func (e *Engine) waitGate(ctx context.Context, wait time.Duration, ended <-chan struct{}) bool {
	t := e.clock.NewTimer(max(wait, gateWaitMin))
	defer t.Stop()
	select {
	case <-t.Chan():
	case <-ended:
	case <-ctx.Done():
		return false
	}
	return true
}

// storeTimeout bounds the store call that records a delivery's outcome.
const storeTimeout = 10 * time.Second

// deliver hands one claimed job over and records the outcome: ack on
// success, retry or bury on failure (bury at once for a *NoRetryError),
// release at once when shutdown interrupted it, retry when its RetryAfter
// has passed, and never bury, when the deliverer refused it unsent
// (ErrNotSent).
func (e *Engine) deliver(topic *Topic, deliverer Deliverer, job *Job) {
	dctx := e.deliverCtx
	stopTouch := e.keepLease(dctx, job)
	derr := deliverer.Deliver(dctx, &DeliverParams{Topic: topic, Job: job})
	stopTouch()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(dctx), storeTimeout)
	defer cancel()
	var err error
	switch {
	case derr == nil:
		_, err = e.store.AckJob(ctx, &AckJobParams{ID: job.ID, Lease: job.Lease})
	case dctx.Err() != nil:
		_, err = e.store.RetryJob(ctx, &RetryJobParams{ID: job.ID, Lease: job.Lease,
			RunAt: StoreTime(e.clock.Now()), Error: "delivery interrupted by shutdown"})
	case errors.Is(derr, ErrNotSent):
		// Refused before it was sent (the destination's breaker is open):
		// retried when the refusal ends, with the attempt given back, so
		// that it is never buried for an attempt that never reached the
		// destination.
		var wait time.Duration
		if ra, ok := errors.AsType[retryAfterError](derr); ok {
			wait = min(max(ra.RetryAfter(), 0), e.limits.MaxDelay)
		}
		_, err = e.store.RetryJob(ctx, &RetryJobParams{ID: job.ID, Lease: job.Lease,
			RunAt: StoreTime(e.clock.Now().Add(wait)), Error: CutError(derr.Error()), Unsent: true})
	case isNoRetry(derr):
		// The destination said retrying cannot help: dead now, not after
		// the attempts left.
		_, err = e.store.BuryJob(ctx, &BuryJobParams{ID: job.ID, Lease: job.Lease, Error: CutError(derr.Error())})
	default:
		var delay *time.Duration
		if ra, ok := errors.AsType[retryAfterError](derr); ok && ra.RetryAfter() > 0 {
			// The destination asked for a pause (HTTP Retry-After): honour
			// it when it is longer than the backoff, within the backoff's cap.
			b := e.backoff(job)
			d := min(max(ra.RetryAfter(), b.Delay(job.Attempt)), b.Ceiling())
			delay = &d
		}
		err = e.fail(ctx, job, delay, derr.Error())
	}
	if err != nil {
		e.log.Warn("engine: recording delivery outcome failed", "topic", job.Topic, "id", job.ID, "delivery_err", derr, "err", err)
	}
}

// isNoRetry reports whether a delivery error holds a *NoRetryError.
func isNoRetry(err error) bool {
	_, ok := errors.AsType[*NoRetryError](err)
	return ok
}

// retryAfterError is a delivery error that names how long the destination
// asked delayq to wait, such as webhook.StatusError for HTTP Retry-After.
type retryAfterError interface {
	error
	RetryAfter() time.Duration
}

// keepLease touches the job's lease every half TTR while a delivery runs, so
// a destination slower than the job's TTR (a webhook timeout may exceed it)
// does not lose the lease and get the job delivered twice. The returned
// func stops it.
func (e *Engine) keepLease(ctx context.Context, job *Job) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := e.clock.NewTicker(job.TTR / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.Chan():
				if _, err := e.store.TouchJob(ctx, &TouchJobParams{ID: job.ID, Lease: job.Lease}); err != nil && ctx.Err() == nil {
					e.log.Warn("engine: keeping a delivery's lease failed", "topic", job.Topic, "id", job.ID, "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}
