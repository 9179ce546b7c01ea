package connecttransport

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// Claim takes up to max (default 1) due jobs of a topic, waiting up to wait
// for the first, as POST /v1/topics/{topic}/claim: none when the wait ran
// out. Jobs claimed for a client that went away are released at once
// (service.Claim). Errors: InvalidArgument for a bad topic, max or wait.
func (s *Server) Claim(ctx context.Context, req *connect.Request[delayqv1.ClaimRequest]) (*connect.Response[delayqv1.ClaimResponse], error) {
	m := req.Msg
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
	jobs, err := s.svc.Claim(ctx, &core.ClaimJobsParams{Topic: m.Topic, Max: maxJobs, Wait: wait, Via: core.ViaGRPC,
		Consumer: req.Peer().Addr})
	if err != nil {
		return nil, err
	}
	out := &delayqv1.ClaimResponse{Jobs: make([]*delayqv1.Delivery, len(jobs))}
	for i, j := range jobs {
		out.Jobs[i] = deliveryMessage(j)
	}
	return connect.NewResponse(out), nil
}

// Ack marks a delivery done, as POST /v1/jobs/{id}/ack. Errors:
// InvalidArgument without a lease, NotFound, Aborted when the lease is
// lost.
func (s *Server) Ack(ctx context.Context, req *connect.Request[delayqv1.AckRequest]) (*connect.Response[delayqv1.AckResponse], error) {
	m := req.Msg
	if err := s.svc.Ack(ctx, &core.AckJobParams{ID: m.Id, Lease: m.Lease}); err != nil {
		return nil, err
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
	p, err := nackParams(m)
	if err != nil {
		return nil, err
	}
	if err := s.svc.Nack(ctx, p); err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.NackResponse{}), nil
}

// Touch extends a delivery's lease by the job's ttr, as POST
// /v1/jobs/{id}/touch, and says when it now expires. Errors as Ack.
func (s *Server) Touch(ctx context.Context, req *connect.Request[delayqv1.TouchRequest]) (*connect.Response[delayqv1.TouchResponse], error) {
	m := req.Msg
	job, err := s.svc.Touch(ctx, &core.TouchJobParams{ID: m.Id, Lease: m.Lease})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.TouchResponse{LeaseExpiresAt: timeText(job.LeaseExpiresAt)}), nil
}

// AckBatch acks many deliveries, written together, as POST /v1/acks
// (service.AckBatch): one result per ack, in order, each failing on its own
// as Ack would. When every ack failed with a server-side error the call
// fails with it.
func (s *Server) AckBatch(ctx context.Context, req *connect.Request[delayqv1.AckBatchRequest]) (*connect.Response[delayqv1.AckBatchResponse], error) {
	items := req.Msg.Acks
	errs, err := s.svc.AckBatch(ctx, len(items), func(i int) (core.AckJobParams, error) {
		return core.AckJobParams{ID: items[i].GetId(), Lease: items[i].GetLease()}, nil
	})
	if err != nil {
		return nil, err
	}
	out := &delayqv1.AckBatchResponse{Results: make([]*delayqv1.ItemResult, len(items))}
	for i, it := range items {
		out.Results[i] = s.itemResult(ctx, it.GetId(), errs[i])
	}
	return connect.NewResponse(out), nil
}

// NackBatch nacks many deliveries, each on its own and in order, as POST
// /v1/nacks (service.NackBatch); the answer and errors are those of
// AckBatch.
func (s *Server) NackBatch(ctx context.Context, req *connect.Request[delayqv1.NackBatchRequest]) (*connect.Response[delayqv1.NackBatchResponse], error) {
	items := req.Msg.Nacks
	errs, err := s.svc.NackBatch(ctx, len(items), func(i int) (*core.NackParams, error) {
		if items[i] == nil {
			return nackParams(&delayqv1.NackRequest{})
		}
		return nackParams(items[i])
	})
	if err != nil {
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
		r.Error = errorMessage(s.apiError(ctx, err))
	}
	return r
}

// Requeue makes a dead job ready now with a fresh attempt count, as POST
// /v1/jobs/{id}/requeue. Errors: NotFound, Aborted when the job is not dead.
func (s *Server) Requeue(ctx context.Context, req *connect.Request[delayqv1.RequeueRequest]) (*connect.Response[delayqv1.RequeueResponse], error) {
	if err := s.svc.Requeue(ctx, req.Msg.Id); err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.RequeueResponse{}), nil
}
