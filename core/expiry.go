package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// JobExpired is the LastError of a job that went dead because its
// ExpiresAt passed before it was delivered and acknowledged.
const JobExpired = "expired"

// Expired reports whether j has an expiry and it has come at now: such a
// job is not delivered again.
func (j *Job) Expired(now time.Time) bool {
	return !j.ExpiresAt.IsZero() && !now.Before(j.ExpiresAt)
}

// CanExpire reports whether Store.ExpireJob ends j at now: it is
// scheduled or ready (as of now) and Expired.
func (j *Job) CanExpire(now time.Time) bool {
	return (j.State == StateScheduled || j.State == StateReady) && j.Expired(now)
}

// NotExpiredConflict is the conflict of Store.ExpireJob of id over job,
// which is reserved, dead or not expired.
func NotExpiredConflict(id string, job *Job) *ConflictError {
	return &ConflictError{Job: job, Message: fmt.Sprintf("%s is %s: only a scheduled or ready job past its expires_at expires", conflictSubject(id, job), job.State)}
}

// expiresAt resolves a push's expiry: p.ExpiresAt, or run_at plus
// p.ExpiresIn, or plus the topic's ExpiresIn when the push gives neither;
// zero for none. Errors: *FieldError when both are given, expires_in is
// not positive, or the job's own expiry has passed at now (a run_at in
// the past with a short expires_in included).
func expiresAt(p *PushParams, topic *Topic, runAt, now time.Time) (time.Time, error) {
	var at time.Time
	field := "expires_at"
	switch {
	case p.ExpiresAt != nil && p.ExpiresIn != nil:
		return time.Time{}, Invalid("expires_in", "expires_at and expires_in are exclusive")
	case p.ExpiresIn != nil:
		if *p.ExpiresIn <= 0 {
			return time.Time{}, Invalid("expires_in", "expires_in must be positive")
		}
		at, field = runAt.Add(*p.ExpiresIn), "expires_in"
	case p.ExpiresAt != nil:
		at = *p.ExpiresAt
	case topic.ExpiresIn > 0:
		return runAt.Add(topic.ExpiresIn), nil
	default:
		return time.Time{}, nil
	}
	if !at.After(now) {
		return time.Time{}, Invalid(field, "the job would expire at %s, which is in the past", at.UTC().Format(time.RFC3339Nano))
	}
	return at, nil
}

// validateExpiresAt checks a job's expiry, when it has one, against its
// run_at: after it, and at most Limits.MaxDelay after it.
func (e *Engine) validateExpiresAt(j *Job) error {
	if j.ExpiresAt.IsZero() {
		return nil
	}
	if !StoreTime(j.ExpiresAt).After(StoreTime(j.RunAt)) {
		return Invalid("expires_at", "expires_at %s must be after run_at %s: the job would expire before it is due",
			j.ExpiresAt.UTC().Format(time.RFC3339Nano), j.RunAt.UTC().Format(time.RFC3339Nano))
	}
	if j.ExpiresAt.Sub(j.RunAt) > e.limits.MaxDelay {
		return Invalid("expires_at", "expires_at must be at most %s after run_at", e.limits.MaxDelay)
	}
	return nil
}

// claim claims as claimDue does, but ends each claimed job that expired
// (Job.Expired) instead of handing it out: it buries it with LastError
// JobExpired, so that it is never delivered again, whichever kind of
// delivery claimed it. When every job a claim took had expired, it claims
// again within what is left of p.Wait.
func (e *Engine) claim(ctx context.Context, p *ClaimJobsParams) ([]*Job, error) {
	deadline := e.clock.Now().Add(p.Wait)
	for {
		jobs, err := e.claimDue(ctx, p)
		live := e.endExpired(ctx, jobs)
		wait := deadline.Sub(e.clock.Now())
		if err != nil || len(live) > 0 || len(jobs) == 0 || wait <= 0 || ctx.Err() != nil {
			return live, err
		}
		p = &ClaimJobsParams{Topic: p.Topic, Max: p.Max, Wait: wait, Via: p.Via, Consumer: p.Consumer}
	}
}

