package core

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"
)

// dispatchers is the engine's service that delivers push-delivered topics
// (webhook, NATS): one dispatcher per configured topic whose delivery type
// has a deliverer, started, restarted when its delivery changes and
// stopped as the topics change (apply). Its run loop owns the
// dispatchers; deliveries run under a context of their own, so that Stop
// lets those in flight finish.
type dispatchers struct {
	e    *Engine
	life startStop

	mu sync.Mutex
	// wanted is the latest topic set apply gave, for run to take.
	wanted map[string]*Topic
	// interrupt cancels the deliveries in flight, for a Stop out of time.
	interrupt context.CancelFunc
	// changed tells run that wanted changed.
	changed chan struct{}
}

// dispatcher is the claim-and-deliver loop of one topic.
type dispatcher struct {
	topic  *Topic
	cancel context.CancelFunc
	done   chan struct{}
}

// claimWait is how long a dispatcher's claim waits for due jobs; it bounds
// how soon a stopped dispatcher notices, not lateness.
const claimWait = 5 * time.Second

// Start runs the dispatchers of the topics apply gives, and returns at
// once. Errors: errStarted.
func (d *dispatchers) Start(ctx context.Context) error {
	deliveries, interrupt := context.WithCancel(context.WithoutCancel(ctx))
	d.mu.Lock()
	d.interrupt = interrupt
	d.mu.Unlock()
	err := d.life.start(ctx, func(ctx context.Context) { d.run(ctx, deliveries) })
	if err != nil {
		interrupt()
	}
	return err
}

// Stop stops claiming, waits until ctx is done for the deliveries in flight
// to finish, then interrupts those still running (each releases its job
// for redelivery at once) and waits for them, returning ctx's error. It is
// idempotent and safe before Start.
func (d *dispatchers) Stop(ctx context.Context) error {
	err := d.life.stop(ctx)
	d.mu.Lock()
	interrupt := d.interrupt
	d.mu.Unlock()
	if interrupt != nil {
		interrupt()
	}
	d.life.wait()
	return err
}

// apply makes the running dispatchers those of topics (name to
// configuration, defaults filled): run takes the latest set given.
func (d *dispatchers) apply(topics map[string]*Topic) {
	d.mu.Lock()
	d.wanted = topics
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// run starts, restarts and stops dispatchers to follow apply until ctx
// ends, then stops every dispatcher and waits for its deliveries.
func (d *dispatchers) run(ctx, deliveries context.Context) {
	running := map[string]*dispatcher{}
	defer func() {
		for _, ds := range running {
			ds.cancel()
		}
		for _, ds := range running {
			<-ds.done
		}
	}()
	for {
		d.mu.Lock()
		wanted := d.wanted
		d.mu.Unlock()
		d.follow(ctx, deliveries, running, wanted)
		select {
		case <-ctx.Done():
			return
		case <-d.changed:
		}
	}
}

// follow makes running the dispatchers of wanted.
func (d *dispatchers) follow(ctx, deliveries context.Context, running map[string]*dispatcher, wanted map[string]*Topic) {
	for name, ds := range running {
		t := wanted[name]
		if t == nil || d.e.deliverers[t.Delivery.Type] == nil || !sameDispatch(t, ds.topic) {
			ds.cancel()
			delete(running, name)
		}
	}
	for name, t := range wanted {
		deliverer := d.e.deliverers[t.Delivery.Type]
		if deliverer == nil || running[name] != nil {
			continue
		}
		claims, cancel := context.WithCancel(ctx)
		ds := &dispatcher{topic: t, cancel: cancel, done: make(chan struct{})}
		running[name] = ds
		go func() {
			defer close(ds.done)
			d.dispatch(claims, deliveries, ds.topic, deliverer)
		}()
	}
}

// sameDispatch reports whether a running dispatcher for b serves a as is.
func sameDispatch(a, b *Topic) bool {
	return reflect.DeepEqual(a.Delivery, b.Delivery) && a.Concurrency == b.Concurrency && reflect.DeepEqual(a.Backoff, b.Backoff)
}

// dispatch claims due jobs of one topic while slots are free and delivers
// each in its own goroutine under deliveries, at most topic.Concurrency at
// once, until ctx ends; it returns when the deliveries it began ended. While the
// deliverer's DeliveryGate refuses the topic's deliveries it claims nothing,
// and while it takes only n probes it claims at most n jobs.
func (d *dispatchers) dispatch(ctx, deliveries context.Context, topic *Topic, deliverer Deliverer) {
	e := d.e
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
				if !d.waitGate(ctx, wait, ended) {
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
				d.deliver(deliveries, topic, deliverer, job)
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
func (d *dispatchers) waitGate(ctx context.Context, wait time.Duration, ended <-chan struct{}) bool {
	e := d.e
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
func (d *dispatchers) deliver(dctx context.Context, topic *Topic, deliverer Deliverer, job *Job) {
	e := d.e
	stopTouch := d.keepLease(dctx, job)
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
func (d *dispatchers) keepLease(ctx context.Context, job *Job) (stop func()) {
	e := d.e
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
