package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Defaults of SubscribeParams.
const (
	// PrefetchDefault is the default SubscribeParams.Prefetch.
	PrefetchDefault = 16
	// ReconnectMinDefault and ReconnectMaxDefault bound the pause before
	// a lost subscription is made again.
	ReconnectMinDefault = 100 * time.Millisecond
	ReconnectMaxDefault = 10 * time.Second
)

// Timings of a subscription.
const (
	// subscribeStable is how long a connection that delivered nothing must
	// have lasted for the reconnection backoff to start over.
	subscribeStable = 10 * time.Second
	// subscribeWriteTimeout bounds one frame's write.
	subscribeWriteTimeout = 10 * time.Second
	// subscribeReadLimit bounds a frame from the server: a job body of the
	// largest allowed size and its envelope, with room to spare.
	subscribeReadLimit = 64 << 20
	// touchMinInterval is the shortest pause between touches of a delivery.
	touchMinInterval = 100 * time.Millisecond
)

// HandlerFunc handles one delivery of a subscription. Returning nil acks
// the delivery (the job is done); returning an error nacks it with the
// error's text as the job's last_error, and the job is retried by its
// backoff, or after the delay of a RetryError (RetryIn), or goes dead on
// its last attempt. ctx ends when the
// subscription stops, its connection is lost or the delivery's lease is
// lost (context.Cause is then ErrLeaseLost); the handler must return soon
// after.
type HandlerFunc func(ctx context.Context, d *Delivery) error

// RetryError is an error a HandlerFunc returns to nack its delivery with a
// delay of its own instead of the job's backoff; RetryIn makes one.
type RetryError struct {
	// Err is why the attempt failed; its text becomes the job's last_error.
	Err error
	// Delay is how long to wait before the retry (0 to 366 days).
	Delay time.Duration
}

// RetryIn returns an error that nacks a subscription's delivery with err's
// text as last_error and a retry after delay, rather than by the backoff.
func RetryIn(delay time.Duration, err error) error { return &RetryError{Err: err, Delay: delay} }