// endExpired ends the expired jobs among claimed ones without delivering
// them and returns the others, in order: each lease is ended without
// spending its attempt (RetryJobParams.Unsent: the history says released,
// "expired"), then the job, queued again, expires (Store.ExpireJob: dead,
// "expired"). A step that fails is logged: the lease runs out, or the job
// waits in the queue, and the next claim or sweep ends it.
func (e *Engine) endExpired(ctx context.Context, claimed []*Job) []*Job {
	now := e.clock.Now()
	live := claimed[:0]
	for _, j := range claimed {
		if !j.Expired(now) {
			live = append(live, j)
			continue
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		_, err := e.store.RetryJob(sctx, &RetryJobParams{ID: j.ID, Lease: j.Lease, RunAt: StoreTime(now), Error: JobExpired, Unsent: true})
		if err == nil {
			err = e.store.ExpireJob(sctx, j.ID)
		}
		cancel()
		if err != nil {
			e.log.Warn("engine: ending an expired job failed", "topic", j.Topic, "id", j.ID, "err", err)
		}
	}
	return live
}

// expirySweepMax bounds the ready jobs of one topic a sweep reads, those
// due longest first (ListJobs' order), so that a sweep over a large
// backlog costs a bounded read; expirySweepPage is the page it reads them
// by.
const (
	expirySweepMax  = 10_000
	expirySweepPage = 500
)

// expirySweep is the engine's service that ends, every EngineConfig
// ExpirySweep, the expired jobs no claim took: on a topic nobody consumes
// they would sit ready forever. Every instance sweeps; an instance that
// meets a job another just ended gets a conflict, which is no error.
type expirySweep struct {
	e     *Engine
	every time.Duration
	life  startStop
}

// Start runs the loop and returns at once. Errors: errStarted.
func (x *expirySweep) Start(ctx context.Context) error { return x.life.start(ctx, x.run) }

// Stop ends the loop, waiting for it until ctx is done. Idempotent; safe
// before Start.
func (x *expirySweep) Stop(ctx context.Context) error { return x.life.stop(ctx) }

func (x *expirySweep) run(ctx context.Context) {
	t := x.e.clock.NewTicker(x.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		x.e.SweepExpired(ctx)
	}
}

// noteExpiring records, before jobs are stored, the topics among theirs
// that the expiry sweep would not read otherwise: a job with its own
// expiry on a topic without ExpiresIn (KindExpiring). Each instance writes
// a topic's record once (the first push that needs it); one that exists
// is no error. Errors: those of Store.PutRecord, which the push returns.
func (e *Engine) noteExpiring(ctx context.Context, jobs []*Job) error {
	for _, j := range jobs {
		if j.ExpiresAt.IsZero() || e.topic(j.Topic).ExpiresIn > 0 {
			continue
		}
		if _, seen := e.expiring.Load(j.Topic); seen {
			continue
		}
		// The value says since when, for whoever reads the records.
		_, err := e.store.PutRecord(ctx, &PutRecordParams{Kind: KindExpiring, Name: j.Topic, Value: []byte(e.clock.Now().UTC().Format(time.RFC3339))})
		if err != nil && !errors.Is(err, ErrConflict) {
			return err
		}
		e.expiring.Store(j.Topic, struct{}{})
	}
	return nil
}

// SweepExpired ends the expired jobs among the ready ones of every topic
// that may have some (Store.ExpireJob): those with ExpiresIn and those
// noteExpiring recorded, reading at most expirySweepMax of each, those due
// longest first, and returns how many it ended. The expiry sweep calls it
// every EngineConfig.ExpirySweep; a failure is logged and the next sweep
// tries again.
func (e *Engine) SweepExpired(ctx context.Context) int {
	states, err := e.store.ListTopicStates(ctx)
	if err != nil {
		e.log.Warn("engine: expiry sweep: listing topics failed", "err", err)
		return 0
	}
	records, err := e.store.ListRecords(ctx, KindExpiring)
	if err != nil {
		e.log.Warn("engine: expiry sweep: listing the topics with expiring jobs failed", "err", err)
		return 0
	}
	expiring := make(map[string]bool, len(records))
	for _, r := range records {
		expiring[r.Name] = true
	}
	ended := 0
	for _, ts := range states {
		if !expiring[ts.Name] && e.topic(ts.Name).ExpiresIn <= 0 {
			continue
		}
		p := &ListJobsParams{Topic: ts.Name, State: StateReady, Limit: expirySweepPage}
		for read := 0; ts.Counts.Ready > 0 && read < expirySweepMax && ctx.Err() == nil; {
			page, err := e.store.ListJobs(ctx, p)
			if err != nil {
				e.log.Warn("engine: expiry sweep: listing jobs failed", "topic", ts.Name, "err", err)
				break
			}
			now := e.clock.Now()
			for _, j := range page.Jobs {
				if !j.CanExpire(now) {
					continue
				}
				switch err := e.store.ExpireJob(ctx, j.ID); {
				case err == nil:
					ended++
				case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
					// Claimed, settled or ended elsewhere meanwhile.
				default:
					e.log.Warn("engine: expiry sweep: ending a job failed", "topic", ts.Name, "id", j.ID, "err", err)
				}
			}
			read += len(page.Jobs)
			if page.Next == "" {
				break
			}
			p.After = page.Next
		}
	}
	return ended
}
