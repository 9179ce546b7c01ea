package service

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/core"
)

// Bounds of a bulk operation (RequeueDead, CancelJobs).
const (
	// BulkSampleMax is how many of the jobs matched a result shows.
	BulkSampleMax = 10
	// BulkTimeMax bounds the time one bulk request works, well within a
	// request's timeout: it then answers what it did and a Next to go on
	// from, so that a million jobs take a few requests and no request
	// holds the store for long.
	BulkTimeMax = 10 * time.Second
	// bulkPage is the limit of each page a bulk operation lists (the
	// engine also bounds a page's bodies, core.ListPageBytes): the time is
	// checked between pages, so a page's changes, one store call each,
	// must take a small part of BulkTimeMax even on a slow store.
	bulkPage = 250
)

// BulkFilter chooses the jobs of one topic that a bulk operation acts on.
// A zero field does not filter.
type BulkFilter struct {
	// Topic is the topic whose jobs are chosen.
	Topic string
	// ErrorContains keeps the jobs whose last error contains it.
	ErrorContains string
	// Key keeps the jobs with this business key.
	Key string
	// Since and Until keep the jobs whose time is in [Since, Until): a
	// dead job's time of death, an unfinished job's run_at.
	Since, Until time.Time
	// State keeps the unfinished jobs in this state, scheduled or ready
	// (CancelJobs only); empty keeps both.
	State core.State
	// Limit bounds the jobs matched, 0 for no bound.
	Limit int
	// DryRun counts the jobs matched and changes none.
	DryRun bool
	// After goes on from the Next of an earlier result of the same
	// operation and filter.
	After string
}

// BulkResult is what a bulk operation did.
type BulkResult struct {
	// Count is how many jobs it changed, or would change in a dry run.
	Count int
	// DryRun says that it changed nothing.
	DryRun bool
	// Sample is the first jobs it matched, at most BulkSampleMax, as it
	// found them.
	Sample []*core.Job
	// Next, when set, is where the operation stopped before the end of the
	// topic's jobs (BulkTimeMax): the same request with After = Next goes
	// on.
	Next string
}

// RequeueDead makes the dead jobs of f.Topic that f matches ready now, with
// a fresh attempt count, as Requeue does each; f.Since and f.Until bound
// the time of death. A job that died after the walk began (its first
// request, when After goes on from an earlier one), or stopped
// being dead while it ran, is left. Errors: core.ErrInvalidArgument for a
// bad filter, wire.ErrPermissionDenied, core.ErrNotFound for a topic with
// neither jobs nor configuration, the engine's (ctx's when it ends).
func (s *Service) RequeueDead(ctx context.Context, f *BulkFilter) (BulkResult, error) {
	if f.State != "" {
		return BulkResult{}, core.Invalid("state", "state applies only to a cancel: every job requeued is dead")
	}
	return s.bulk(ctx, f, []core.State{core.StateDead}, s.engine.Requeue)
}

// CancelJobs cancels the scheduled and ready jobs of f.Topic that f
// matches (f.State keeps one of the two), as Cancel does each; f.Since
// and f.Until bound run_at. Reserved jobs are never cancelled: one
// claimed while the request runs is left. Errors: as RequeueDead, and
// core.ErrInvalidArgument for a state other than scheduled or ready.
func (s *Service) CancelJobs(ctx context.Context, f *BulkFilter) (BulkResult, error) {
	states := []core.State{core.StateScheduled, core.StateReady}
	switch f.State {
	case "":
	case core.StateScheduled, core.StateReady:
		states = []core.State{f.State}
	default:
		return BulkResult{}, core.Invalid("state", "state must be scheduled or ready")
	}
	return s.bulk(ctx, f, states, func(ctx context.Context, id string) error {
		return s.engine.Cancel(ctx, &core.CancelJobParams{ID: id})
	})
}

// keyWalk names, in a bulk cursor, the walk of a key's jobs (bulkByKey).
const keyWalk core.State = "key"

// bulk applies act to each job of f.Topic in states that f matches, until
// f.Limit jobs, the end, or BulkTimeMax: it walks the listings of states
// in order, by pages, from f.After, or with f.Key the key's jobs
// (bulkByKey). A job act answers not found or conflict for has changed
// since it was listed and is not counted.
func (s *Service) bulk(ctx context.Context, f *BulkFilter, states []core.State, act func(context.Context, string) error) (BulkResult, error) {
	if err := checkBulk(f); err != nil {
		return BulkResult{}, err
	}
	if err := s.AllowTopic(ctx, f.Topic); err != nil {
		return BulkResult{}, err
	}
	clock := s.engine.Clock()
	now := clock.Now()
	w := bulkWalk{f: f, act: act, deadline: now.Add(BulkTimeMax), res: BulkResult{DryRun: f.DryRun, Sample: []*core.Job{}}}
	walks := states
	if f.Key != "" {
		walks = []core.State{keyWalk}
	}
	c, err := parseBulkCursor(f.After, walks, now)
	if err != nil {
		return BulkResult{}, err
	}
	w.began = c.began
	var done bool
	if f.Key != "" {
		done, err = s.bulkByKey(ctx, &w, states, c.after)
	} else {
		done, err = s.bulkByState(ctx, &w, states, c)
	}
	if err != nil {
		return BulkResult{}, err
	}
	if done {
		return w.res, nil
	}
	if w.res.Count == 0 && f.After == "" {
		if _, err := s.engine.GetTopic(ctx, f.Topic); err != nil {
			return BulkResult{}, Describe(err, core.ErrNotFound, "topic %q not found", f.Topic)
		}
	}
	return w.res, nil
}

