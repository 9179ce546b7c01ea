package connecttransport

import (
	"context"
	"errors"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/internal/held"
	"github.com/delayq/delayq/transports/wire"
)

// Subscribe streams the due jobs of a topic to the caller, at most prefetch
// (default 16) unsettled at once, as a WebSocket subscriber gets them. The
// caller settles each with Ack, Nack or Touch; an Ack or Nack through this
// server gives its credit back at once, one through another instance or
// transport when the subscription next reads its deliveries back (every
// Config.Recheck while it has no credit), and a lost lease when it
// expires. When the stream ends (the caller cancels it, a delivery is not
// taken within Config.SendTimeout, the server stops), every delivery still
// held is released at once: nacked with delay 0 and last_error "subscriber
// disconnected". Errors: InvalidArgument for a bad topic or prefetch,
// PermissionDenied, Unavailable while the server stops or serves
// Config.MaxSubscribers streams already.
func (s *Server) Subscribe(ctx context.Context, req *connect.Request[delayqv1.SubscribeRequest], stream *connect.ServerStream[delayqv1.SubscribeResponse]) error {
	topic := req.Msg.Topic
	if err := core.ValidateTopicName(topic); err != nil {
		return err
	}
	if err := s.allowTopic(ctx, topic); err != nil {
		return err
	}
	prefetch := int(req.Msg.Prefetch)
	if prefetch == 0 {
		prefetch = PrefetchDefault
	}
	if prefetch < 1 || prefetch > PrefetchMax {
		return core.Invalid("prefetch", "prefetch must be between 1 and %d", PrefetchMax)
	}
	sub := &subscription{srv: s, topic: topic, stream: stream, rc: responseController(ctx)}
	// The server's index of who holds a delivery follows the set, for the
	// acks of unary calls (settled, touched).
	sub.held = held.New(held.Config{
		Prefetch: prefetch,
		HoldFunc: func(id string) { s.held.Store(id, sub) },
		DropFunc: func(id string) { s.held.CompareAndDelete(id, sub) },
	})
	sub.ctx, sub.cancel = context.WithCancel(ctx)
	defer sub.cancel()
	if err := s.addSubscription(sub); err != nil {
		return err
	}
	defer s.removeSubscription(sub)
	if fn := s.cfg.SubscribersFunc; fn != nil {
		fn(topic, 1)
		defer fn(topic, -1)
	}
	if sub.rc != nil {
		// The HTTP API bounded the request as any other; a stream lives
		// as long as its caller keeps it, and each send has its own bound.
		_ = sub.rc.SetReadDeadline(time.Time{})
		_ = sub.rc.SetWriteDeadline(time.Time{})
	}
	err := sub.run()
	n := sub.release(ctx)
	s.log.Debug("connecttransport: unsubscribed", "topic", topic, "released", n, "err", err)
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return wire.WithMessage("the server is stopping; subscribe again", core.ErrUnavailable)
}

// addSubscription counts sub among those served, unless the server stops
// or serves Config.MaxSubscribers already (an error wrapping
// core.ErrUnavailable).
func (s *Server) addSubscription(sub *subscription) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return wire.WithMessage("the server is stopping; subscribe again", core.ErrUnavailable)
	}
	if len(s.subs) >= s.cfg.MaxSubscribers {
		return wire.WithMessage("the server serves as many subscribers as it may (--max-subscribers); retry later", core.ErrUnavailable)
	}
	s.subs[sub] = struct{}{}
	s.handlers.Add(1)
	return nil
}

func (s *Server) removeSubscription(sub *subscription) {
	s.mu.Lock()
	delete(s.subs, sub)
	s.mu.Unlock()
	s.handlers.Done()
}

// settled tells the subscription that holds the delivery id with lease, if
// any, that an Ack or Nack of it through this server ended with err: done
// or failed (nil), or its lease is gone (a conflict, not found). Other
// errors leave it held, for the caller to try again.
func (s *Server) settled(id, lease string, err error) {
	if err != nil && !errors.Is(err, core.ErrConflict) && !errors.Is(err, core.ErrNotFound) {
		return
	}
	if v, ok := s.held.Load(id); ok {
		v.(*subscription).held.Forget(id, lease)
	}
}

