package wstransport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// opConcurrency bounds the nack and touch frames a connection handles at
// once; acks wait in the server's acker instead, which bounds its own store
// calls. Frames of different jobs run at once, since each is a store round
// trip and one at a time would cap a connection at one per round trip;
// frames of one job run in the order they came. Frames beyond it wait
// their turn without holding up the reader, up to prefetch more (see
// dispatch); past that, reading waits, which slows only this connection.
const opConcurrency = 64

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

	// held is the unacknowledged deliveries and the prefetch credit: the
	// engine gives credit back for a delivery settled through any
	// transport of this instance.
	held *core.Subscription

	mu sync.Mutex
	// closed is set when the connection ended; no ping or close starts
	// after it.
	closed    bool
	pingTimer *time.Timer

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

func newSubscription(srv *Server, conn *websocket.Conn, topic string, held *core.Subscription, prefetch int, log *slog.Logger) *subscription {
	ctx, cancel := context.WithCancel(core.WithTransport(context.Background(), core.TransportWebSocket))
	return &subscription{
		srv:       srv,
		conn:      conn,
		topic:     topic,
		prefetch:  prefetch,
		log:       log,
		ctx:       ctx,
		cancel:    cancel,
		held:      held,
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
// job read before it: the nacks and touches of opConcurrency jobs at a
// time, acks as the acker takes them. It waits only while prefetch +
// opConcurrency frames are pending, more than a subscriber has deliveries
// to settle: so when the store is slow, the reader still reads the pongs
// of a subscriber whose acks wait, and the ping does not close a
// connection whose only fault is the store's.
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
			// An ack waits in the server's acker, which bounds its own
			// store calls: holding a slot there would cap a connection's
			// acks at opConcurrency per batch's round trip.
			slot := f.Type != frameAck
			if slot {
				sub.opSlots <- struct{}{}
			}
			sub.handle(f)
			if slot {
				<-sub.opSlots
			}
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
// through the engine, which gives the delivery's credit back when it ends
// it. Failures are answered with an error frame; those other than a lost
// lease leave the delivery held, for the client to try again.
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
		sub.send(appendTouchedFrame(nil, f.ID, job.LeaseExpiresAt))
	case err == nil:
	case errors.Is(err, core.ErrConflict):
		sub.sendError(wire.WithMessage(
			fmt.Sprintf("the lease of job %q is lost: its ttr passed or the job was delivered again", truncate(f.ID, core.MaxIDLen)),
			err,
		), f.ID)
	case errors.Is(err, core.ErrNotFound):
		sub.sendError(wire.WithMessage(fmt.Sprintf("job %q not found", truncate(f.ID, core.MaxIDLen)), err), f.ID)
	default:
		sub.sendError(err, f.ID)
	}
}

// claimLoop claims due jobs of the topic while the connection has credit
// and sends each as a job frame; a frame not taken in time closes the
// connection.
func (sub *subscription) claimLoop() {
	err := sub.held.Run(sub.ctx, func(j *core.Job) error {
		return sub.write(appendJobFrame(make([]byte, 0, jobFrameSize(j)), j))
	})
	if err != nil && sub.ctx.Err() == nil {
		sub.log.Info("wstransport: a frame was not taken in time; closing the connection", "err", err)
		_ = sub.conn.CloseNow()
	}
}

// release hands every held delivery back for redelivery at once and
// returns how many it released (core.Subscription.Release).
func (sub *subscription) release() int {
	return sub.held.Release(core.WithTransport(context.Background(), core.TransportWebSocket))
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
