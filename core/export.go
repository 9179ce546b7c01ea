package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// JobExporter is the optional capability of a Store to list every job that
// is not finished, for backups and for moving a deployment to another
// backend (delayq export). Find it by type assertion; decorators of a store
// implement it and answer ErrUnsupported when the store under them does not.
type JobExporter interface {
	// ExportJobs calls fn with every scheduled, ready, reserved and dead
	// job, in no particular order: once each for jobs that keep their
	// state while the export runs. A job that changes state meanwhile may
	// be seen in its old state, its new one, or both, or (if it finished)
	// not at all; import skips ids it already has, so a second sighting
	// does no harm. fn is called from one goroutine at a time, with copies
	// it may keep. It stops at fn's first error, or ctx's, and returns it.
	ExportJobs(ctx context.Context, fn func(*Job) error) error
}

// JobImporter is the optional capability of a Store to take jobs exported
// from another store, keeping their state (delayq import).
type JobImporter interface {
	// ImportJobs stores each job whose id is not in use, as it was: a
	// scheduled or ready job by its run_at, a dead job dead (listed by
	// ListDeadJobs), a reserved job ready at once (its lease went with the
	// old store), each with its Attempt, LastError and CreatedAt kept and
	// no lease. A job whose id names any job the store knows, finished
	// ones within retention included, is skipped, so importing the same
	// jobs twice changes nothing. The result has one entry per job, in
	// order: true when imported, false when skipped. The returned error is
	// an infrastructure failure, as for PutJobs.
	ImportJobs(ctx context.Context, jobs []*Job) ([]bool, error)
}

// ErrUnsupported is returned by a decorator of a store, or by the engine,
// when the store lacks an optional capability.
var ErrUnsupported = fmt.Errorf("%w: not supported by this backend", errors.ErrUnsupported)

// Export calls fn with every job that is not finished. Errors: ErrUnsupported,
// fn's error, those of the store.
func (e *Engine) Export(ctx context.Context, fn func(*Job) error) error {
	x, ok := e.store.(JobExporter)
	if !ok {
		return ErrUnsupported
	}
	return x.ExportJobs(ctx, fn)
}

// Import validates exported jobs and stores those whose id is not in use
// (see JobImporter). A reserved job on its last attempt is imported dead
// ("lease expired"), as its lost lease would have made it. A job that fails
// validation gets its error in the result and is not stored; the others
// are imported or skipped. Errors:
// ErrUnsupported, those of the store.
func (e *Engine) Import(ctx context.Context, jobs []*Job) ([]ImportResult, error) {
	im, ok := e.store.(JobImporter)
	if !ok {
		return nil, ErrUnsupported
	}
	results := make([]ImportResult, len(jobs))
	valid := make([]*Job, 0, len(jobs))
	idx := make([]int, 0, len(jobs))
	urls := urlChecks{}
	for i, j := range jobs {
		if err := e.validateImport(j, urls); err != nil {
			results[i].Err = err
			continue
		}
		valid = append(valid, j)
		idx = append(idx, i)
	}
	if len(valid) == 0 {
		return results, nil
	}
	if err := e.noteExpiring(ctx, valid); err != nil {
		return nil, err
	}
	done, err := im.ImportJobs(ctx, valid)
	if err != nil {
		return nil, err
	}
	for k, i := range idx {
		results[i].Imported = done[k]
	}
	return results, nil
}

// ImportResult is the outcome of one job of Engine.Import.
type ImportResult struct {
	// Imported is true when the job was stored, false when skipped or invalid.
	Imported bool
	// Err is the job's validation error, nil otherwise.
	Err error
}

// validateImport checks an exported job as Push checks a new one
// (validateJob), with the rules of import besides: run_at is required, a
// k- id must be its own topic and key's (KeyID),
// state and attempt must be ones a store keeps, and so must its history
// (checkHistory); created_at and the history's times must be in the range
// of run_at (see importTimeOK). It normalises what stores rely on: UTC ms
// times and no lease.
func (e *Engine) validateImport(j *Job, urls urlChecks) error {
	now := e.clock.Now()
	if j.RunAt.IsZero() {
		return Invalid("run_at", "run_at is required")
	}
	if err := e.validateJob(j, false, now, urls); err != nil {
		return err
	}
	if IsKeyID(j.ID) && j.ID != KeyID(j.Topic, j.Key) {
		// Another topic's (or key's) id would hold that key: its pushes
		// would conflict from then on.
		return Invalid("id", "an id of the form k- and 32 hex digits is the id of its topic and key's unique key; this job's would be %s", KeyID(j.Topic, j.Key))
	}
	if !e.importTimeOK(j.CreatedAt, now) {
		return Invalid("created_at", "created_at must be from %s to %s from now", RunAtMin.Format(time.RFC3339), e.limits.MaxDelay)
	}
	for i, a := range j.History {
		for _, t := range []struct {
			name string
			at   time.Time
		}{{"started_at", a.StartedAt}, {"ended_at", a.EndedAt}} {
			if !e.importTimeOK(t.at, now) {
				return Invalid("history", "history[%d]: %s must be from %s to %s from now", i, t.name, RunAtMin.Format(time.RFC3339), e.limits.MaxDelay)
			}
		}
	}
	switch j.State {
	case StateScheduled, StateReady, StateReserved, StateDead:
	default:
		return Invalid("state", "state must be scheduled, ready, reserved or dead")
	}
	if j.Attempt < 0 || j.Attempt > j.MaxAttempts {
		return Invalid("attempt", "attempt must be between 0 and max_attempts")
	}
	j.RunAt, j.CreatedAt = StoreTime(j.RunAt), StoreTime(j.CreatedAt)
	if j.CreatedAt.IsZero() {
		j.CreatedAt = StoreTime(now)
	}
	if j.State == StateReserved && j.Attempt >= j.MaxAttempts {
		// Its lease is lost with the old store, as if it expired: on the
		// last attempt that makes it dead, as ClaimJobs would.
		j.State, j.LastError = StateDead, LeaseExpired
	}
	j.LastError = CutError(j.LastError)
	j.Lease, j.LeaseExpiresAt = "", time.Time{}
	if err := e.checkChanges(j, now); err != nil {
		return err
	}
	return checkHistory(j)
}

