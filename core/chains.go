package core

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Chains. A job may carry its next step (Job.Then): a push, checked as a
// push when the job is put, that the engine makes once the job is done
// (acknowledged), its delay counted from the finish. A step may carry its
// own, up to ThenDepthMax steps. Cancelled and dead jobs make none.
//
// The events' follower (events.go) makes the steps: each store marks the
// entry of a finish with a next step (FinishedJob.Then) in the record of
// finished jobs, written with the finish, so the follower reads only those
// jobs, and none is missed, a kill -9 included. A step's id stands for the
// finish (ChainID) and it is put only if absent, so that instances
// following the record at once, or one that reads entries again after a
// crash, make it once while it is kept. A job no longer kept when the
// follower reads it (past its retention) makes no step.

// Bounds of a job's next steps, so that a job record stays small.
const (
	// ThenDepthMax is the most steps one job may carry: its Then, the
	// Then of that, and so on.
	ThenDepthMax = 8
	// ThenMaxBytes bounds the JSON form of a job's Then, its steps and
	// their bodies included.
	ThenMaxBytes = 64 << 10
)

// ChainID returns the id of the step that job id's finish at finished
// makes: "c-" and 32 hex digits of a SHA-256 of the two, the same on
// every instance.
func ChainID(id string, finished time.Time) string {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write(binary.BigEndian.AppendUint64([]byte{0}, uint64(StoreTime(finished).UnixNano())))
	return chainIDPrefix + hex.EncodeToString(h.Sum(nil)[:keyIDHexLen/2])
}

// chainIDPrefix starts every ChainID.
const chainIDPrefix = "c-"

// IsChainID reports whether id has the form of a ChainID.
func IsChainID(id string) bool { return isDerivedID(id, chainIDPrefix) }

// Clone returns a deep copy of p, nil for nil.
func (p *PushParams) Clone() *PushParams {
	if p == nil {
		return nil
	}
	c := *p
	c.Body = bytes.Clone(p.Body)
	c.RetryDelays = slices.Clone(p.RetryDelays)
	for _, ptr := range []**time.Duration{&c.Delay, &c.ExpiresIn} {
		if *ptr != nil {
			d := **ptr
			*ptr = &d
		}
	}
	for _, ptr := range []**time.Time{&c.RunAt, &c.ExpiresAt} {
		if *ptr != nil {
			t := **ptr
			*ptr = &t
		}
	}
	c.Then = p.Then.Clone()
	return &c
}

// depth returns the steps p carries, itself included.
func (p *PushParams) depth() int {
	n := 0
	for ; p != nil; p = p.Then {
		n++
	}
	return n
}

// checkThen checks a job's next step t as a push of it would be checked,
// now, naming its fields then.* (then.then.* for its own step, and so
// on), and returns the step as the job keeps it: its times at store
// precision, its body compacted, as every store's JSON would keep it, and
// its own step so checked. A step has no id (its finish gives it one,
// ChainID). Errors: *FieldError, ErrInvalidArgument for more than
// ThenDepthMax steps or more than ThenMaxBytes.
func (e *Engine) checkThen(t *PushParams, now time.Time, urls urlChecks) (*PushParams, error) {
	if n := t.depth(); n > ThenDepthMax {
		return nil, Invalid("then", "then holds %d steps, more than %d", n, ThenDepthMax)
	}
	if t.ID != "" {
		return nil, Invalid("then.id", "then.id must be empty: a step's id comes from its job's finish")
	}
	job, _, err := e.newJob(t, now, urls)
	if err != nil {
		if fe, ok := errors.AsType[*FieldError](err); ok {
			fe.Field = joinThen(fe.Field)
		}
		return nil, err
	}
	step := t.Clone()
	step.TraceParent, step.Then = "", job.Then
	for _, at := range []*time.Time{step.RunAt, step.ExpiresAt} {
		if at != nil {
			*at = StoreTime(*at)
		}
	}
	if len(step.Body) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, step.Body); err != nil {
			return nil, Invalid("then.body", "then.body must be a JSON value in UTF-8")
		}
		step.Body = b.Bytes()
	}
	raw, err := json.Marshal(step)
	if err != nil {
		return nil, err
	}
	if len(raw) > ThenMaxBytes {
		return nil, Invalid("then", "then is %d bytes of JSON, more than the limit of %d", len(raw), ThenMaxBytes)
	}
	return step, nil
}

// joinThen names field as a field of a job's then.
func joinThen(field string) string {
	if field == "" {
		return "then"
	}
	return "then." + field
}

