package connecttransport

import (
	"cmp"
	"context"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/transports/wire"
)

// Subscribe streams the due jobs of a topic to the caller, at most prefetch
// (default 16) unsettled at once, as a WebSocket subscriber gets them. The
// caller settles each with Ack, Nack or Touch; one settled through any
// transport of this instance gives its credit back at once, one through
// another instance when the subscription next reads its deliveries back
// (every Config.Recheck, those held that long), and a lost lease when it
// expires (core.Subscription). When the stream ends (the caller cancels
// it, a delivery is not taken within Config.SendTimeout, the server
// stops), every delivery still held is released at once with last_error
// "subscriber disconnected": one sent with its attempt counted, one never
// sent without. A delivery whose job is cancelled while it runs (CancelJob
// with running) is told by a message with cancelled set to its id and no
// delivery: at once through this instance, within two Config.Recheck
// through another. Errors: InvalidArgument for a
// bad topic or prefetch,
// PermissionDenied, Unavailable while the server stops or serves
// Config.MaxSubscribers streams already.
func (s *Server) Subscribe(ctx context.Context, req *connect.Request[delayqv1.SubscribeRequest], stream *connect.ServerStream[delayqv1.SubscribeResponse]) error {
	topic := req.Msg.Topic
	if err := core.ValidateTopicName(topic); err != nil {
		return err
	}
	if err := s.svc.AllowTopic(ctx, topic); err != nil {
		return err
	}
	rc := responseController(ctx)
	// A stream takes one message at a time: a cancel's message comes from
	// the cancelling call, the deliveries from Run. None once the call ends.
	var (
		sendMu sync.Mutex
		ended  bool
	)
	send := func(m *delayqv1.SubscribeResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if ended {
			return nil
		}
		return s.send(stream, rc, m)
	}
	defer func() {
		sendMu.Lock()
		ended = true
		sendMu.Unlock()
	}()
	sub, err := s.engine.NewSubscription(core.SubscriptionParams{
		Topic: topic, Prefetch: cmp.Or(int(req.Msg.Prefetch), PrefetchDefault), Via: core.ViaGRPC, Consumer: req.Peer().Addr,
		ClaimWait: s.cfg.ClaimWait, Recheck: s.cfg.Recheck, ReleaseTimeout: s.cfg.OpTimeout,
		CancelledFunc: func(id string) { _ = send(&delayqv1.SubscribeResponse{Cancelled: id}) },
	})
	if err != nil {
		return err
	}
	// Stop cancels subCtx; ctx ends when the caller leaves.
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &subscriber{cancel: cancel}
	if err := s.addSubscription(st); err != nil {
		return err
	}
	defer s.removeSubscription(st)
	if fn := s.cfg.SubscribersFunc; fn != nil {
		fn(topic, 1)
		defer fn(topic, -1)
	}
	if rc != nil {
		// The HTTP API bounded the request as any other; a stream lives
		// as long as its caller keeps it, and each send has its own bound.
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
	}
	err = sub.Run(subCtx, func(j *core.Job) error { return send(&delayqv1.SubscribeResponse{Delivery: deliveryMessage(j)}) })
	n := sub.Release(ctx)
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
func (s *Server) addSubscription(st *subscriber) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return wire.WithMessage("the server is stopping; subscribe again", core.ErrUnavailable)
	}
	if len(s.subs) >= s.cfg.MaxSubscribers {
		return wire.WithMessage("the server serves as many subscribers as it may (--max-subscribers); retry later", core.ErrUnavailable)
	}
	s.subs[st] = struct{}{}
	s.handlers.Add(1)
	return nil
}

func (s *Server) removeSubscription(st *subscriber) {
	s.mu.Lock()
	delete(s.subs, st)
	s.mu.Unlock()
	s.handlers.Done()
}

// subscriber is a Subscribe call being served, which Stop ends.
type subscriber struct{ cancel context.CancelFunc }

// send sends one message of a stream within Config.SendTimeout; rc, nil
// outside the HTTP server, moves the deadline of the send.
func (s *Server) send(stream *connect.ServerStream[delayqv1.SubscribeResponse], rc *http.ResponseController, m *delayqv1.SubscribeResponse) error {
	if rc != nil {
		// A socket deadline: the real clock. Cleared after the send, since
		// on HTTP/2 a deadline that passes resets the stream even while
		// nothing is written.
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.SendTimeout))
		defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	}
	return stream.Send(m)
}
