package connecttransport

import (
	"cmp"
	"context"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/service"
)

// ListDead lists up to limit (default 100) dead jobs of a topic, oldest
// death first, as GET /v1/topics/{topic}/dead. Errors: InvalidArgument for
// a bad topic or limit.
func (s *Server) ListDead(ctx context.Context, req *connect.Request[delayqv1.ListDeadRequest]) (*connect.Response[delayqv1.ListDeadResponse], error) {
	m := req.Msg
	jobs, err := s.svc.ListDead(ctx, &core.ListDeadJobsParams{Topic: m.Topic, Limit: cmp.Or(int(m.Limit), service.ListLimitDefault)})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.ListDeadResponse{Jobs: jobMessages(jobs)}), nil
}

// GetTopic reads a topic with its counts, as GET /v1/topics/{topic}.
// Errors: NotFound when it is neither configured, paused nor has jobs.
func (s *Server) GetTopic(ctx context.Context, req *connect.Request[delayqv1.GetTopicRequest]) (*connect.Response[delayqv1.GetTopicResponse], error) {
	t, err := s.svc.GetTopic(ctx, req.Msg.Name)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.GetTopicResponse{Topic: topicMessage(t)}), nil
}

// ListTopics lists every topic that is configured, paused or has jobs,
// sorted by name, as GET /v1/topics; for a token restricted to some
// topics, only those.
func (s *Server) ListTopics(ctx context.Context, _ *connect.Request[delayqv1.ListTopicsRequest]) (*connect.Response[delayqv1.ListTopicsResponse], error) {
	ts, err := s.svc.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	out := &delayqv1.ListTopicsResponse{Topics: make([]*delayqv1.Topic, len(ts))}
	for i, t := range ts {
		out.Topics[i] = topicMessage(t)
	}
	return connect.NewResponse(out), nil
}

// PutTopic sets a topic's configuration, as PUT /v1/topics/{topic}, and
// answers the topic as GetTopic shows it. Errors: InvalidArgument naming
// the field, PermissionDenied for what a token restricted to some topics
// may not configure (see service.AllowDelivery).
func (s *Server) PutTopic(ctx context.Context, req *connect.Request[delayqv1.PutTopicRequest]) (*connect.Response[delayqv1.PutTopicResponse], error) {
	t, err := topicConfig(req.Msg.Name, req.Msg.Config)
	if err != nil {
		return nil, err
	}
	stored, err := s.svc.PutTopic(ctx, t)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.PutTopicResponse{Topic: topicMessage(stored)}), nil
}

// DeleteTopic drops a topic's configuration (its jobs stay), as DELETE
// /v1/topics/{topic}. Errors: NotFound when it had none.
func (s *Server) DeleteTopic(ctx context.Context, req *connect.Request[delayqv1.DeleteTopicRequest]) (*connect.Response[delayqv1.DeleteTopicResponse], error) {
	if err := s.svc.DeleteTopic(ctx, req.Msg.Name); err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.DeleteTopicResponse{}), nil
}

// PauseTopic stops a topic's deliveries on every instance, as POST
// /v1/topics/{topic}/pause. Idempotent. Errors: InvalidArgument for a bad
// name.
func (s *Server) PauseTopic(ctx context.Context, req *connect.Request[delayqv1.PauseTopicRequest]) (*connect.Response[delayqv1.PauseTopicResponse], error) {
	t, err := s.svc.SetTopicPaused(ctx, req.Msg.Name, true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.PauseTopicResponse{Topic: topicMessage(t)}), nil
}

// ResumeTopic starts a topic's deliveries again, as POST
// /v1/topics/{topic}/resume. Idempotent. Errors as PauseTopic.
func (s *Server) ResumeTopic(ctx context.Context, req *connect.Request[delayqv1.ResumeTopicRequest]) (*connect.Response[delayqv1.ResumeTopicResponse], error) {
	t, err := s.svc.SetTopicPaused(ctx, req.Msg.Name, false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.ResumeTopicResponse{Topic: topicMessage(t)}), nil
}
