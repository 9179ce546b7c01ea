package connecttransport

import (
	"context"

	"connectrpc.com/connect"

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
	stored, err := s.svc.PutSchedule(ctx, sc)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.PutScheduleResponse{Schedule: scheduleMessage(stored, s.engine.Clock().Now(), next)}), nil
}

// GetSchedule reads a schedule with its next runs and its last runs (as
// many as runs asks), as GET /v1/schedules/{name}. Errors: NotFound, also
// for a schedule of a topic the token may not use; InvalidArgument on next
// or runs.
func (s *Server) GetSchedule(ctx context.Context, req *connect.Request[delayqv1.GetScheduleRequest]) (*connect.Response[delayqv1.GetScheduleResponse], error) {
	next, err := nextRuns(req.Msg.Next)
	if err != nil {
		return nil, err
	}
	sc, err := s.svc.GetSchedule(ctx, req.Msg.Name)
	if err != nil {
		return nil, err
	}
	runs, err := s.svc.ScheduleRuns(ctx, sc, int(req.Msg.Runs))
	if err != nil {
		return nil, err
	}
	m := scheduleMessage(sc, s.engine.Clock().Now(), next)
	for _, r := range runs {
		run := &delayqv1.ScheduleRun{Slot: timeText(r.Slot), JobId: r.JobID}
		if r.Job != nil {
			run.State = string(r.Job.State)
		}
		m.LastRuns = append(m.LastRuns, run)
	}
	return connect.NewResponse(&delayqv1.GetScheduleResponse{Schedule: m}), nil
}

// ListSchedules lists every schedule by name, as GET /v1/schedules; for a
// token restricted to topics, those of its topics.
func (s *Server) ListSchedules(ctx context.Context, req *connect.Request[delayqv1.ListSchedulesRequest]) (*connect.Response[delayqv1.ListSchedulesResponse], error) {
	next, err := nextRuns(req.Msg.Next)
	if err != nil {
		return nil, err
	}
	list, err := s.svc.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	now := s.engine.Clock().Now()
	out := &delayqv1.ListSchedulesResponse{Schedules: make([]*delayqv1.Schedule, len(list))}
	for i, sc := range list {
		out.Schedules[i] = scheduleMessage(sc, now, next)
	}
	return connect.NewResponse(out), nil
}

// DeleteSchedule drops a schedule, as DELETE /v1/schedules/{name}: no slot
// fires after it; the jobs it created stay. Errors: NotFound, also for a
// schedule of a topic the token may not use.
func (s *Server) DeleteSchedule(ctx context.Context, req *connect.Request[delayqv1.DeleteScheduleRequest]) (*connect.Response[delayqv1.DeleteScheduleResponse], error) {
	if err := s.svc.DeleteSchedule(ctx, req.Msg.Name); err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.DeleteScheduleResponse{}), nil
}

// RunSchedule pushes one job of the schedule's template now, as
// POST /v1/schedules/{name}/run (service.RunSchedule). Errors: NotFound,
// Aborted when the template's unique key has an unfinished job, and as
// Push.
func (s *Server) RunSchedule(ctx context.Context, req *connect.Request[delayqv1.RunScheduleRequest]) (*connect.Response[delayqv1.PushResponse], error) {
	res, err := s.svc.RunSchedule(ctx, req.Msg.Name)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(pushedMessage(res.Job, res.Replaced)), nil
}
