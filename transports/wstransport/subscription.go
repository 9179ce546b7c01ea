package wstransport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// opConcurrency bounds the ack, nack and touch frames a connection handles
// at once. Frames of different jobs run at once, since each is a store
// round trip and one at a time would cap a connection's acks at one per
// round trip; frames of one job run in the order they came. Frames beyond
// it wait their turn without holding up the reader, up to prefetch more
// (see dispatch); past that, reading waits, which slows only this
// connection.
const opConcurrency = 64

// releaseConcurrency bounds the releases in flight when a connection with
// many unacknowledged deliveries closes.
const releaseConcurrency = 16

// releaseReason is the last_error of a delivery released because its
// subscriber went away.
const releaseReason = "subscriber disconnected"

// subscription is one WebSocket connection subscribed to a topic. Its
// goroutines are the reader (the request's own), the claim loop, a worker
// per job with client frames being handled, and a ping that runs only
// while it waits for a pong; no lock is shared with other
// connections, and every write has its own timeout.
type subscription struct {
	srv      *Server
	conn     *websocket.Conn
	topic    string
	prefetch int
	log      *slog.Logger

	// ctx ends the claim loop: cancelled by stop and when the connection
	// ends.
	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// held maps the id of each unacknowledged delivery to its lease.
	held map[string]held
	// free is the prefetch credit: how many more deliveries may be sent.
	free int
	// firstExpiry is at or before the earliest lease expiry in held, so
	// that credit need not look through held before then.
	firstExpiry time.Time
	// closed is set when the connection ended; no ping or close starts
	// after it.
	closed    bool
	pingTimer *time.Timer
	// wake tells the claim loop that credit came back.
	wake chan struct{}

	// pending holds a token for each client frame read and not yet
	// handled, opSlots one for each being handled; running maps the id of
	// each job with a frame pending to the frames of that job read after
	// it.
	pending chan struct{}
	opSlots chan struct{}
	opsMu   sync.Mutex
	running map[string][]frame
	opsDone sync.WaitGroup

	claimDone chan struct{}
	// bg counts pings and the closing handshake started by stop.
	bg       sync.WaitGroup
	stopOnce sync.Once
}

// held is an unacknowledged delivery of a connection.
type held struct {
	lease   string
	expires time.Time
}

func newSubscription(srv *Server, conn *websocket.Conn, topic string, prefetch int, log *slog.Logger) *subscription {
	ctx, cancel := context.WithCancel(core.WithTransport(context.Background(), core.TransportWebSocket))
	return &subscription{
		srv:       srv,
		conn:      conn,
		topic:     topic,
		prefetch:  prefetch,
		log:       log,
		ctx:       ctx,
		cancel:    cancel,
		held:      map[string]held{},
		free:      prefetch,
		wake:      make(chan struct{}, 1),
		pending:   make(chan struct{}, prefetch+opConcurrency),
		opSlots:   make(chan struct{}, opConcurrency),
		running:   map[string][]frame{},
		claimDone: make(chan struct{}),
	}
}

// run serves the subscription until the connection ends, then releases
// every delivery that was not acknowledged. reqCtx ending (the server
// shutting down) closes the connection as stop does.
func (sub *subscription) run(reqCtx context.Context) {
	sub.log.Debug("wstransport: subscribed", "prefetch", sub.prefetch)
	unwatch := context.AfterFunc(reqCtx, func() { sub.stop(websocket.StatusGoingAway, closeReasonStopping) })
	defer unwatch()
	go func() {
		defer close(sub.claimDone)
		sub.claimLoop()
	}()
	sub.mu.Lock()
	// Keepalive is network time, as the pong's deadline and the idle
	// timeouts of proxies on the way: the real clock, not the engine's.
	sub.pingTimer = time.AfterFunc(sub.srv.cfg.PingInterval, sub.ping)
	sub.mu.Unlock()

	err := sub.readLoop()

	sub.cancel()
	sub.mu.Lock()
	sub.closed = true
	sub.pingTimer.Stop()
	sub.mu.Unlock()
	// Frames read before the end are handled first, so that an ack sent
	// just before closing counts; then whatever is still held goes back.
	sub.opsDone.Wait()
	<-sub.claimDone
	n := sub.release()
	sub.bg.Wait()
	_ = sub.conn.CloseNow()
	sub.log.Debug("wstransport: unsubscribed", "released", n, "reason", err)
}

// stop ends the subscription from the server's side: no more deliveries
// are sent, and the connection is closed with code after the closing
// handshake. Idempotent.
func (sub *subscription) stop(code websocket.StatusCode, reason string) {
	sub.stopOnce.Do(func() {
		sub.cancel()
		sub.mu.Lock()
		defer sub.mu.Unlock()
		if sub.closed {
			return
		}
		sub.bg.Add(1)
		go func() {
			defer sub.bg.Done()
			_ = sub.conn.Close(code, reason)
		}()
	})
}

// readLoop reads client frames until the connection ends and returns why.
// A bad frame, or one over Config.MaxFrameBytes, is answered with an error
// frame; the connection stays (see readOne).
func (sub *subscription) readLoop() error {
	for {
		if err := sub.readOne(); err != nil {
			return err
		}
	}
}

