package connecttransport

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// releaseTimeout bounds giving back the jobs of a claim whose client left.
const releaseTimeout = 5 * time.Second

// Claim takes up to max (default 1) due jobs of a topic, waiting up to wait
// for the first, as POST /v1/topics/{topic}/claim: none when the wait ran
// out. Jobs claimed for a client that went away are released at once.
// Errors: InvalidArgument for a bad topic, max or wait.
func (s *Server) Claim(ctx context.Context, req *connect.Request[delayqv1.ClaimRequest]) (*connect.Response[delayqv1.ClaimResponse], error) {
	m := req.Msg
	if err := s.allowTopic(ctx, m.Topic); err != nil {
		return nil, err
	}
	maxJobs := 1
	if m.Max != nil {
		maxJobs = int(*m.Max)
	}
	wait, err := parseDuration("wait", m.Wait)
	if err != nil {
		return nil, err
	}
	if rc := responseController(ctx); rc != nil && wait > 0 {
		// The answer comes after the wait (the engine refuses more than
		// core.ClaimWaitLimit). A socket deadline: the real clock.
		_ = rc.SetWriteDeadline(time.Now().Add(min(wait, core.ClaimWaitLimit) + s.cfg.WriteTimeout))
	}
	jobs, err := s.engine.Claim(ctx, &core.ClaimJobsParams{Topic: m.Topic, Max: maxJobs, Wait: wait, Via: core.ViaGRPC})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil && len(jobs) > 0 {
		// The client left while the jobs were claimed: hand them out again
		// now rather than when their leases expire.
		s.release(ctx, jobs, "claim abandoned: the client went away")
		return nil, err
	}
	out := &delayqv1.ClaimResponse{Jobs: make([]*delayqv1.Delivery, len(jobs))}
	for i, j := range jobs {
		out.Jobs[i] = deliveryMessage(j)
	}
	return connect.NewResponse(out), nil
}

// release hands the deliveries of jobs, never sent, back at once with their
// attempts (core.Engine.Release).
func (s *Server) release(ctx context.Context, jobs []*core.Job, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	for _, j := range jobs {
		if err := s.engine.Release(ctx, &core.ReleaseParams{ID: j.ID, Lease: j.Lease, Error: reason}); err != nil {
			s.log.Warn("connecttransport: releasing an abandoned claim failed", "id", j.ID, "err", err)
		}
	}
}

// Ack marks a delivery done, as POST /v1/jobs/{id}/ack. Errors:
// InvalidArgument without a lease, NotFound, Aborted when the lease is
// lost.
func (s *Server) Ack(ctx context.Context, req *connect.Request[delayqv1.AckRequest]) (*connect.Response[delayqv1.AckResponse], error) {
	m := req.Msg
	if err := s.allowJob(ctx, m.Id); err != nil {
		return nil, err
	}
	if err := s.engine.Ack(ctx, &core.AckJobParams{ID: m.Id, Lease: m.Lease}); err != nil {
		return nil, describeLease(err, m.Id)
	}
	return connect.NewResponse(&delayqv1.AckResponse{}), nil
}

// nackParams turns a nack into the engine's parameters; a bad delay is a
// *core.FieldError on delay.
func nackParams(m *delayqv1.NackRequest) (*core.NackParams, error) {
	p := &core.NackParams{ID: m.Id, Lease: m.Lease, Error: m.Error}
	if m.Delay != "" {
		d, err := parseDuration("delay", m.Delay)
		if err != nil {
			return nil, err
		}
		p.Delay = &d
	}
	return p, nil
}

// Nack fails a delivery, as POST /v1/jobs/{id}/nack: the job is retried
// after delay (default: the topic's backoff) or goes dead. Errors as Ack,
// and InvalidArgument for a bad delay.
func (s *Server) Nack(ctx context.Context, req *connect.Request[delayqv1.NackRequest]) (*connect.Response[delayqv1.NackResponse], error) {
	m := req.Msg
	if err := s.allowJob(ctx, m.Id); err != nil {
		return nil, err
	}
	p, err := nackParams(m)
	if err != nil {
		return nil, err
	}
	if err := s.engine.Nack(ctx, p); err != nil {
		return nil, describeLease(err, m.Id)
	}
	return connect.NewResponse(&delayqv1.NackResponse{}), nil
}

// Touch extends a delivery's lease by the job's ttr, as POST
// /v1/jobs/{id}/touch, and says when it now expires. Errors as Ack.
func (s *Server) Touch(ctx context.Context, req *connect.Request[delayqv1.TouchRequest]) (*connect.Response[delayqv1.TouchResponse], error) {
	m := req.Msg
	if err := s.allowJob(ctx, m.Id); err != nil {
		return nil, err
	}
	job, err := s.engine.Touch(ctx, &core.TouchJobParams{ID: m.Id, Lease: m.Lease})
	if err != nil {
		return nil, describeLease(err, m.Id)
	}
	return connect.NewResponse(&delayqv1.TouchResponse{LeaseExpiresAt: timeText(job.LeaseExpiresAt)}), nil
}