// chains is the engine's state of the chains: whether it knows that the
// record's cursor exists.
type chains struct {
	cursorMade atomic.Bool
}

// makeCursor makes the cursor of the record of finished jobs unless this
// engine knows it exists, before a job with a next step is put: so its
// finish comes after the cursor's start and is followed. Errors: the
// store's.
func (e *Engine) makeCursor(ctx context.Context) error {
	if e.chains.cursorMade.Load() {
		return nil
	}
	if err := e.events.start(ctx); err != nil {
		return err
	}
	e.chains.cursorMade.Store(true)
	return nil
}

// chained reports whether the record of finished jobs has a cursor, which
// the first job with a next step made (or events did): the follower reads
// the record then even while no topic has events. A failure to read it is
// logged, and the round waits for the next.
func (ev *events) chained(ctx context.Context) bool {
	_, err := ev.e.store.GetRecord(ctx, KindCursor, EventsCursor)
	if err != nil && !errors.Is(err, ErrNotFound) && ctx.Err() == nil {
		ev.e.log.Warn("engine: reading the cursor of finished jobs failed", "err", err)
	}
	return err == nil
}

// chainReads bounds the done jobs a follower reads at once for their
// steps: one read after another would take a network store a round trip
// per step.
const chainReads = 16

// chain puts the next steps of the entries that are done jobs with one
// (FinishedJob.Then), finished from since on, each unless it exists, in
// one write per kind of id: a follower that put them one by one would
// sync the store once per step. A job no longer kept, or one kept as
// another since (its id reused), has lost its step; a step its topic no
// longer allows (a changed configuration) is not made: both are logged.
// Errors: the store's.
func (ev *events) chain(ctx context.Context, entries []FinishedJob, since time.Time) error {
	e := ev.e
	var done []*FinishedJob
	for i := range entries {
		if f := &entries[i]; f.Then && f.State == StateDone && !f.FinishedAt.Before(since) {
			done = append(done, f)
		}
	}
	if len(done) == 0 {
		return nil
	}
	read := make([]*Job, len(done))
	errs := make([]error, len(done))
	var wg sync.WaitGroup
	sem := make(chan struct{}, chainReads)
	for i, f := range done {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			read[i], errs[i] = e.store.GetJob(ctx, f.ID)
		}()
	}
	wg.Wait()
	// A keyed step of a topic with unique keys takes the key's id, as a
	// schedule's slot does: made unless an unfinished job holds the key;
	// any other is put only if absent.
	var derived, keyed []*Job
	for i, f := range done {
		at := StoreTime(f.FinishedAt)
		j, err := read[i], errs[i]
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err != nil || j.Then == nil || j.Topic != f.Topic || !StoreTime(j.UpdatedAt).Equal(at) {
			e.log.Warn("engine: a done job's next step is lost: the job is no longer kept", "id", f.ID, "finished_at", at)
			continue
		}
		job, err := e.stepJob(j, at)
		if err != nil {
			e.log.Warn("engine: a done job's next step is invalid; it is not made", "id", f.ID, "err", err)
			continue
		}
		if IsKeyID(job.ID) {
			keyed = append(keyed, job)
		} else {
			derived = append(derived, job)
		}
	}
	for _, jobs := range [][]*Job{derived, keyed} {
		if len(jobs) == 0 {
			continue
		}
		pp := e.putParams(jobs)
		pp.IfAbsent = !IsKeyID(jobs[0].ID)
		res, err := e.store.PutJobs(ctx, pp)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil && !errors.Is(r.Err, ErrConflict) {
				return r.Err
			}
		}
	}
	return nil
}

// stepJob returns the job that j's next step makes for j's finish at at:
// the step pushed now, its delay counted from at, under the id
// ChainID(j.ID, at) (or its key's, on a topic with unique keys), carrying
// j's trace. Errors: *FieldError when the step is no longer valid.
func (e *Engine) stepJob(j *Job, at time.Time) (*Job, error) {
	p := j.Then.Clone()
	if p.Delay != nil {
		runAt := at.Add(*p.Delay)
		p.Delay, p.RunAt = nil, &runAt
	}
	p.TraceParent = j.TraceParent
	job, _, err := e.newJob(p, e.clock.Now(), urlChecks{})
	if err != nil {
		return nil, err
	}
	if !IsKeyID(job.ID) {
		job.ID = ChainID(j.ID, at)
	}
	job.Changes = madeChange(OriginChain)
	return job, nil
}