// dispatch handles f in a goroutine of its job, after the frames of that
// job read before it, opConcurrency jobs' frames at a time. It waits only
// while prefetch + opConcurrency frames are pending, more than a subscriber
// has deliveries to settle: so when the store is slow, the reader still
// reads the pongs of a subscriber whose acks wait, and the ping does not
// close a connection whose only fault is the store's.
func (sub *subscription) dispatch(f frame) {
	sub.pending <- struct{}{}
	sub.opsMu.Lock()
	if q, busy := sub.running[f.ID]; busy {
		sub.running[f.ID] = append(q, f)
		sub.opsMu.Unlock()
		return
	}
	sub.running[f.ID] = nil
	sub.opsMu.Unlock()
	sub.opsDone.Go(func() {
		for {
			sub.opSlots <- struct{}{}
			sub.handle(f)
			<-sub.opSlots
			<-sub.pending
			sub.opsMu.Lock()
			q := sub.running[f.ID]
			if len(q) == 0 {
				delete(sub.running, f.ID)
				sub.opsMu.Unlock()
				return
			}
			f, sub.running[f.ID] = q[0], q[1:]
			sub.opsMu.Unlock()
		}
	})
}

// handle runs one ack (through the server's acker), nack or touch
// through the engine. A lease that is
// gone (lost, or the job unknown) returns the delivery's credit; other
// failures leave the delivery held, for the client to try again.
func (sub *subscription) handle(f frame) {
	var (
		job *core.Job
		err error
	)
	if f.Type == frameAck {
		err = sub.srv.acks.ack(f.ID, f.Lease) // the batch has its own timeout
	} else {
		ctx, cancel := context.WithTimeout(core.WithTransport(context.Background(), core.TransportWebSocket), sub.srv.cfg.OpTimeout)
		if f.Type == frameNack {
			err = sub.srv.engine.Nack(ctx, &core.NackParams{ID: f.ID, Lease: f.Lease, Delay: f.Delay, Error: f.Error})
		} else {
			job, err = sub.srv.engine.Touch(ctx, &core.TouchJobParams{ID: f.ID, Lease: f.Lease})
		}
		cancel()
	}
	switch {
	case err == nil && f.Type == frameTouch:
		sub.extend(f.ID, f.Lease, job.LeaseExpiresAt)
		sub.send(appendTouchedFrame(nil, f.ID, job.LeaseExpiresAt))
	case err == nil:
		sub.forget(f.ID, f.Lease)
	case errors.Is(err, core.ErrConflict):
		sub.forget(f.ID, f.Lease)
		sub.sendError(wire.WithMessage(
			fmt.Sprintf("the lease of job %q is lost: its ttr passed or the job was delivered again", truncate(f.ID, core.MaxIDLen)),
			err,
		), f.ID)
	case errors.Is(err, core.ErrNotFound):
		sub.forget(f.ID, f.Lease)
		sub.sendError(wire.WithMessage(fmt.Sprintf("job %q not found", truncate(f.ID, core.MaxIDLen)), err), f.ID)
	default:
		sub.sendError(err, f.ID)
	}
}

// claimLoop claims due jobs of the topic while the connection has credit
// and sends each as a job frame.
func (sub *subscription) claimLoop() {
	clock := sub.srv.engine.Clock()
	backoff := core.NewClaimBackoff(clock)
	for {
		n, next := sub.credit(clock.Now())
		if n == 0 {
			if !sub.waitCredit(clock, next) {
				return
			}
			continue
		}
		jobs, err := sub.srv.engine.Claim(sub.ctx, &core.ClaimJobsParams{Topic: sub.topic, Max: min(n, core.ClaimMaxLimit), Wait: sub.srv.cfg.ClaimWait})
		sub.hold(jobs)
		if sub.ctx.Err() != nil {
			return // what was claimed is released with the rest
		}
		if errors.Is(err, core.ErrDraining) {
			// The instance shuts down: no more deliveries, but the
			// connection stays for the acks of those held until the
			// shutdown closes it.
			<-sub.ctx.Done()
			return
		}
		if err != nil {
			sub.log.Warn("wstransport: claim failed", "err", err, "retry_in", backoff.Failed())
			if !backoff.Wait(sub.ctx) {
				return
			}
			continue
		}
		backoff.Succeeded()
		for _, j := range jobs {
			if err := sub.write(appendJobFrame(make([]byte, 0, jobFrameSize(j)), j)); err != nil {
				if sub.ctx.Err() == nil {
					sub.log.Info("wstransport: a frame was not taken in time; closing the connection", "err", err)
					_ = sub.conn.CloseNow()
				}
				return
			}
		}
	}
}

// waitCredit waits, with no credit left, until some comes back, the
// earliest held lease expires (next, when not zero) or the subscription
// ends; it reports false for the last.
func (sub *subscription) waitCredit(clock core.Clock, next time.Time) bool {
	var expiry <-chan time.Time
	if !next.IsZero() {
		t := clock.NewTimer(max(next.Sub(clock.Now()), 0))
		defer t.Stop()
		expiry = t.Chan()
	}
	select {
	case <-sub.ctx.Done():
		return false
	case <-sub.wake:
	case <-expiry:
	}
	return true
}

