package service

import (
	"context"

	"github.com/delayq/delayq/core"
)

// ListLimitDefault is the limit of a job listing (dead jobs, jobs by key
// or by state) when the request gives none.
const ListLimitDefault = 100

// Push creates the job of p, as a PushBatch of one, so that a push to a
// topic whose unique keys replace says whether it replaced the key's job.
// Errors: wire.ErrPermissionDenied for a topic not the caller's (p's or
// one its then names), a
// *wire.RateLimitError over its quota, the engine's (a conflict when the
// id names an unfinished job).
func (s *Service) Push(ctx context.Context, p *core.PushParams) (core.PushResult, error) {
	if err := s.AllowPush(ctx, p); err != nil {
		return core.PushResult{}, err
	}
	if err := s.AllowIntake(ctx, 1); err != nil {
		return core.PushResult{}, err
	}
	rs, err := s.engine.PushBatch(ctx, pushOf(ctx, []*core.PushParams{p}, false))
	if err != nil {
		return core.PushResult{}, err
	}
	return rs[0], rs[0].Err
}

// PushBatch pushes n jobs (CheckBatch's bounds), each succeeding or
// failing on its own: item returns the parameters of job i, or the error
// that decoding it gave, which becomes its result. The quota counts every
// job and refuses the batch whole; each job's topic is checked on its own.
// It returns one result per job, in order, or an error for the whole
// batch: bounds, quota, the engine's, or the first of the errors when
// every job failed server-side, so that the batch is retried as one.
func (s *Service) PushBatch(ctx context.Context, n int, item func(i int) (*core.PushParams, error)) ([]core.PushResult, error) {
	if err := s.CheckBatch("jobs", n); err != nil {
		return nil, err
	}
	if err := s.AllowIntake(ctx, n); err != nil {
		return nil, err
	}
	results := make([]core.PushResult, n)
	params := make([]*core.PushParams, 0, n)
	idx := make([]int, 0, n)
	for i := range n {
		p, err := item(i)
		if err == nil {
			err = s.AllowPush(ctx, p)
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		params = append(params, p)
		idx = append(idx, i)
	}
	if len(params) > 0 {
		pushed, err := s.engine.PushBatch(ctx, pushOf(ctx, params, false))
		if err != nil {
			return nil, err
		}
		for k, res := range pushed {
			results[idx[k]] = res
		}
	}
	if err := s.batchError("jobs", n, func(i int) error { return results[i].Err }); err != nil {
		return nil, err
	}
	return results, nil
}

// Replace creates or replaces the job p.ID, and says whether it replaced
// one. The caller must be allowed the topic of the job it would replace
// and p's. Errors: core.ErrInvalidArgument without an id, as Push, and a
// conflict while the job is reserved.
func (s *Service) Replace(ctx context.Context, p *core.PushParams) (*core.Job, bool, error) {
	if p.ID == "" {
		return nil, false, core.Invalid("id", "id is required to replace a job")
	}
	if err := s.AllowJob(ctx, p.ID); err != nil {
		return nil, false, err
	}
	if err := s.AllowPush(ctx, p); err != nil {
		return nil, false, err
	}
	if err := s.AllowIntake(ctx, 1); err != nil {
		return nil, false, err
	}
	rs, err := s.engine.PushBatch(ctx, pushOf(ctx, []*core.PushParams{p}, true))
	if err != nil {
		return nil, false, err
	}
	return rs[0].Job, rs[0].Replaced, rs[0].Err
}

// Get reads the job id. Errors: core.ErrNotFound naming it,
// wire.ErrPermissionDenied for a job of a topic not the caller's.
func (s *Service) Get(ctx context.Context, id string) (*core.Job, error) {
	if err := s.AllowJob(ctx, id); err != nil {
		return nil, err
	}
	job, err := s.engine.Get(ctx, id)
	return job, Describe(err, core.ErrNotFound, "job %q not found", id)
}

// Cancel cancels the job p.ID, with p.Running one being delivered too.
// Errors: core.ErrNotFound when unknown or already finished, a conflict
// while reserved without p.Running, wire.ErrPermissionDenied.
func (s *Service) Cancel(ctx context.Context, p *core.CancelJobParams) error {
	if err := s.AllowJob(ctx, p.ID); err != nil {
		return err
	}
	return Describe(s.engine.Cancel(ctx, p), core.ErrNotFound, "job %q not found or already finished", p.ID)
}

// FindJobs lists a page of a topic's jobs with a business key, and the
// after of the next page when the page is full. Errors: the engine's for a
// bad key, limit or cursor, wire.ErrPermissionDenied.
func (s *Service) FindJobs(ctx context.Context, p *core.FindJobsParams) (jobs []*core.Job, next string, err error) {
	if err := s.AllowTopic(ctx, p.Topic); err != nil {
		return nil, "", err
	}
	jobs, err = s.engine.FindJobs(ctx, p)
	if err != nil {
		return nil, "", err
	}
	if len(jobs) == p.Limit {
		next = jobs[len(jobs)-1].ID
	}
	return jobs, next, nil
}

// ListJobs lists a page of a topic's jobs in one state, with the after of
// the next page when there may be more; with search it searches for
// p.Contains (a p.Scan of 0 is the engine's default) and says how many
// jobs it read, else scanned is -1. Errors: core.ErrInvalidArgument for a
// scan without a search, the engine's (an empty contains),
// wire.ErrPermissionDenied.
func (s *Service) ListJobs(ctx context.Context, p *core.SearchJobsParams, search bool) (jobs []*core.Job, next string, scanned int, err error) {
	if err := s.AllowTopic(ctx, p.Topic); err != nil {
		return nil, "", 0, err
	}
	if !search {
		// A scan bounds only a search: refused rather than ignored, so
		// that a caller who forgot contains learns it.
		if p.Scan != 0 {
			return nil, "", 0, core.Invalid("scan", "scan needs contains")
		}
		page, err := s.engine.ListJobs(ctx, &p.ListJobsParams)
		return page.Jobs, page.Next, -1, err
	}
	page, err := s.engine.SearchJobs(ctx, p)
	return page.Jobs, page.Next, page.Scanned, err
}

// CancelByKey cancels a topic's unfinished jobs with a business key, and
// says which it cancelled and which it left because they are reserved.
func (s *Service) CancelByKey(ctx context.Context, topic, key string) (core.CancelByKeyResult, error) {
	if err := s.AllowTopic(ctx, topic); err != nil {
		return core.CancelByKeyResult{}, err
	}
	return s.engine.CancelByKey(ctx, topic, key)
}