// checkItems bounds the items of an ack or nack batch as the HTTP API does:
// InvalidArgument for none, ResourceExhausted (too_large) for more than the
// engine's MaxBatch, both on field.
func (s *Server) checkItems(field string, n int) error {
	limit := s.engine.Limits().MaxBatch
	switch {
	case n == 0:
		return core.Invalid(field, "%s must hold at least one item", field)
	case n > limit:
		return core.TooLarge(field, "a batch holds at most %d %s, not %d", limit, field, n)
	}
	return nil
}

// AckBatch acks many deliveries, written together, as POST /v1/acks: one
// result per ack, in order, each failing on its own as Ack would. When
// every ack failed with a server-side error the call fails with it.
func (s *Server) AckBatch(ctx context.Context, req *connect.Request[delayqv1.AckBatchRequest]) (*connect.Response[delayqv1.AckBatchResponse], error) {
	items := req.Msg.Acks
	if err := s.checkItems("acks", len(items)); err != nil {
		return nil, err
	}
	errs := make([]error, len(items))
	acks := make([]core.AckJobParams, 0, len(items))
	idx := make([]int, 0, len(items))
	for i, it := range items {
		if it == nil {
			it = &delayqv1.AckRequest{}
		}
		if errs[i] = s.allowJob(ctx, it.Id); errs[i] != nil {
			continue
		}
		acks = append(acks, core.AckJobParams{ID: it.Id, Lease: it.Lease})
		idx = append(idx, i)
	}
	if len(acks) > 0 {
		res, err := s.engine.AckBatch(ctx, &core.AckJobsParams{Acks: acks})
		if err != nil {
			return nil, err
		}
		for k, err := range res {
			errs[idx[k]] = err
		}
	}
	if err := s.batchServerError("acks", errs); err != nil {
		return nil, err
	}
	out := &delayqv1.AckBatchResponse{Results: make([]*delayqv1.ItemResult, len(items))}
	for i, it := range items {
		out.Results[i] = s.itemResult(ctx, it.GetId(), errs[i])
	}
	return connect.NewResponse(out), nil
}

// NackBatch nacks many deliveries, each on its own and in order, as POST
// /v1/nacks; the answer and errors are those of AckBatch.
func (s *Server) NackBatch(ctx context.Context, req *connect.Request[delayqv1.NackBatchRequest]) (*connect.Response[delayqv1.NackBatchResponse], error) {
	items := req.Msg.Nacks
	if err := s.checkItems("nacks", len(items)); err != nil {
		return nil, err
	}
	errs := make([]error, len(items))
	for i, it := range items {
		if it == nil {
			it = &delayqv1.NackRequest{}
		}
		// The token's check comes first, as on the single route.
		err := s.allowJob(ctx, it.Id)
		var p *core.NackParams
		if err == nil {
			p, err = nackParams(it)
		}
		if err == nil {
			err = s.engine.Nack(ctx, p)
		}
		errs[i] = err
	}
	if err := s.batchServerError("nacks", errs); err != nil {
		return nil, err
	}
	out := &delayqv1.NackBatchResponse{Results: make([]*delayqv1.ItemResult, len(items))}
	for i, it := range items {
		out.Results[i] = s.itemResult(ctx, it.GetId(), errs[i])
	}
	return connect.NewResponse(out), nil
}

// itemResult is the result of one ack or nack of a batch.
func (s *Server) itemResult(ctx context.Context, id string, err error) *delayqv1.ItemResult {
	r := &delayqv1.ItemResult{Id: id}
	if err != nil {
		r.Error = errorMessage(s.apiError(ctx, describeLease(err, id)))
	}
	return r
}

// Requeue makes a dead job ready now with a fresh attempt count, as POST
// /v1/jobs/{id}/requeue. Errors: NotFound, Aborted when the job is not dead.
func (s *Server) Requeue(ctx context.Context, req *connect.Request[delayqv1.RequeueRequest]) (*connect.Response[delayqv1.RequeueResponse], error) {
	id := req.Msg.Id
	if err := s.allowJob(ctx, id); err != nil {
		return nil, err
	}
	if err := s.engine.Requeue(ctx, id); err != nil {
		return nil, describe(err, core.ErrNotFound, "job %q not found", id)
	}
	return connect.NewResponse(&delayqv1.RequeueResponse{}), nil
}
