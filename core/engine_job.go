package core

import (
	"context"
	"encoding/json"
	"errors"
)

// madeJob is a job the engine makes to tell of another job: a
// dead-letter notice or a job event.
type madeJob struct {
	// ID is its id, of a form no client may choose (NoticeID, EventID).
	ID string
	// Topic is the topic it goes to; it takes that topic's TTR, attempts
	// and retention.
	Topic string
	// Body is marshalled to JSON as the job's body. Omit drops from it the
	// told job's body (and says so in it), when the whole would exceed the
	// body limit with it.
	Body any
	Omit func()
	// TraceParent links it to the told job's trace; "": none.
	TraceParent string
	// Via is what made it (OriginEvents, OriginNotices), kept in its
	// Changes.
	Via string
}

// putMade puts made, ready now, in one store call. They are put, not
// pushed: they are not bound by the body limit of clients' jobs (each
// holds the told job's body only within it), and their ids have a form no
// client may choose. With ifAbsent each is put only if no job has its id,
// whatever its state (PutJobsParams.IfAbsent); else a job with its id
// unfinished is a conflict. A job already under its id is no error either
// way. Errors: the store's, the first of the jobs'.
func (e *Engine) putMade(ctx context.Context, ifAbsent bool, made ...madeJob) error {
	if len(made) == 0 {
		return nil
	}
	now := StoreTime(e.clock.Now())
	jobs := make([]*Job, len(made))
	for i, m := range made {
		body, err := json.Marshal(m.Body)
		if err != nil {
			return err
		}
		if len(body) > e.limits.MaxBodyBytes {
			m.Omit()
			if body, err = json.Marshal(m.Body); err != nil {
				return err
			}
		}
		to := e.topic(m.Topic)
		jobs[i] = &Job{ID: m.ID, Topic: m.Topic, Body: body, RunAt: now, TTR: to.TTR, MaxAttempts: to.MaxAttempts,
			State: StateReady, CreatedAt: now, UpdatedAt: now, TraceParent: m.TraceParent, Retention: to.Retention,
			Changes: madeChange(m.Via)}
	}
	pp := e.putParams(jobs)
	pp.IfAbsent = ifAbsent
	res, err := e.store.PutJobs(ctx, pp)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, ErrConflict) {
			return r.Err
		}
	}
	return nil
}