// Error returns Err's text ("" for a nil Err).
func (e *RetryError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

// Unwrap returns Err.
func (e *RetryError) Unwrap() error { return e.Err }

// SubscribeParams configures Subscribe. Only HandlerFunc is required.
type SubscribeParams struct {
	// HandlerFunc handles each delivery.
	HandlerFunc HandlerFunc
	// Prefetch is how many deliveries the service sends ahead, held
	// unacknowledged at once (1-1000). Defaults to PrefetchDefault, or to
	// Concurrency when that is larger.
	Prefetch int
	// Concurrency is how many handlers run at once, at most Prefetch.
	// Defaults to Prefetch.
	Concurrency int
	// ReconnectMin and ReconnectMax bound the pause before a lost
	// connection is made again: it starts at ReconnectMin and doubles, up
	// to ReconnectMax, each pause spread over its upper half. Default to
	// ReconnectMinDefault (100ms) and ReconnectMaxDefault (10s).
	ReconnectMin, ReconnectMax time.Duration
	// ErrorFunc, when set, is told of what the subscription survives: a
	// lost connection (before reconnecting), a frame the service refused
	// (an *APIError whose ID names the job; a late ack matches
	// ErrLeaseLost), a handler that panicked. It must not block.
	ErrorFunc func(error)
}

// withDefaults returns p with defaults filled, or an error naming the bad
// field.
func (p SubscribeParams) withDefaults() (SubscribeParams, error) {
	if p.HandlerFunc == nil {
		return p, invalidArgument("HandlerFunc", "a handler is required")
	}
	if p.Prefetch == 0 {
		p.Prefetch = max(PrefetchDefault, p.Concurrency)
	}
	if p.Prefetch < 1 || p.Prefetch > 1000 {
		return p, invalidArgument("Prefetch", "want 1 to 1000, got %d", p.Prefetch)
	}
	if p.Concurrency == 0 {
		p.Concurrency = p.Prefetch
	}
	if p.Concurrency < 1 || p.Concurrency > p.Prefetch {
		return p, invalidArgument("Concurrency", "want 1 to Prefetch (%d), got %d", p.Prefetch, p.Concurrency)
	}
	if p.ReconnectMin <= 0 {
		p.ReconnectMin = ReconnectMinDefault
	}
	if p.ReconnectMax <= 0 {
		p.ReconnectMax = ReconnectMaxDefault
	}
	p.ReconnectMax = max(p.ReconnectMax, p.ReconnectMin)
	return p, nil
}

// Subscribe takes a topic's deliveries over a WebSocket
// (GET /v1/topics/{topic}/subscribe) and hands each to p.HandlerFunc, up
// to p.Concurrency at once, until ctx ends. It competes with the topic's
// other consumers: each delivery goes to one of them.
//
// From its arrival until it is settled (while it waits for a handler,
// when Concurrency is below Prefetch, and while its handler runs), a
// delivery's lease is kept alive by touches at half its remaining time, so
// a handler may run longer than the job's ttr. When it returns, the delivery is acked (nil) or nacked (an error,
// whose text becomes the job's last_error).
//
// A lost connection is made again after a pause that grows with each
// failure (p.ReconnectMin doubling to p.ReconnectMax, with jitter, at
// least the service's Retry-After); the handlers of the lost connection
// see their ctx end, since the service hands their deliveries out again.
//
// When ctx ends, Subscribe takes no more deliveries, waits for the running
// handlers (whose ctx has ended too), acks the deliveries of those that
// returned nil, and closes the connection, so the service hands back at
// once, for redelivery, the rest: those it sent that no handler took, and
// those whose handler returned an error (last_error "subscriber
// disconnected"; each release counts an attempt, as a lost lease does).
// Then it returns nil.
//
// It returns an error at once for bad params (ErrInvalidArgument), and
// when the service refuses the subscription for good: an *APIError
// matching ErrInvalidArgument (a bad topic), ErrUnauthenticated or
// ErrPermissionDenied. ErrUnavailable and transport failures are retried.
func (c *Client) Subscribe(ctx context.Context, topic string, p *SubscribeParams) error {
	if p == nil {
		return invalidArgument("HandlerFunc", "a handler is required")
	}
	params, err := p.withDefaults()
	if err != nil {
		return err
	}
	s := &subscription{c: c, topic: topic, p: params, url: c.subscribeURL(topic, params.Prefetch)}
	b := backoff{min: params.ReconnectMin, max: params.ReconnectMax}
	for {
		start := time.Now()
		delivered, err := s.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if pe, ok := errors.AsType[*permanentError](err); ok {
			return pe.err
		}
		if delivered > 0 || time.Since(start) >= subscribeStable {
			b.reset()
		}
		pause := b.next()
		if ae, ok := errors.AsType[*APIError](err); ok && ae.RetryAfter > pause {
			pause = ae.RetryAfter
		}
		s.report(fmt.Errorf("delayq: subscription to %s lost, reconnecting in %s: %w", topic, pause.Round(time.Millisecond), err))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// subscribeURL returns the WebSocket URL of a topic's subscribe route.
func (c *Client) subscribeURL(topic string, prefetch int) string {
	u := *c.base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	return u.String() + "/v1/topics/" + segment(topic) + "/subscribe?" + url.Values{"prefetch": {strconv.Itoa(prefetch)}}.Encode()
}

// permanentError ends Subscribe instead of reconnecting.
type permanentError struct{ err error }

// Error returns the refusal's text.
func (e *permanentError) Error() string { return e.err.Error() }

// Unwrap returns the refusal.
func (e *permanentError) Unwrap() error { return e.err }

// subscription is one run of Subscribe.
type subscription struct {
	c     *Client
	topic string
	p     SubscribeParams
	url   string
}

// report tells ErrorFunc of err.
func (s *subscription) report(err error) {
	if s.p.ErrorFunc != nil {
		s.p.ErrorFunc(err)
	}
}

// frame is a frame from the service: a job, a touch's answer or an error.
type frame struct {
	Type string `json:"type"`
	Delivery
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

// outFrame is a frame to the service: ack, nack or touch.
type outFrame struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Lease string `json:"lease"`
	Delay string `json:"delay,omitempty"`
	Error string `json:"error,omitempty"`
}

// held is a delivery received and not yet settled: waiting for a handler,
// or handled.
type held struct {
	d *Delivery
	// ctx is its handler's; it ends with the session, or with cause
	// ErrLeaseLost when the service says the lease is lost.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// touched gets the new expiry of each touch's answer.
	touched chan time.Time
	// done is closed when the delivery is released.
	done chan struct{}
}

// session is one connection of a subscription.
type session struct {
	*subscription
	conn      *websocket.Conn
	mu        sync.Mutex
	held      map[string]*held
	delivered atomic.Int64
	// touching tracks the keepAlive of each held delivery.
	touching sync.WaitGroup
}

// session runs one connection until it ends or ctx does, and returns how
// many deliveries it got and why it ended.
func (s *subscription) session(ctx context.Context) (int, error) {
	h := http.Header{}
	s.c.header(h)
	conn, res, err := websocket.Dial(ctx, s.url, &websocket.DialOptions{HTTPClient: s.c.http, HTTPHeader: h})
	if err != nil {
		if res != nil && res.StatusCode != 0 {
			body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
			ae := decodeError(res, body)
			if res.StatusCode >= 400 && res.StatusCode < 500 &&
				res.StatusCode != http.StatusRequestTimeout && res.StatusCode != http.StatusTooManyRequests {
				return 0, &permanentError{err: ae}
			}
			return 0, ae
		}
		return 0, transportError(ctx, "subscribe "+s.topic, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(subscribeReadLimit)
	ss := &session{subscription: s, conn: conn, held: map[string]*held{}}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan *held, s.p.Prefetch)
	readDone := make(chan error, 1)
	go func() { readDone <- ss.read(sctx, jobs) }()

	var wg sync.WaitGroup
	for range s.p.Concurrency {
		wg.Go(func() {
			for {
				select {
				case <-sctx.Done():
					return
				case h := <-jobs:
					if sctx.Err() != nil {
						ss.release(h)
						return
					}
					ss.handle(ctx, sctx, h)
				}
			}
		})
	}

	select {
	case err = <-readDone:
		// The connection is lost: its deliveries are handed out again, so
		// the handlers are told to stop.
		cancel()
		wg.Wait()
	case <-ctx.Done():
		// Stop: the running handlers settle what they hold, then a normal
		// close makes the service hand back the rest at once.
		wg.Wait()
		_ = conn.Close(websocket.StatusNormalClosure, "subscriber stopped")
		err = <-readDone
	}
	// Deliveries no handler took stop being touched with the session.
	cancel()
	ss.touching.Wait()
	if websocket.CloseStatus(err) == websocket.StatusGoingAway {
		err = fmt.Errorf("the server is shutting down: %w", err)
	}
	return int(ss.delivered.Load()), err
}

// read reads frames until the connection ends: job frames go to jobs,
// touched, cancelled and error frames to the handler of their delivery.
func (ss *session) read(ctx context.Context, jobs chan<- *held) error {
	for {
		typ, data, err := ss.conn.Read(context.Background())
		if err != nil {
			return err
		}
		if typ != websocket.MessageText {
			continue
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			ss.report(fmt.Errorf("delayq: subscription to %s: ignoring a frame that is not JSON: %w", ss.topic, err))
			continue
		}
		switch f.Type {
		case "job":
			d := f.Delivery
			ss.delivered.Add(1)
			if ctx.Err() != nil {
				continue
			}
			h := ss.hold(ctx, &d)
			select {
			case jobs <- h:
			case <-ctx.Done():
				ss.release(h)
			}
		case "cancelled":
			ss.mu.Lock()
			if h := ss.held[f.ID]; h != nil {
				h.cancel(ErrJobCancelled)
			}
			ss.mu.Unlock()
		case "touched":
			ss.mu.Lock()
			if h := ss.held[f.ID]; h != nil {
				select {
				case h.touched <- f.LeaseExpiresAt:
				default:
				}
			}
			ss.mu.Unlock()
		case "error":
			ae := &APIError{Code: f.Code, Message: f.Message, Field: f.Field, ID: f.ID, lease: true}
			if ae.Code == CodeConflict && f.ID != "" {
				ss.mu.Lock()
				if h := ss.held[f.ID]; h != nil {
					h.cancel(ErrLeaseLost)
				}
				ss.mu.Unlock()
			}
			ss.report(fmt.Errorf("delayq: subscription to %s: the service refused a frame: %w", ss.topic, ae))
		}
	}
}

// hold registers a delivery just received and starts touching its lease,
// which goes on while it waits for a handler and while one runs, until
// release.
func (ss *session) hold(sctx context.Context, d *Delivery) *held {
	hctx, hcancel := context.WithCancelCause(sctx)
	h := &held{d: d, ctx: hctx, cancel: hcancel, touched: make(chan time.Time, 1), done: make(chan struct{})}
	ss.mu.Lock()
	ss.held[d.ID] = h
	ss.mu.Unlock()
	ss.touching.Go(func() { ss.keepAlive(h) })
	return h
}

// release stops touching h's lease and forgets it.
func (ss *session) release(h *held) {
	close(h.done)
	h.cancel(nil)
	ss.mu.Lock()
	// The job may have been delivered again meanwhile (its lease lost),
	// and the entry be the new delivery's.
	if ss.held[h.d.ID] == h {
		delete(ss.held, h.d.ID)
	}
	ss.mu.Unlock()
}

// handle runs the handler of a held delivery and acks or nacks it by the
// result. ctx is the subscription's, sctx the session's.
func (ss *session) handle(ctx, sctx context.Context, h *held) {
	d := h.d
	var err error
	if h.ctx.Err() == nil {
		err = ss.call(h.ctx, d)
	} else {
		// Lost while it waited for a handler.
		err = context.Cause(h.ctx)
	}
	ss.release(h)

	if errors.Is(context.Cause(h.ctx), ErrLeaseLost) {
		// Nothing to settle: the delivery is no longer this handler's.
		return
	}
	if sctx.Err() != nil && ctx.Err() == nil {
		// The connection was lost: the service released the delivery.
		return
	}
	if err != nil && ctx.Err() != nil {
		// Stopping, and the handler did not finish (most likely it saw ctx
		// end): the close hands the delivery back at once. A nack would
		// apply the backoff, or, with no delay, let this closing
		// connection be sent the job again, counting an attempt more.
		return
	}
	f := outFrame{Type: "ack", ID: d.ID, Lease: d.Lease}
	if err != nil {
		f.Type, f.Error = "nack", err.Error()
		if re, ok := errors.AsType[*RetryError](err); ok {
			f.Delay = durationString(max(re.Delay, 0))
		}
	}
	if err := ss.write(ctx, &f); err != nil {
		ss.report(fmt.Errorf("delayq: subscription to %s: %s of job %q: %w", ss.topic, f.Type, d.ID, err))
	}
}

// call runs the handler, turning a panic into an error.
func (ss *session) call(ctx context.Context, d *Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
			ss.report(fmt.Errorf("delayq: subscription to %s: job %q: %w", ss.topic, d.ID, err))
		}
	}()
	return ss.p.HandlerFunc(ctx, d)
}

// keepAlive touches h's lease at half its remaining time until it is
// released or its ctx ends.
func (ss *session) keepAlive(h *held) {
	ctx, d, done := h.ctx, h.d, h.done
	expires := d.LeaseExpiresAt
	for {
		t := time.NewTimer(touchInterval(time.Until(expires)))
		select {
		case <-done:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case e := <-h.touched:
			t.Stop()
			expires = e
			continue
		case <-t.C:
		}
		if err := ss.write(ctx, &outFrame{Type: "touch", ID: d.ID, Lease: d.Lease}); err != nil {
			if ctx.Err() == nil {
				ss.report(fmt.Errorf("delayq: subscription to %s: touch of job %q: %w", ss.topic, d.ID, err))
			}
			return
		}
	}
}

// write sends f, within subscribeWriteTimeout even when ctx has ended (a
// stopping subscription still settles what its handlers did).
func (ss *session) write(ctx context.Context, f *outFrame) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), subscribeWriteTimeout)
	defer cancel()
	return ss.conn.Write(wctx, websocket.MessageText, jsonBody(f))
}
