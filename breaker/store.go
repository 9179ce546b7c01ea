package breaker

import (
	"context"
	"errors"
	"time"

	"github.com/delayq/delayq/core"
)

// Store is a core.Store that passes calls to another store through a circuit
// breaker. It is safe for concurrent use. Create it with New.
type Store struct {
	next core.Store
	c    *circuit
}

var (
	_ core.Store        = (*Store)(nil)
	_ core.JobExporter  = (*Store)(nil)
	_ core.JobImporter  = (*Store)(nil)
	_ core.Checkpointer = (*Store)(nil)
)

// New returns store behind a breaker configured by cfg. It panics when cfg,
// with its defaults filled, is invalid (see Config.Validate).
func New(store core.Store, cfg Config) *Store {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Store{next: store, c: newCircuit(cfg.Name, cfg)}
}

// State returns the breaker's state. An open breaker whose OpenTimeout has
// passed reports half-open.
func (s *Store) State() State { return s.c.state() }

// Unwrap returns the store behind the breaker.
func (s *Store) Unwrap() core.Store { return s.next }

// callCtx bounds a call by CallTimeout beyond extra.
func (s *Store) callCtx(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	if s.c.cfg.CallTimeout < 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, extra+s.c.cfg.CallTimeout)
}

// do runs f through the breaker with a deadline of CallTimeout beyond extra.
// While the breaker refuses calls it returns ErrOpen without running f.
func do[T any](s *Store, ctx context.Context, extra time.Duration, f func(context.Context) (T, error)) (v T, err error) {
	return through(s, ctx, func(ctx context.Context) (context.Context, context.CancelFunc) { return s.callCtx(ctx, extra) }, f)
}

// unbounded is the bound of a call that CallTimeout does not bound: ctx only.
func unbounded(ctx context.Context) (context.Context, context.CancelFunc) { return ctx, func() {} }

// through runs f through the breaker under the ctx that bound derives from
// ctx, and counts its outcome. While the breaker refuses calls it returns
// ErrOpen without running f.
func through[T any](s *Store, ctx context.Context, bound func(context.Context) (context.Context, context.CancelFunc),
	f func(context.Context) (T, error)) (v T, err error) {
	done, err := s.c.allow()
	if err != nil {
		return v, ErrOpen
	}
	reported := false
	defer func() {
		if !reported {
			done(errFailure) // f panicked; free the probe slot
		}
	}()
	cctx, cancel := bound(ctx)
	defer cancel()
	v, err = f(cctx)
	reported = true
	done(outcome(ctx, err, s.c.cfg.IsFailureFunc))
	return v, err
}

// do0 is do for calls that return only an error.
func do0(s *Store, ctx context.Context, f func(context.Context) error) error {
	_, err := do(s, ctx, 0, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// PutJobs implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) PutJobs(ctx context.Context, params *core.PutJobsParams) ([]core.PutResult, error) {
	return do(s, ctx, 0, func(ctx context.Context) ([]core.PutResult, error) { return s.next.PutJobs(ctx, params) })
}

// GetJob implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) GetJob(ctx context.Context, id string) (*core.Job, error) {
	return do(s, ctx, 0, func(ctx context.Context) (*core.Job, error) { return s.next.GetJob(ctx, id) })
}

// ExpireJob implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) ExpireJob(ctx context.Context, id string) error {
	return do0(s, ctx, func(ctx context.Context) error { return s.next.ExpireJob(ctx, id) })
}

// CancelJob implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) CancelJob(ctx context.Context, params *core.CancelJobParams) error {
	return do0(s, ctx, func(ctx context.Context) error { return s.next.CancelJob(ctx, params) })
}