// bulkWalk is a bulk operation under way: its filter, action, time bound
// and result so far.
type bulkWalk struct {
	f        *BulkFilter
	act      func(context.Context, string) error
	began    time.Time
	deadline time.Time
	res      BulkResult
}

// take applies the walk's action to j when the filter keeps it and counts
// it; stop is true once f.Limit jobs are counted. Errors: the action's
// but not found and conflict (j changed since it was listed).
func (w *bulkWalk) take(ctx context.Context, j *core.Job) (stop bool, err error) {
	if !w.f.matches(j, w.began) {
		return false, nil
	}
	if !w.f.DryRun {
		err := w.act(ctx, j.ID)
		if errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrConflict) {
			return false, nil
		}
		if err != nil {
			return true, err
		}
	}
	w.res.Count++
	if len(w.res.Sample) < BulkSampleMax {
		w.res.Sample = append(w.res.Sample, j)
	}
	return w.res.Count == w.f.Limit, nil
}

// bulkByState walks the listings of states in order, by pages, from c. It
// returns done when the walk ended early: the limit (a page's Next would
// pass over the rest of the page, so the limit ends the operation, not a
// request), or the time bound (with the result's Next set).
func (s *Service) bulkByState(ctx context.Context, w *bulkWalk, states []core.State, c bulkCursor) (done bool, err error) {
	after := c.after
	for i := c.state; i < len(states); i++ {
		p := core.ListJobsParams{Topic: w.f.Topic, State: states[i], After: after, Limit: bulkPage}
		after = ""
		for {
			page, err := s.engine.ListJobs(ctx, &p)
			if err != nil {
				return true, err
			}
			for _, j := range page.Jobs {
				if stop, err := w.take(ctx, j); stop || err != nil {
					return true, err
				}
			}
			if page.Next == "" {
				break
			}
			if !s.engine.Clock().Now().Before(w.deadline) {
				w.res.Next = bulkCursor{state: i, after: page.Next, began: w.began}.encode(states)
				return true, nil
			}
			p.After = page.Next
		}
	}
	return false, nil
}

// bulkByKey walks the jobs of the filter's key, in states, from the
// topic's key index (FindJobs, in id order) after the id after, rather than
// the listings of states: a key has a few jobs where a topic may have
// millions. done is as bulkByState's.
func (s *Service) bulkByKey(ctx context.Context, w *bulkWalk, states []core.State, after string) (done bool, err error) {
	p := core.FindJobsParams{Topic: w.f.Topic, Key: w.f.Key, After: after, Limit: core.FindLimitMax}
	for {
		jobs, err := s.engine.FindJobs(ctx, &p)
		if err != nil {
			return true, err
		}
		for _, j := range jobs {
			if !slices.Contains(states, j.State) {
				continue
			}
			if stop, err := w.take(ctx, j); stop || err != nil {
				return true, err
			}
		}
		if len(jobs) < p.Limit {
			return false, nil
		}
		p.After = jobs[len(jobs)-1].ID
		if !s.engine.Clock().Now().Before(w.deadline) {
			w.res.Next = bulkCursor{after: p.After, began: w.began}.encode([]core.State{keyWalk})
			return true, nil
		}
	}
}

// checkBulk checks the parts of a filter that every bulk operation shares.
func checkBulk(f *BulkFilter) error {
	if err := core.ValidateTopicName(f.Topic); err != nil {
		return err
	}
	if f.Limit < 0 {
		return core.Invalid("limit", "limit must not be negative (0 or absent for no limit)")
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return core.Invalid("until", "until must be after since")
	}
	return nil
}

// matches reports whether f keeps j, listed in a walk that began at
// began: a dead job by its time of death, which must be before began (a
// job requeued that dies again is not requeued twice by one walk), an
// unfinished one by run_at.
func (f *BulkFilter) matches(j *core.Job, began time.Time) bool {
	at := j.RunAt
	if j.State == core.StateDead {
		if at = j.UpdatedAt; at.After(began) {
			return false
		}
	}
	return (f.Key == "" || j.Key == f.Key) &&
		(f.ErrorContains == "" || strings.Contains(j.LastError, f.ErrorContains)) &&
		(f.Since.IsZero() || !at.Before(f.Since)) &&
		(f.Until.IsZero() || at.Before(f.Until))
}

// bulkCursor is where a bulk operation goes on: the listing of
// states[state] from its cursor after, in the walk that began at began (a
// walk that goes on over several requests keeps its start, so that a job
// requeued that died again meanwhile is not requeued again by it).
type bulkCursor struct {
	state int
	after string
	began time.Time
}

// encode writes c as the Next of a result: "state:began (Unix ms):after".
func (c bulkCursor) encode(states []core.State) string {
	return string(states[c.state]) + ":" + strconv.FormatInt(c.began.UnixMilli(), 10) + ":" + c.after
}

// parseBulkCursor reads the Next of a bulk result over states; an empty
// one is the start of a walk that begins now.
func parseBulkCursor(after string, states []core.State, now time.Time) (bulkCursor, error) {
	if after == "" {
		return bulkCursor{began: now}, nil
	}
	bad := core.Invalid("after", "after is not a cursor of this operation")
	parts := strings.SplitN(after, ":", 3)
	if len(parts) != 3 || parts[2] == "" {
		return bulkCursor{}, bad
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return bulkCursor{}, bad
	}
	for i, st := range states {
		if string(st) == parts[0] {
			return bulkCursor{state: i, after: parts[2], began: time.UnixMilli(ms)}, nil
		}
	}
	return bulkCursor{}, bad
}