// touched tells the subscription that holds the delivery id with lease,
// if any, when its lease now expires.
func (s *Server) touched(id, lease string, expires time.Time) {
	if v, ok := s.held.Load(id); ok {
		v.(*subscription).held.Extend(id, lease, expires)
	}
}

// subscription is one Subscribe stream. Its claim loop runs in the call's
// goroutine; unary calls of other goroutines give credit back through
// held.Forget.
type subscription struct {
	srv    *Server
	topic  string
	stream *connect.ServerStream[delayqv1.SubscribeResponse]
	// rc moves the deadline of each send; nil outside the HTTP server.
	rc *http.ResponseController

	// ctx ends the claim loop: the call's context, cancelled by Stop.
	ctx    context.Context
	cancel context.CancelFunc

	// held is the unsettled deliveries and the prefetch credit.
	held *held.Set
}

// run claims due jobs of the topic while the subscription has credit and
// sends each, until the context ends (nil) or a send fails (its error).
func (sub *subscription) run() error {
	clock := sub.srv.engine.Clock()
	backoff := core.NewClaimBackoff(clock)
	for {
		n, next := sub.held.Credit(clock.Now())
		if n == 0 {
			// Until credit comes back, a lease expires, it is time to read
			// the held deliveries back (then it does) or the stream ends.
			ok, recheckDue := sub.held.Wait(sub.ctx, clock, next, sub.srv.cfg.Recheck)
			if !ok {
				return nil
			}
			if recheckDue {
				sub.recheck()
			}
			continue
		}
		jobs, err := sub.srv.engine.Claim(sub.ctx, &core.ClaimJobsParams{Topic: sub.topic, Max: min(n, core.ClaimMaxLimit), Wait: sub.srv.cfg.ClaimWait, Via: core.ViaGRPC})
		sub.held.Hold(jobs)
		if sub.ctx.Err() != nil {
			return nil // what was claimed is released with the rest
		}
		if errors.Is(err, core.ErrDraining) {
			// The instance shuts down: no more deliveries, but the stream
			// stays, so that those held are not released while their
			// acks may still come, until the shutdown ends it.
			<-sub.ctx.Done()
			return nil
		}
		if err != nil {
			sub.srv.log.Warn("connecttransport: claim failed", "topic", sub.topic, "err", err, "retry_in", backoff.Failed())
			if !backoff.Wait(sub.ctx) {
				return nil
			}
			continue
		}
		backoff.Succeeded()
		for _, j := range jobs {
			if err := sub.send(j); err != nil {
				return err
			}
		}
	}
}

// send sends one delivery within Config.SendTimeout.
func (sub *subscription) send(j *core.Job) error {
	if sub.rc != nil {
		// A socket deadline: the real clock. Cleared after the send, since
		// on HTTP/2 a deadline that passes resets the stream even while
		// nothing is written.
		_ = sub.rc.SetWriteDeadline(time.Now().Add(sub.srv.cfg.SendTimeout))
		defer func() { _ = sub.rc.SetWriteDeadline(time.Time{}) }()
	}
	return sub.stream.Send(&delayqv1.SubscribeResponse{Delivery: deliveryMessage(j)})
}

// recheck reads each held delivery back and forgets those settled
// elsewhere (acked through another instance or transport): no longer
// reserved under the lease sent.
func (sub *subscription) recheck() {
	for id, lease := range sub.held.Leases() {
		job, err := sub.srv.engine.Get(sub.ctx, id)
		switch {
		case errors.Is(err, core.ErrNotFound):
			sub.held.Forget(id, lease)
		case err != nil:
			return // the store is down; leases still expire
		case job.State != core.StateReserved || job.Lease != lease:
			sub.held.Forget(id, lease)
		}
	}
}

// release hands every held delivery back for redelivery at once, with its
// attempt counted, and returns how many it released. ctx is the call's,
// whose values (the transport) it keeps past its end.
func (sub *subscription) release(ctx context.Context) int {
	return sub.held.Release(ctx, &held.ReleaseParams{
		NackFunc: sub.srv.engine.Nack,
		Timeout:  sub.srv.cfg.OpTimeout,
		FailedFunc: func(id string, err error) {
			sub.srv.log.Warn("connecttransport: releasing a delivery failed; it comes back when its lease expires", "id", id, "err", err)
		},
	})
}
