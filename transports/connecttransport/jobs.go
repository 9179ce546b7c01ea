package connecttransport

import (
	"cmp"
	"context"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// Push creates a job, as POST /v1/jobs (service.Push): the answer says
// replaced when the topic's unique keys replaced the key's job. Errors:
// InvalidArgument, PermissionDenied for a topic not the token's,
// ResourceExhausted over the token's quota, Aborted when the id names an
// unfinished job (the detail carries the job when the token may see it).
func (s *Server) Push(ctx context.Context, req *connect.Request[delayqv1.PushRequest]) (*connect.Response[delayqv1.PushResponse], error) {
	p, err := pushParams(req.Msg.Job)
	if err != nil {
		return nil, err
	}
	p.TraceParent = wire.TraceParent(req.Header())
	res, err := s.svc.Push(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(pushedMessage(res.Job, res.Replaced)), nil
}

// Replace creates or replaces the job job.id, as PUT /v1/jobs/{id}. Errors
// as Push; Aborted while the job is reserved.
func (s *Server) Replace(ctx context.Context, req *connect.Request[delayqv1.ReplaceRequest]) (*connect.Response[delayqv1.PushResponse], error) {
	p, err := pushParams(req.Msg.Job)
	if err != nil {
		return nil, err
	}
	p.TraceParent = wire.TraceParent(req.Header())
	job, replaced, err := s.svc.Replace(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(pushedMessage(job, replaced)), nil
}

// PushBatch creates 1 to the engine's MaxBatch jobs, each succeeding or
// failing on its own, as POST /v1/jobs/batch (service.PushBatch): one
// result per job, in order. An empty batch is InvalidArgument, a larger
// one ResourceExhausted, and when every job failed with a server-side
// error the call fails with it.
func (s *Server) PushBatch(ctx context.Context, req *connect.Request[delayqv1.PushBatchRequest]) (*connect.Response[delayqv1.PushBatchResponse], error) {
	tp := wire.TraceParent(req.Header())
	results, err := s.svc.PushBatch(ctx, len(req.Msg.Jobs), func(i int) (*core.PushParams, error) {
		p, err := pushParams(req.Msg.Jobs[i])
		if err == nil {
			p.TraceParent = tp
		}
		return p, err
	})
	if err != nil {
		return nil, err
	}
	out := &delayqv1.PushBatchResponse{Results: make([]*delayqv1.PushResult, len(results))}
	for i, res := range results {
		if res.Err != nil {
			out.Results[i] = &delayqv1.PushResult{Error: errorMessage(s.apiError(ctx, res.Err))}
			continue
		}
		out.Results[i] = &delayqv1.PushResult{Job: pushedMessage(res.Job, res.Replaced)}
	}
	return connect.NewResponse(out), nil
}

// GetJob reads a job with its trail, as GET /v1/jobs/{id}. Errors:
// NotFound.
func (s *Server) GetJob(ctx context.Context, req *connect.Request[delayqv1.GetJobRequest]) (*connect.Response[delayqv1.GetJobResponse], error) {
	job, err := s.svc.Get(ctx, req.Msg.Id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.GetJobResponse{Job: trailMessage(job)}), nil
}

// CancelJob cancels a job, as DELETE /v1/jobs/{id}; with running, one
// being delivered too. Errors: NotFound unknown or already finished,
// Aborted while reserved without running.
func (s *Server) CancelJob(ctx context.Context, req *connect.Request[delayqv1.CancelJobRequest]) (*connect.Response[delayqv1.CancelJobResponse], error) {
	if err := s.svc.Cancel(ctx, &core.CancelJobParams{ID: req.Msg.Id, Running: req.Msg.Running}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.CancelJobResponse{}), nil
}

// FindJobs lists a page of a topic's jobs with a business key, as GET
// /v1/topics/{topic}/jobs?key=; a full page sets next_after. Errors:
// InvalidArgument for a missing key or a bad limit or cursor.
func (s *Server) FindJobs(ctx context.Context, req *connect.Request[delayqv1.FindJobsRequest]) (*connect.Response[delayqv1.FindJobsResponse], error) {
	m := req.Msg
	jobs, next, err := s.svc.FindJobs(ctx, &core.FindJobsParams{Topic: m.Topic, Key: m.Key, After: m.After, Limit: cmp.Or(int(m.Limit), service.ListLimitDefault)})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.FindJobsResponse{Jobs: jobMessages(jobs), NextAfter: next}), nil
}

// ListJobs lists a page of a topic's jobs in one state, as GET
// /v1/topics/{topic}/jobs?state=; next_after is set when there may be
// more. With contains it answers the jobs whose body holds it among at most
// scan jobs read from after (core.Engine.SearchJobs; a scan of 0 is the
// engine's default), and says how many it read. Errors: InvalidArgument for
// a bad topic, state, limit, cursor or scan, and for a scan without
// contains.
func (s *Server) ListJobs(ctx context.Context, req *connect.Request[delayqv1.ListJobsRequest]) (*connect.Response[delayqv1.ListJobsResponse], error) {
	m := req.Msg
	jobs, next, scanned, err := s.svc.ListJobs(ctx, &core.SearchJobsParams{ListJobsParams: core.ListJobsParams{
		Topic: m.Topic, State: core.State(m.State), After: m.After, Limit: cmp.Or(int(m.Limit), service.ListLimitDefault),
	}, Contains: m.Contains, Scan: int(m.Scan)}, m.Contains != "")
	if err != nil {
		return nil, err
	}
	out := &delayqv1.ListJobsResponse{Jobs: jobMessages(jobs), NextAfter: next}
	if scanned >= 0 {
		n := int32(scanned)
		out.Scanned = &n
	}
	return connect.NewResponse(out), nil
}

// CancelByKey cancels a topic's unfinished jobs with a business key, as
// DELETE /v1/topics/{topic}/jobs?key=, and says which it cancelled and
// which it left because they are reserved.
func (s *Server) CancelByKey(ctx context.Context, req *connect.Request[delayqv1.CancelByKeyRequest]) (*connect.Response[delayqv1.CancelByKeyResponse], error) {
	res, err := s.svc.CancelByKey(ctx, req.Msg.Topic, req.Msg.Key)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.CancelByKeyResponse{Cancelled: res.Cancelled, Reserved: res.Reserved}), nil
}
