package connecttransport

import (
	"cmp"
	"context"
	"strings"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/transports/wire"
)

// listLimitDefault is the limit of a job listing (dead jobs, jobs by key
// or by state) when the request gives none, as the HTTP API's.
const listLimitDefault = 100

// traceParent returns the call's W3C traceparent metadata when it is well
// formed, else "".
func traceParent(h interface{ Get(string) string }) string {
	tp := strings.TrimSpace(h.Get("traceparent"))
	if wire.ValidTraceParent(tp) {
		return tp
	}
	return ""
}

// Push creates a job, as POST /v1/jobs: the answer says replaced when the
// topic's unique keys replaced the key's job. Errors: InvalidArgument,
// PermissionDenied for a topic not the token's, ResourceExhausted over the
// token's quota, Aborted when the id names an unfinished job (the detail
// carries the job when the token may see it).
func (s *Server) Push(ctx context.Context, req *connect.Request[delayqv1.PushRequest]) (*connect.Response[delayqv1.PushResponse], error) {
	p, err := pushParams(req.Msg.Job)
	if err != nil {
		return nil, err
	}
	p.TraceParent = traceParent(req.Header())
	if err := s.allowTopic(ctx, p.Topic); err != nil {
		return nil, err
	}
	if err := s.allowIntake(ctx, 1); err != nil {
		return nil, err
	}
	// PushBatch of one rather than Push: a push to a topic whose unique
	// keys replace may replace a job, and says so.
	rs, err := s.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{p}})
	if err != nil {
		return nil, err
	}
	if rs[0].Err != nil {
		return nil, rs[0].Err
	}
	return connect.NewResponse(pushedMessage(rs[0].Job, rs[0].Replaced)), nil
}

// Replace creates or replaces the job job.id, as PUT /v1/jobs/{id}. Errors
// as Push; Aborted while the job is reserved.
func (s *Server) Replace(ctx context.Context, req *connect.Request[delayqv1.ReplaceRequest]) (*connect.Response[delayqv1.PushResponse], error) {
	p, err := pushParams(req.Msg.Job)
	if err != nil {
		return nil, err
	}
	if p.ID == "" {
		return nil, core.Invalid("id", "id is required to replace a job")
	}
	p.TraceParent = traceParent(req.Header())
	if err := s.allowTopic(ctx, p.Topic); err != nil {
		return nil, err
	}
	// As PUT /v1/jobs/{id}: the token must be allowed the topic of the
	// job it would replace too.
	if err := s.allowJob(ctx, p.ID); err != nil {
		return nil, err
	}
	if err := s.allowIntake(ctx, 1); err != nil {
		return nil, err
	}
	job, replaced, err := s.engine.Replace(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(pushedMessage(job, replaced)), nil
}

// PushBatch creates 1 to the engine's MaxBatch jobs, each succeeding or
// failing on its own, as POST /v1/jobs/batch: one result per job, in order.
// An empty batch is InvalidArgument, a larger one ResourceExhausted, and
// when every job failed with a server-side error the call fails with it.
func (s *Server) PushBatch(ctx context.Context, req *connect.Request[delayqv1.PushBatchRequest]) (*connect.Response[delayqv1.PushBatchResponse], error) {
	n := len(req.Msg.Jobs)
	limit := s.engine.Limits().MaxBatch
	switch {
	case n == 0:
		return nil, core.Invalid("jobs", "jobs must hold at least one job")
	case n > limit:
		return nil, core.TooLarge("jobs", "a batch holds at most %d jobs, not %d", limit, n)
	}
	// The quota counts every job of the batch, and refuses it whole.
	if err := s.allowIntake(ctx, n); err != nil {
		return nil, err
	}
	results := make([]core.PushResult, n)
	params := make([]*core.PushParams, 0, n)
	idx := make([]int, 0, n)
	tp := traceParent(req.Header())
	for i, spec := range req.Msg.Jobs {
		p, err := pushParams(spec)
		if err == nil {
			err = s.allowTopic(ctx, p.Topic)
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		p.TraceParent = tp
		params = append(params, p)
		idx = append(idx, i)
	}
	if len(params) > 0 {
		pushed, err := s.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: params})
		if err != nil {
			return nil, err
		}
		for k, res := range pushed {
			results[idx[k]] = res
		}
	}
	errs := make([]error, n)
	for i, res := range results {
		errs[i] = res.Err
	}
	if err := s.batchServerError("jobs", errs); err != nil {
		return nil, err
	}
	out := &delayqv1.PushBatchResponse{Results: make([]*delayqv1.PushResult, n)}
	for i, res := range results {
		if res.Err != nil {
			out.Results[i] = &delayqv1.PushResult{Error: errorMessage(s.apiError(ctx, res.Err))}
			continue
		}
		out.Results[i] = &delayqv1.PushResult{Job: pushedMessage(res.Job, res.Replaced)}
	}
	return connect.NewResponse(out), nil
}