// ClaimJobs implements core.Store. A claim that returns jobs counts as a
// success; one that waited and found none is not counted. While the breaker
// is not closed the claim first probes the store with Ping, and returns the
// probe's error (ErrOpen while open) when it fails; when the probe succeeds
// but the breaker is still half-open, the claim runs outside the breaker,
// so its wait holds no probe slot. Errors: those of the store, ErrOpen.
func (s *Store) ClaimJobs(ctx context.Context, params *core.ClaimJobsParams) ([]*core.Job, error) {
	var wait time.Duration
	if params != nil {
		wait = max(params.Wait, 0)
	}
	if s.c.state() != StateClosed {
		if err := s.Ping(ctx); err != nil {
			return nil, err
		}
		if s.c.state() != StateClosed {
			cctx, cancel := s.callCtx(ctx, wait)
			defer cancel()
			return s.next.ClaimJobs(cctx, params)
		}
	}
	jobs, err := do(s, ctx, wait, func(cctx context.Context) ([]*core.Job, error) {
		jobs, err := s.next.ClaimJobs(cctx, params)
		if err == nil && len(jobs) == 0 {
			return jobs, errNothingClaimed
		}
		return jobs, err
	})
	if err == errNothingClaimed {
		err = nil
	}
	return jobs, err
}

// AckJob implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) AckJob(ctx context.Context, params *core.AckJobParams) (core.SettleResult, error) {
	return do(s, ctx, 0, func(ctx context.Context) (core.SettleResult, error) { return s.next.AckJob(ctx, params) })
}

// AckJobs implements core.Store. Errors: those of the store, ErrOpen; the
// acks' own errors (a lost lease) are results, not failures.
func (s *Store) AckJobs(ctx context.Context, params *core.AckJobsParams) ([]core.AckResult, error) {
	return do(s, ctx, 0, func(ctx context.Context) ([]core.AckResult, error) { return s.next.AckJobs(ctx, params) })
}

// RetryJob implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) RetryJob(ctx context.Context, params *core.RetryJobParams) (core.SettleResult, error) {
	return do(s, ctx, 0, func(ctx context.Context) (core.SettleResult, error) { return s.next.RetryJob(ctx, params) })
}

// BuryJob implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) BuryJob(ctx context.Context, params *core.BuryJobParams) (core.SettleResult, error) {
	return do(s, ctx, 0, func(ctx context.Context) (core.SettleResult, error) { return s.next.BuryJob(ctx, params) })
}

// TouchJob implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) TouchJob(ctx context.Context, params *core.TouchJobParams) (*core.Job, error) {
	return do(s, ctx, 0, func(ctx context.Context) (*core.Job, error) { return s.next.TouchJob(ctx, params) })
}

// RequeueJob implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) RequeueJob(ctx context.Context, id string) error {
	return do0(s, ctx, func(ctx context.Context) error { return s.next.RequeueJob(ctx, id) })
}

// ListDeadJobs implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) ListDeadJobs(ctx context.Context, params *core.ListDeadJobsParams) ([]*core.Job, error) {
	return do(s, ctx, 0, func(ctx context.Context) ([]*core.Job, error) { return s.next.ListDeadJobs(ctx, params) })
}

// ListFinished implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) ListFinished(ctx context.Context, params *core.ListFinishedParams) (core.FinishedPage, error) {
	return do(s, ctx, 0, func(ctx context.Context) (core.FinishedPage, error) { return s.next.ListFinished(ctx, params) })
}

// FindJobs implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) FindJobs(ctx context.Context, params *core.FindJobsParams) ([]*core.Job, error) {
	return do(s, ctx, 0, func(ctx context.Context) ([]*core.Job, error) { return s.next.FindJobs(ctx, params) })
}

// ListJobs implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) ListJobs(ctx context.Context, params *core.ListJobsParams) (core.JobPage, error) {
	return do(s, ctx, 0, func(ctx context.Context) (core.JobPage, error) { return s.next.ListJobs(ctx, params) })
}

// TakeRate implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) TakeRate(ctx context.Context, params *core.TakeRateParams) (core.TakeRateResult, error) {
	return do(s, ctx, 0, func(ctx context.Context) (core.TakeRateResult, error) { return s.next.TakeRate(ctx, params) })
}

// GetTopicState implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) GetTopicState(ctx context.Context, name string) (core.TopicState, error) {
	return do(s, ctx, 0, func(ctx context.Context) (core.TopicState, error) { return s.next.GetTopicState(ctx, name) })
}

// SetTopicPaused implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) SetTopicPaused(ctx context.Context, name string, paused bool) error {
	return do0(s, ctx, func(ctx context.Context) error { return s.next.SetTopicPaused(ctx, name, paused) })
}

// ListTopicStates implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) ListTopicStates(ctx context.Context) ([]core.TopicState, error) {
	return do(s, ctx, 0, func(ctx context.Context) ([]core.TopicState, error) { return s.next.ListTopicStates(ctx) })
}