// importTimeOK reports whether t, a time an imported job carries besides
// run_at, is absent (zero) or in the range run_at may take: from RunAtMin
// to Limits.MaxDelay after now. Stores keep times as int64 nanoseconds
// since the epoch, which end in 2262: a created_at of year 9999 came back
// as 1816.
func (e *Engine) importTimeOK(t, now time.Time) bool {
	return t.IsZero() || !t.Before(RunAtMin) && t.Sub(now) <= e.limits.MaxDelay
}

// checkChanges checks and normalises an imported job's Changes: the
// newest ChangesMax kept, each of a known kind and via (or none), at a
// time importTimeOK takes; times at store precision, tokens cleaned. A
// job without any gets one: created by import at its CreatedAt.
func (e *Engine) checkChanges(j *Job, now time.Time) error {
	if len(j.Changes) > ChangesMax {
		j.Changes = j.Changes[len(j.Changes)-ChangesMax:]
	}
	j.Changes = slices.Clone(j.Changes)
	for i := range j.Changes {
		c := &j.Changes[i]
		switch c.Kind {
		case ChangeCreated, ChangeReplaced, ChangeRequeued:
		default:
			return Invalid("changes", "changes[%d]: unknown kind %q", i, c.Kind)
		}
		switch c.Via {
		case "", OriginHTTP, OriginGRPC, OriginNATS, OriginKafka, OriginSchedule, OriginImport, OriginChain, OriginEvents, OriginNotices:
		default:
			return Invalid("changes", "changes[%d]: unknown via %q", i, c.Via)
		}
		if c.At.IsZero() || !e.importTimeOK(c.At, now) {
			return Invalid("changes", "changes[%d]: at must be from %s to %s from now", i, RunAtMin.Format(time.RFC3339), e.limits.MaxDelay)
		}
		c.At, c.Token = StoreTime(c.At), CleanName(c.Token)
	}
	if len(j.Changes) == 0 {
		// validateImport set CreatedAt (now when the line had none).
		j.Changes = []Change{{At: j.CreatedAt, Kind: ChangeCreated, Via: OriginImport}}
	}
	return nil
}

// checkHistory checks and normalises an imported job's History: the
// newest attempts within HistoryMax and HistoryMaxBytes (TrimHistory),
// each started, with a known via (or none) and outcome, only the last one
// in progress; times at store precision, errors cut, names cleaned.
// Job.Import ends an attempt in progress.
func checkHistory(j *Job) error {
	for i := range j.History {
		a := &j.History[i]
		a.Error, a.Instance, a.Consumer = CutError(a.Error), CleanName(a.Instance), CleanName(a.Consumer)
	}
	j.History = TrimHistory(j.History)
	for i := range j.History {
		a := &j.History[i]
		switch {
		case a.StartedAt.IsZero():
			return Invalid("history", "history[%d]: started_at is required", i)
		case a.Attempt < 0:
			return Invalid("history", "history[%d]: attempt must not be negative", i)
		}
		switch a.Via {
		case "", ViaPull, ViaWebSocket, ViaGRPC, ViaWebhook, ViaNATS:
		default:
			return Invalid("history", "history[%d]: unknown via %q", i, a.Via)
		}
		switch a.Outcome {
		case OutcomeAcked, OutcomeRetried, OutcomeBuried, OutcomeLeaseExpired, OutcomeReleased:
		case "":
			if i < len(j.History)-1 {
				return Invalid("history", "history[%d]: only the last attempt may be in progress", i)
			}
		default:
			return Invalid("history", "history[%d]: unknown outcome %q", i, a.Outcome)
		}
		a.StartedAt, a.EndedAt = StoreTime(a.StartedAt), StoreTime(a.EndedAt)
		a.Error = CutError(a.Error)
	}
	return nil
}
