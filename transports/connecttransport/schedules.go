package connecttransport

import (
	"context"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/transports/wire"
)

// nextRuns returns how many upcoming slots to answer: next, or
// wire.NextRunsDefault when absent. Errors: InvalidArgument on next.
func nextRuns(next *int32) (int, error) {
	if next == nil {
		return wire.NextRunsDefault, nil
	}
	return int(*next), wire.ValidateNext(int(*next))
}

// allowFunc is the server's topic check for the call of ctx, in the form
// wire's schedule checks take.
func (s *Server) allowFunc(ctx context.Context) func(topic string) error {
	return func(topic string) error { return s.allowTopic(ctx, topic) }
}

// PutSchedule creates or replaces a schedule, as PUT /v1/schedules/{name},
// and answers it as GetSchedule shows it. A token restricted to topics may
// name only its topics and may not replace another topic's schedule.
// Errors: InvalidArgument naming the field (nothing is stored),
// PermissionDenied.
func (s *Server) PutSchedule(ctx context.Context, req *connect.Request[delayqv1.PutScheduleRequest]) (*connect.Response[delayqv1.PutScheduleResponse], error) {
	m := req.Msg
	next, err := nextRuns(m.Next)
	if err != nil {
		return nil, err
	}
	sc, err := scheduleConfig(m.Name, m.Schedule)
	if err != nil {
		return nil, err
	}
	if err := wire.AllowSchedulePut(ctx, s.engine, sc, s.allowFunc(ctx)); err != nil {
		return nil, err
	}
	stored, err := s.engine.PutSchedule(ctx, sc)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.PutScheduleResponse{Schedule: scheduleMessage(stored, s.engine.Clock().Now(), next)}), nil
}

// GetSchedule reads a schedule with its next runs, as
// GET /v1/schedules/{name}. Errors: NotFound, also for a schedule of a
// topic the token may not use.
func (s *Server) GetSchedule(ctx context.Context, req *connect.Request[delayqv1.GetScheduleRequest]) (*connect.Response[delayqv1.GetScheduleResponse], error) {
	next, err := nextRuns(req.Msg.Next)
	if err != nil {
		return nil, err
	}
	sc, err := wire.ScheduleFor(ctx, s.engine, req.Msg.Name, s.allowFunc(ctx))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.GetScheduleResponse{Schedule: scheduleMessage(sc, s.engine.Clock().Now(), next)}), nil
}

// ListSchedules lists every schedule by name, as GET /v1/schedules; for a
// token restricted to topics, those of its topics.
func (s *Server) ListSchedules(ctx context.Context, req *connect.Request[delayqv1.ListSchedulesRequest]) (*connect.Response[delayqv1.ListSchedulesResponse], error) {
	next, err := nextRuns(req.Msg.Next)
	if err != nil {
		return nil, err
	}
	list, err := s.engine.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	now := s.engine.Clock().Now()
	out := &delayqv1.ListSchedulesResponse{Schedules: make([]*delayqv1.Schedule, 0, len(list))}
	id := identityFrom(ctx)
	for _, sc := range list {
		if id == nil || id.AllowsTopic(sc.Topic) {
			out.Schedules = append(out.Schedules, scheduleMessage(sc, now, next))
		}
	}
	return connect.NewResponse(out), nil
}

// DeleteSchedule drops a schedule, as DELETE /v1/schedules/{name}: no slot
// fires after it; the jobs it created stay. Errors: NotFound, also for a
// schedule of a topic the token may not use.
func (s *Server) DeleteSchedule(ctx context.Context, req *connect.Request[delayqv1.DeleteScheduleRequest]) (*connect.Response[delayqv1.DeleteScheduleResponse], error) {
	sc, err := wire.ScheduleFor(ctx, s.engine, req.Msg.Name, s.allowFunc(ctx))
	if err != nil {
		return nil, err
	}
	if err := s.engine.DeleteSchedule(ctx, sc.Name); err != nil {
		return nil, describe(err, core.ErrNotFound, "schedule %q not found", sc.Name)
	}
	return connect.NewResponse(&delayqv1.DeleteScheduleResponse{}), nil
}