// GetRecord implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) GetRecord(ctx context.Context, kind, name string) (*core.Record, error) {
	return do(s, ctx, 0, func(ctx context.Context) (*core.Record, error) { return s.next.GetRecord(ctx, kind, name) })
}

// PutRecord implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) PutRecord(ctx context.Context, params *core.PutRecordParams) (uint64, error) {
	return do(s, ctx, 0, func(ctx context.Context) (uint64, error) { return s.next.PutRecord(ctx, params) })
}

// DeleteRecord implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) DeleteRecord(ctx context.Context, params *core.DeleteRecordParams) error {
	return do0(s, ctx, func(ctx context.Context) error { return s.next.DeleteRecord(ctx, params) })
}

// ListRecords implements core.Store. Errors: those of the store, ErrOpen.
func (s *Store) ListRecords(ctx context.Context, kind string) ([]*core.Record, error) {
	return do(s, ctx, 0, func(ctx context.Context) ([]*core.Record, error) { return s.next.ListRecords(ctx, kind) })
}

// Ping implements core.Store: it asks the store through the breaker, so it
// fails with ErrOpen while the breaker is open, and a successful Ping while
// half-open is a probe that helps close it. Errors: those of the store,
// ErrOpen.
func (s *Store) Ping(ctx context.Context) error {
	return do0(s, ctx, s.next.Ping)
}

// ExportJobs implements core.JobExporter through the breaker: refused with
// ErrOpen while the breaker is open, a failure of the store counted as for
// any call, and while half-open the export is a probe that holds its slot
// until it ends. An export lasts as long as the store has jobs to list and
// fn takes to handle them, so CallTimeout does not bound it: only ctx does,
// and a store that stops answering holds the export until ctx is done (a
// failure when ctx's deadline ran out, not when the caller cancelled, as for
// any call). fn's error is the
// caller's, returned as it came and never counted. Errors:
// core.ErrUnsupported when the store lacks the capability, fn's error,
// those of the store, ErrOpen.
func (s *Store) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	x, ok := s.next.(core.JobExporter)
	if !ok {
		return core.ErrUnsupported
	}
	var fnErr, callerErr error
	_, err := through(s, ctx, unbounded, func(ctx context.Context) (struct{}, error) {
		err := x.ExportJobs(ctx, func(j *core.Job) error {
			if err := fn(j); err != nil {
				fnErr = err
				return err
			}
			return nil
		})
		if err != nil && fnErr != nil && errors.Is(err, fnErr) {
			callerErr = err
			return struct{}{}, errCallerFailed
		}
		return struct{}{}, err
	})
	if err == errCallerFailed {
		return callerErr
	}
	return err
}

// ImportJobs implements core.JobImporter through the breaker, bounded by
// CallTimeout as PutJobs is. Errors: core.ErrUnsupported when the store
// lacks the capability, those of the store, ErrOpen.
func (s *Store) ImportJobs(ctx context.Context, jobs []*core.Job) ([]bool, error) {
	im, ok := s.next.(core.JobImporter)
	if !ok {
		return nil, core.ErrUnsupported
	}
	return do(s, ctx, 0, func(ctx context.Context) ([]bool, error) { return im.ImportJobs(ctx, jobs) })
}

// Checkpoint implements core.Checkpointer through the breaker: refused
// with ErrOpen while the breaker is open, a failure of the store counted as
// for any call (one the store reports as core.ErrUnavailable; a checkpoint
// that failed on the file system is not one, see the store's doc), and
// while half-open the checkpoint is a probe. A checkpoint copies what it
// cannot hard-link, which takes as long as the data is large, so
// CallTimeout does not bound it: only ctx does. Errors:
// core.ErrUnsupported when the store lacks the capability, those of the
// store, ErrOpen.
func (s *Store) Checkpoint(ctx context.Context, dir string) error {
	c, ok := s.next.(core.Checkpointer)
	if !ok {
		return core.ErrUnsupported
	}
	_, err := through(s, ctx, unbounded, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.Checkpoint(ctx, dir)
	})
	return err
}

// Close implements core.Store: it closes the store behind the breaker,
// whatever the breaker's state. Idempotent if the store's Close is.
func (s *Store) Close() error { return s.next.Close() }
