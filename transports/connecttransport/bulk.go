package connecttransport

import (
	"context"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// RequeueDead requeues the dead jobs of a topic that the filter matches,
// as POST /v1/topics/{topic}/dead/requeue (service.RequeueDead). Errors:
// InvalidArgument for a bad filter, PermissionDenied, NotFound for a topic
// with neither jobs nor configuration.
func (s *Server) RequeueDead(ctx context.Context, req *connect.Request[delayqv1.RequeueDeadRequest]) (*connect.Response[delayqv1.RequeueDeadResponse], error) {
	res, err := runBulk(ctx, req.Msg.Topic, req.Msg.Filter, s.svc.RequeueDead)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.RequeueDeadResponse{Result: res}), nil
}

// CancelJobs cancels the scheduled and ready jobs of a topic that the
// filter matches, as POST /v1/topics/{topic}/jobs/cancel
// (service.CancelJobs). Errors as RequeueDead.
func (s *Server) CancelJobs(ctx context.Context, req *connect.Request[delayqv1.CancelJobsRequest]) (*connect.Response[delayqv1.CancelJobsResponse], error) {
	res, err := runBulk(ctx, req.Msg.Topic, req.Msg.Filter, s.svc.CancelJobs)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.CancelJobsResponse{Result: res}), nil
}

// runBulk converts the filter m of topic (nil filters nothing), runs op
// and converts its result.
func runBulk(ctx context.Context, topic string, m *delayqv1.JobFilter, op func(context.Context, *service.BulkFilter) (service.BulkResult, error)) (*delayqv1.BulkResult, error) {
	f := service.BulkFilter{Topic: topic}
	if m != nil {
		f.ErrorContains, f.Key, f.State = m.ErrorContains, m.Key, core.State(m.State)
		f.Limit, f.DryRun, f.After = int(m.Limit), m.DryRun, m.After
		var err error
		if m.Since != "" {
			if f.Since, err = wire.ParseTimeText("since", m.Since); err != nil {
				return nil, err
			}
		}
		if m.Until != "" {
			if f.Until, err = wire.ParseTimeText("until", m.Until); err != nil {
				return nil, err
			}
		}
	}
	res, err := op(ctx, &f)
	if err != nil {
		return nil, err
	}
	return &delayqv1.BulkResult{Count: int32(res.Count), DryRun: res.DryRun, Sample: jobMessages(res.Sample), NextAfter: res.Next}, nil
}
