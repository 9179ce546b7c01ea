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
	// Topic is the topic it goes to; it takes that topic's TTR and
	// attempts.
	Topic string
	// Body is marshalled to JSON as the job's body. Omit drops from it the
	// told job's body (and says so in it), when the whole would exceed the
	// body limit with it.
	Body any
	Omit func()
	// TraceParent links it to the told job's trace; "": none.
	TraceParent string
	// IfAbsent puts it only if no job has its id, whatever its state
	// (PutJobsParams.IfAbsent); else a job with its id unfinished is a
	// conflict, which is taken as done too.
	IfAbsent bool
}

// putMade puts m, ready now. It is put, not pushed: it is not bound by
// the body limit of clients' jobs (it holds the told job's body only
// within it), and its id has a form no client may choose. A job already
// under its id is no error. Errors: the store's.
func (e *Engine) putMade(ctx context.Context, m madeJob) error {
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
	now := StoreTime(e.clock.Now())
	job := &Job{ID: m.ID, Topic: m.Topic, Body: body, RunAt: now, TTR: to.TTR, MaxAttempts: to.MaxAttempts,
		State: StateReady, CreatedAt: now, UpdatedAt: now, TraceParent: m.TraceParent}
	res, err := e.store.PutJobs(ctx, &PutJobsParams{Jobs: []*Job{job}, IfAbsent: m.IfAbsent})
	if err != nil {
		return err
	}
	if err := res[0].Err; err != nil && !errors.Is(err, ErrConflict) {
		return err
	}
	return nil
}
