package service

import (
	"context"
	"time"

	"github.com/delayq/delayq/core"
)

// releaseTimeout bounds giving back the jobs of a claim whose client left.
const releaseTimeout = 5 * time.Second

// Claim takes up to p.Max due jobs of p.Topic, waiting up to p.Wait for
// the first. When ctx ended while jobs were claimed (the client left), it
// hands them out again at once with core.Engine.Release, rather than when
// their leases expire, and returns ctx's error. Errors: the engine's for a
// bad topic, max or wait, wire.ErrPermissionDenied.
func (s *Service) Claim(ctx context.Context, p *core.ClaimJobsParams) ([]*core.Job, error) {
	if err := s.AllowTopic(ctx, p.Topic); err != nil {
		return nil, err
	}
	jobs, err := s.engine.Claim(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil && len(jobs) > 0 {
		s.release(ctx, jobs)
		return nil, err
	}
	return jobs, nil
}

// release hands the deliveries of jobs, never sent, back at once with their
// attempts.
func (s *Service) release(ctx context.Context, jobs []*core.Job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	for _, j := range jobs {
		err := s.engine.Release(ctx, &core.ReleaseParams{ID: j.ID, Lease: j.Lease, Error: "claim abandoned: the client went away"})
		if err != nil {
			s.log.Warn("service: releasing an abandoned claim failed", "id", j.ID, "err", err)
		}
	}
}

// Ack marks the delivery of p done. Errors (DescribeLease's messages):
// core.ErrInvalidArgument without a lease, core.ErrNotFound, a conflict
// wrapping core.ErrLeaseLost, wire.ErrPermissionDenied.
func (s *Service) Ack(ctx context.Context, p *core.AckJobParams) error {
	if err := s.AllowJob(ctx, p.ID); err != nil {
		return err
	}
	return s.describeLease(ctx, s.engine.Ack(ctx, p), p.ID)
}

// Nack fails the delivery of p: the job is retried after p.Delay (default:
// the topic's backoff) or goes dead. Errors as Ack.
func (s *Service) Nack(ctx context.Context, p *core.NackParams) error {
	if err := s.AllowJob(ctx, p.ID); err != nil {
		return err
	}
	return s.describeLease(ctx, s.engine.Nack(ctx, p), p.ID)
}

// Touch extends the lease of p's delivery by the job's ttr and returns the
// job with its new expiry. Errors as Ack.
func (s *Service) Touch(ctx context.Context, p *core.TouchJobParams) (*core.Job, error) {
	if err := s.AllowJob(ctx, p.ID); err != nil {
		return nil, err
	}
	job, err := s.engine.Touch(ctx, p)
	return job, s.describeLease(ctx, err, p.ID)
}

// AckBatch acks n deliveries (CheckBatch's bounds on acks), written
// together: item returns ack i, or the error decoding it gave. It returns
// one error per ack, in order (nil when done; DescribeLease's messages),
// each failing on its own as Ack would, or an error for the whole batch:
// bounds, the engine's, or the first of the errors when every ack failed
// server-side.
func (s *Service) AckBatch(ctx context.Context, n int, item func(i int) (core.AckJobParams, error)) ([]error, error) {
	if err := s.CheckBatch("acks", n); err != nil {
		return nil, err
	}
	errs := make([]error, n)
	acks := make([]core.AckJobParams, 0, n)
	idx := make([]int, 0, n)
	for i := range n {
		a, err := item(i)
		if err == nil {
			err = s.AllowJob(ctx, a.ID)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		acks = append(acks, a)
		idx = append(idx, i)
	}
	if len(acks) > 0 {
		res, err := s.engine.AckBatch(ctx, &core.AckJobsParams{Acks: acks})
		if err != nil {
			return nil, err
		}
		for k, err := range res {
			errs[idx[k]] = DescribeLease(err, acks[k].ID)
		}
	}
	if err := s.batchError("acks", n, func(i int) error { return errs[i] }); err != nil {
		return nil, err
	}
	return errs, nil
}

// NackBatch nacks n deliveries, each on its own and in order, since nacks
// are the failure path: item returns nack i, or the error decoding it
// gave. The answer and errors are those of AckBatch, on nacks.
func (s *Service) NackBatch(ctx context.Context, n int, item func(i int) (*core.NackParams, error)) ([]error, error) {
	if err := s.CheckBatch("nacks", n); err != nil {
		return nil, err
	}
	errs := make([]error, n)
	for i := range n {
		p, err := item(i)
		if err == nil {
			err = s.Nack(ctx, p)
		}
		errs[i] = err
	}
	if err := s.batchError("nacks", n, func(i int) error { return errs[i] }); err != nil {
		return nil, err
	}
	return errs, nil
}

// Requeue makes the dead job id ready now with a fresh attempt count.
// Errors: core.ErrNotFound naming it, a conflict when it is not dead,
// wire.ErrPermissionDenied.
func (s *Service) Requeue(ctx context.Context, id string) error {
	if err := s.AllowJob(ctx, id); err != nil {
		return err
	}
	return Describe(s.engine.Requeue(ctx, id), core.ErrNotFound, "job %q not found", id)
}
