package connecttransport

import (
	"context"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/transports/wire"
)

// ListDead lists up to limit (default 100) dead jobs of a topic, oldest
// death first, as GET /v1/topics/{topic}/dead. Errors: InvalidArgument for
// a bad topic or limit.
func (s *Server) ListDead(ctx context.Context, req *connect.Request[delayqv1.ListDeadRequest]) (*connect.Response[delayqv1.ListDeadResponse], error) {
	m := req.Msg
	if err := s.allowTopic(ctx, m.Topic); err != nil {
		return nil, err
	}
	limit := int(m.Limit)
	if limit == 0 {
		limit = listLimitDefault
	}
	jobs, err := s.engine.ListDead(ctx, &core.ListDeadJobsParams{Topic: m.Topic, Limit: limit})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.ListDeadResponse{Jobs: jobMessages(jobs)}), nil
}

// GetTopic reads a topic with its counts, as GET /v1/topics/{topic}.
// Errors: NotFound when it is neither configured, paused nor has jobs.
func (s *Server) GetTopic(ctx context.Context, req *connect.Request[delayqv1.GetTopicRequest]) (*connect.Response[delayqv1.GetTopicResponse], error) {
	name := req.Msg.Name
	if err := s.allowTopic(ctx, name); err != nil {
		return nil, err
	}
	t, err := s.engine.GetTopic(ctx, name)
	if err != nil {
		return nil, describe(err, core.ErrNotFound, "topic %q not found", name)
	}
	return connect.NewResponse(&delayqv1.GetTopicResponse{Topic: topicMessage(t)}), nil
}

// ListTopics lists every topic that is configured, paused or has jobs,
// sorted by name, as GET /v1/topics; for a token restricted to some
// topics, only those.
func (s *Server) ListTopics(ctx context.Context, _ *connect.Request[delayqv1.ListTopicsRequest]) (*connect.Response[delayqv1.ListTopicsResponse], error) {
	ts, err := s.engine.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	out := &delayqv1.ListTopicsResponse{Topics: make([]*delayqv1.Topic, 0, len(ts))}
	id := identityFrom(ctx)
	for _, t := range ts {
		if id != nil && !id.AllowsTopic(t.Name) {
			continue
		}
		out.Topics = append(out.Topics, topicMessage(t))
	}
	return connect.NewResponse(out), nil
}

// PutTopic sets a topic's configuration, as PUT /v1/topics/{topic}, and
// answers the topic as GetTopic shows it. Errors: InvalidArgument naming
// the field, PermissionDenied for what a token restricted to some topics
// may not configure (see wire.AllowDelivery).
func (s *Server) PutTopic(ctx context.Context, req *connect.Request[delayqv1.PutTopicRequest]) (*connect.Response[delayqv1.PutTopicResponse], error) {
	name := req.Msg.Name
	if err := s.allowTopic(ctx, name); err != nil {
		return nil, err
	}
	t, err := topicConfig(name, req.Msg.Config)
	if err != nil {
		return nil, err
	}
	if err := wire.AllowDelivery(ctx, s.engine, identityFrom(ctx), t, s.cfg.NATSDeliverySubjects); err != nil {
		s.log.Info("connecttransport: permission denied", "token", identityFrom(ctx).Name, "topic", name, "err", err)
		return nil, err
	}
	if err := s.engine.PutTopic(ctx, t); err != nil {
		return nil, err
	}
	stored, err := s.engine.GetTopic(ctx, name)
	if err != nil {
		// Stored, but the read for counts failed: answer what was stored.
		s.log.Warn("connecttransport: reading a topic back after put failed", "topic", name, "err", err)
		stored = t
		stored.Configured = true
	}
	return connect.NewResponse(&delayqv1.PutTopicResponse{Topic: topicMessage(stored)}), nil
}

// DeleteTopic drops a topic's configuration (its jobs stay), as DELETE
// /v1/topics/{topic}. Errors: NotFound when it had none.
func (s *Server) DeleteTopic(ctx context.Context, req *connect.Request[delayqv1.DeleteTopicRequest]) (*connect.Response[delayqv1.DeleteTopicResponse], error) {
	name := req.Msg.Name
	if err := s.allowTopic(ctx, name); err != nil {
		return nil, err
	}
	if err := s.engine.DeleteTopic(ctx, name); err != nil {
		return nil, describe(err, core.ErrNotFound, "topic %q has no configuration", name)
	}
	return connect.NewResponse(&delayqv1.DeleteTopicResponse{}), nil
}

// PauseTopic stops a topic's deliveries on every instance, as POST
// /v1/topics/{topic}/pause. Idempotent. Errors: InvalidArgument for a bad
// name.
func (s *Server) PauseTopic(ctx context.Context, req *connect.Request[delayqv1.PauseTopicRequest]) (*connect.Response[delayqv1.PauseTopicResponse], error) {
	t, err := s.setPaused(ctx, req.Msg.Name, true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.PauseTopicResponse{Topic: t}), nil
}

// ResumeTopic starts a topic's deliveries again, as POST
// /v1/topics/{topic}/resume. Idempotent. Errors as PauseTopic.
func (s *Server) ResumeTopic(ctx context.Context, req *connect.Request[delayqv1.ResumeTopicRequest]) (*connect.Response[delayqv1.ResumeTopicResponse], error) {
	t, err := s.setPaused(ctx, req.Msg.Name, false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.ResumeTopicResponse{Topic: t}), nil
}

func (s *Server) setPaused(ctx context.Context, name string, paused bool) (*delayqv1.Topic, error) {
	if err := s.allowTopic(ctx, name); err != nil {
		return nil, err
	}
	if err := s.engine.SetTopicPaused(ctx, name, paused); err != nil {
		return nil, err
	}
	t, err := s.engine.GetTopic(ctx, name)
	if err != nil {
		// Done, but the read back failed (or, resumed, the topic has
		// neither jobs nor configuration): answer what is known.
		t = &core.Topic{Name: name, Paused: paused}
	}
	return topicMessage(t), nil
}