// credit drops held deliveries whose lease expired by now, returning their
// credit, and returns the free credit and a time at or before the earliest
// expiry still held (zero when none is held). It looks through what is
// held only once that time has come: a claim per few jobs must not cost a
// pass over a thousand held deliveries.
func (sub *subscription) credit(now time.Time) (free int, next time.Time) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if len(sub.held) == 0 {
		sub.firstExpiry = time.Time{}
		return sub.free, time.Time{}
	}
	if now.Before(sub.firstExpiry) {
		return sub.free, sub.firstExpiry
	}
	next = time.Time{}
	for id, h := range sub.held {
		if !now.Before(h.expires) {
			delete(sub.held, id)
			sub.free++
			continue
		}
		if next.IsZero() || h.expires.Before(next) {
			next = h.expires
		}
	}
	sub.firstExpiry = next
	return sub.free, next
}

// hold records claimed jobs as held, taking their credit. A job held
// already lost that lease when it was claimed again.
func (sub *subscription) hold(jobs []*core.Job) {
	if len(jobs) == 0 {
		return
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for _, j := range jobs {
		if _, ok := sub.held[j.ID]; ok {
			sub.free++
		}
		sub.held[j.ID] = held{lease: j.Lease, expires: j.LeaseExpiresAt}
		sub.free--
		if sub.firstExpiry.IsZero() || j.LeaseExpiresAt.Before(sub.firstExpiry) {
			sub.firstExpiry = j.LeaseExpiresAt
		}
	}
}

// forget drops a held delivery that ended, returning its credit.
func (sub *subscription) forget(id, lease string) {
	sub.mu.Lock()
	h, ok := sub.held[id]
	ok = ok && h.lease == lease
	if ok {
		delete(sub.held, id)
		sub.free++
	}
	sub.mu.Unlock()
	if ok {
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

// extend records a touched lease's new expiry.
func (sub *subscription) extend(id, lease string, expires time.Time) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if h, ok := sub.held[id]; ok && h.lease == lease {
		h.expires = expires
		sub.held[id] = h
	}
}

// release hands every held delivery back for redelivery at once, with
// attempt counted, and returns how many it released.
func (sub *subscription) release() int {
	sub.mu.Lock()
	hs := sub.held
	sub.held = map[string]held{}
	sub.mu.Unlock()
	if len(hs) == 0 {
		return 0
	}
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, releaseConcurrency)
		released atomic.Int64
		zero     time.Duration
	)
	for id, h := range hs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(core.WithTransport(context.Background(), core.TransportWebSocket), sub.srv.cfg.OpTimeout)
			defer cancel()
			err := sub.srv.engine.Nack(ctx, &core.NackParams{ID: id, Lease: h.lease, Delay: &zero, Error: releaseReason})
			switch {
			case err == nil:
				released.Add(1)
			case errors.Is(err, core.ErrConflict), errors.Is(err, core.ErrNotFound):
				// Settled meanwhile, or its lease ran out: nothing to release.
			default:
				sub.log.Warn("wstransport: releasing a delivery failed; it comes back when its lease expires", "id", id, "err", err)
			}
		})
	}
	wg.Wait()
	return int(released.Load())
}

// ping checks that the peer answers, and closes the connection when it does
// not; it then schedules the next ping.
func (sub *subscription) ping() {
	sub.mu.Lock()
	if sub.closed {
		sub.mu.Unlock()
		return
	}
	sub.bg.Add(1)
	sub.mu.Unlock()
	defer sub.bg.Done()

	ctx, cancel := context.WithTimeout(context.Background(), sub.srv.cfg.PongTimeout)
	err := sub.conn.Ping(ctx)
	cancel()
	if err != nil {
		// After stop, the closing handshake ends the connection.
		if sub.ctx.Err() == nil {
			sub.log.Info("wstransport: no pong in time; closing the connection", "err", err)
			_ = sub.conn.CloseNow()
		}
		return
	}
	sub.mu.Lock()
	if !sub.closed {
		sub.pingTimer.Reset(sub.srv.cfg.PingInterval)
	}
	sub.mu.Unlock()
}

// write sends one frame within the write timeout. A frame not taken in time
// closes the connection.
func (sub *subscription) write(b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), sub.srv.cfg.WriteTimeout)
	defer cancel()
	return sub.conn.Write(ctx, websocket.MessageText, b)
}

// send writes a frame, ignoring failure: a connection that cannot take it
// is closing anyway.
func (sub *subscription) send(b []byte) { _ = sub.write(b) }

// sendError answers a client frame with an error frame naming its id.
func (sub *subscription) sendError(err error, id string) {
	e := toWireError(err)
	if e.Code == wire.CodeInternal || e.Code == wire.CodeUnavailable {
		sub.log.Warn("wstransport: frame failed", "id", id, "err", err)
	}
	sub.send(appendErrorFrame(nil, e, truncate(id, core.MaxIDLen)))
}