// batchServerError returns the first error of a batch when every item
// failed with a server-side error (the backend is down), so that the batch
// is retried as one, as the HTTP API answers it; when only some did, it
// logs the first once for the batch, not once per item.
func (s *Server) batchServerError(what string, errs []error) error {
	var first error
	n := 0
	for _, err := range errs {
		if err == nil {
			continue
		}
		if code := wire.ToError(err).Code; code == wire.CodeInternal || code == wire.CodeUnavailable || code == wire.CodeUnimplemented {
			first = cmp.Or(first, err)
			n++
		}
	}
	switch {
	case n == len(errs):
		return first
	case n > 0:
		s.log.Warn("connecttransport: items of a batch failed server-side", "batch", what, "failed", n, "first", first)
	}
	return nil
}

// GetJob reads a job, as GET /v1/jobs/{id}. Errors: NotFound.
func (s *Server) GetJob(ctx context.Context, req *connect.Request[delayqv1.GetJobRequest]) (*connect.Response[delayqv1.GetJobResponse], error) {
	id := req.Msg.Id
	if err := s.allowJob(ctx, id); err != nil {
		return nil, err
	}
	job, err := s.engine.Get(ctx, id)
	if err != nil {
		return nil, describe(err, core.ErrNotFound, "job %q not found", id)
	}
	return connect.NewResponse(&delayqv1.GetJobResponse{Job: jobMessage(job)}), nil
}

// CancelJob cancels a job, as DELETE /v1/jobs/{id}. Errors: NotFound
// unknown or already finished, Aborted while reserved.
func (s *Server) CancelJob(ctx context.Context, req *connect.Request[delayqv1.CancelJobRequest]) (*connect.Response[delayqv1.CancelJobResponse], error) {
	id := req.Msg.Id
	if err := s.allowJob(ctx, id); err != nil {
		return nil, err
	}
	if err := s.engine.Cancel(ctx, id); err != nil {
		return nil, describe(err, core.ErrNotFound, "job %q not found or already finished", id)
	}
	return connect.NewResponse(&delayqv1.CancelJobResponse{}), nil
}

// FindJobs lists a page of a topic's jobs with a business key, as GET
// /v1/topics/{topic}/jobs?key=; a full page sets next_after. Errors:
// InvalidArgument for a missing key or a bad limit or cursor.
func (s *Server) FindJobs(ctx context.Context, req *connect.Request[delayqv1.FindJobsRequest]) (*connect.Response[delayqv1.FindJobsResponse], error) {
	m := req.Msg
	if err := s.allowTopic(ctx, m.Topic); err != nil {
		return nil, err
	}
	limit := int(m.Limit)
	if limit == 0 {
		limit = listLimitDefault
	}
	jobs, err := s.engine.FindJobs(ctx, &core.FindJobsParams{Topic: m.Topic, Key: m.Key, After: m.After, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := &delayqv1.FindJobsResponse{Jobs: jobMessages(jobs)}
	if len(jobs) == limit {
		out.NextAfter = jobs[len(jobs)-1].ID
	}
	return connect.NewResponse(out), nil
}

// ListJobs lists a page of a topic's jobs in one state, as GET
// /v1/topics/{topic}/jobs?state=; next_after is set when there may be
// more. With contains it answers the jobs whose body holds it among at most
// scan jobs read from after (core.Engine.SearchJobs), and says how many it
// read. Errors: InvalidArgument for a bad topic, state, limit, cursor or
// scan, and for a scan without contains.
func (s *Server) ListJobs(ctx context.Context, req *connect.Request[delayqv1.ListJobsRequest]) (*connect.Response[delayqv1.ListJobsResponse], error) {
	m := req.Msg
	if err := s.allowTopic(ctx, m.Topic); err != nil {
		return nil, err
	}
	p := core.ListJobsParams{Topic: m.Topic, State: core.State(m.State), After: m.After, Limit: cmp.Or(int(m.Limit), listLimitDefault)}
	if m.Contains == "" {
		// A scan bounds only a search: refused rather than ignored, as
		// over HTTP, so that a caller who forgot contains learns it.
		if m.Scan != 0 {
			return nil, core.Invalid("scan", "scan needs contains")
		}
		page, err := s.engine.ListJobs(ctx, &p)
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&delayqv1.ListJobsResponse{Jobs: jobMessages(page.Jobs), NextAfter: page.Next}), nil
	}
	// A scan of 0 is absent: the engine's default.
	page, err := s.engine.SearchJobs(ctx, &core.SearchJobsParams{ListJobsParams: p, Contains: m.Contains, Scan: int(m.Scan)})
	if err != nil {
		return nil, err
	}
	scanned := int32(page.Scanned)
	return connect.NewResponse(&delayqv1.ListJobsResponse{Jobs: jobMessages(page.Jobs), NextAfter: page.Next, Scanned: &scanned}), nil
}

// CancelByKey cancels a topic's unfinished jobs with a business key, as
// DELETE /v1/topics/{topic}/jobs?key=, and says which it cancelled and
// which it left because they are reserved.
func (s *Server) CancelByKey(ctx context.Context, req *connect.Request[delayqv1.CancelByKeyRequest]) (*connect.Response[delayqv1.CancelByKeyResponse], error) {
	m := req.Msg
	if err := s.allowTopic(ctx, m.Topic); err != nil {
		return nil, err
	}
	res, err := s.engine.CancelByKey(ctx, m.Topic, m.Key)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.CancelByKeyResponse{Cancelled: res.Cancelled, Reserved: res.Reserved}), nil
}
