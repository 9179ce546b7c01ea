package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// TestStore runs the conformance suite over memstore behind a breaker: the
// breaker changes nothing while the store answers.
func TestStore(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		stores = map[string]*memstore.Store{}
	)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, ns string) core.Store {
			mu.Lock()
			defer mu.Unlock()
			s, ok := stores[ns]
			if !ok {
				s = memstore.New(memstore.Config{})
				stores[ns] = s
			}
			return breaker.New(s, breaker.Config{})
		},
	})
}

type transition struct{ from, to breaker.State }

type testBundle struct {
	down    *downStore
	store   *breaker.Store
	changes chan transition
	ctx     context.Context
}

// setup returns a breaker over a down wrapper of memstore; mod changes the
// breaker's configuration, whose OpenTimeout is 50ms unless changed.
func setup(t *testing.T, mod ...func(*breaker.Config)) *testBundle {
	t.Helper()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	b := &testBundle{down: &downStore{Store: mem}, changes: make(chan transition, 64), ctx: context.Background()}
	cfg := breaker.Config{
		ConsecutiveFailures: 3,
		OpenTimeout:         50 * time.Millisecond,
		Logger:              slog.New(slog.DiscardHandler),
		OnStateChangeFunc:   func(_ string, from, to breaker.State) { b.changes <- transition{from, to} },
	}
	for _, m := range mod {
		m(&cfg)
	}
	b.store = breaker.New(b.down, cfg)
	return b
}

// requireChange waits for the next change of state.
func (b *testBundle) requireChange(t *testing.T, from, to breaker.State) {
	t.Helper()
	select {
	case c := <-b.changes:
		require.Equal(t, transition{from, to}, c)
	case <-time.After(5 * time.Second):
		t.Fatalf("no change from %s to %s", from, to)
	}
}

// requireNoChange checks that the state did not change.
func (b *testBundle) requireNoChange(t *testing.T) {
	t.Helper()
	select {
	case c := <-b.changes:
		t.Fatalf("unexpected change from %s to %s", c.from, c.to)
	default:
	}
}

// waitHalfOpen waits for OpenTimeout to pass. gobreaker reads the real
// clock and turns half-open when asked after the timeout, so this asks
// State until it does.
func (b *testBundle) waitHalfOpen(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return b.store.State() == breaker.StateHalfOpen }, 5*time.Second, 5*time.Millisecond)
	b.requireChange(t, breaker.StateOpen, breaker.StateHalfOpen)
}

func (b *testBundle) put(t *testing.T, jobs ...*core.Job) error {
	t.Helper()
	res, err := b.store.PutJobs(b.ctx, &core.PutJobsParams{Jobs: jobs})
	if err == nil {
		for _, r := range res {
			require.NoError(t, r.Err)
		}
	}
	return err
}

// trip makes the store fail until the breaker opens.
func (b *testBundle) trip(t *testing.T) {
	t.Helper()
	b.down.down.Store(true)
	for range 3 {
		err := b.put(t, storetest.DueJob("trip"))
		require.ErrorIs(t, err, core.ErrUnavailable)
		require.NotErrorIs(t, err, breaker.ErrOpen, "the failures themselves reached the store")
	}
	b.requireChange(t, breaker.StateClosed, breaker.StateOpen)
	require.Equal(t, breaker.StateOpen, b.store.State())
}

// TestOpenHalfOpenClosed walks the breaker through its states with a store
// that goes down and comes back.
func TestOpenHalfOpenClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.put(t, storetest.DueJob("a")))
	b.trip(t)

	b.waitHalfOpen(t)
	// The probe reaches the store, which is still down: open again.
	calls := b.down.calls.Load()
	require.ErrorIs(t, b.store.Ping(b.ctx), core.ErrUnavailable)
	require.Equal(t, calls+1, b.down.calls.Load())
	b.requireChange(t, breaker.StateHalfOpen, breaker.StateOpen)
	require.ErrorIs(t, b.store.Ping(b.ctx), breaker.ErrOpen)

	b.waitHalfOpen(t)
	b.down.down.Store(false)
	require.NoError(t, b.store.Ping(b.ctx), "a probe that succeeds closes the breaker")
	b.requireChange(t, breaker.StateHalfOpen, breaker.StateClosed)
	require.NoError(t, b.put(t, storetest.DueJob("a")))
	require.Equal(t, breaker.StateClosed, b.store.State())
}

// TestOpenAnswersAtOnce checks that while open every method answers ErrOpen
// at once without reaching the store, a long claim included.
func TestOpenAnswersAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *breaker.Config) { c.OpenTimeout = time.Hour })
	b.trip(t)
	calls := b.down.calls.Load()
	s, ctx := b.store, b.ctx
	ops := map[string]func() error{
		"PutJobs": func() error {
			_, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{storetest.DueJob("a")}})
			return err
		},
		"GetJob":    func() error { _, err := s.GetJob(ctx, "x"); return err },
		"CancelJob": func() error { return s.CancelJob(ctx, &core.CancelJobParams{ID: "x"}) },
		"ClaimJobs": func() error {
			_, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "a", Max: 1, Wait: time.Minute})
			return err
		},
		"AckJob":     func() error { return settleErr(s.AckJob(ctx, &core.AckJobParams{ID: "x", Lease: "l"})) },
		"RetryJob":   func() error { return settleErr(s.RetryJob(ctx, &core.RetryJobParams{ID: "x", Lease: "l"})) },
		"BuryJob":    func() error { return settleErr(s.BuryJob(ctx, &core.BuryJobParams{ID: "x", Lease: "l"})) },
		"TouchJob":   func() error { _, err := s.TouchJob(ctx, &core.TouchJobParams{ID: "x", Lease: "l"}); return err },
		"RequeueJob": func() error { return s.RequeueJob(ctx, "x") },
		"ListDeadJobs": func() error {
			_, err := s.ListDeadJobs(ctx, &core.ListDeadJobsParams{Topic: "a", Limit: 1})
			return err
		},
		"GetTopicState":   func() error { _, err := s.GetTopicState(ctx, "a"); return err },
		"ListTopicStates": func() error { _, err := s.ListTopicStates(ctx); return err },
		"Ping":            func() error { return s.Ping(ctx) },
	}
	var slowest time.Duration
	for name, op := range ops {
		for range 100 {
			start := time.Now()
			err := op()
			slowest = max(slowest, time.Since(start))
			require.ErrorIs(t, err, breaker.ErrOpen, name)
			require.ErrorIs(t, err, core.ErrUnavailable, name)
		}
	}
	require.Equal(t, calls, b.down.calls.Load(), "no call reached the store while open")
	require.Less(t, slowest, 50*time.Millisecond)
	t.Logf("slowest of %d calls while open: %s", 100*len(ops), slowest)
	b.requireNoChange(t)
}

// TestAnswersDoNotCount checks that answers of the backend (not found,
// conflict, validation) and a caller's cancellation never open the breaker.
func TestAnswersDoNotCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := storetest.DueJob("a")
	require.NoError(t, b.put(t, j))
	for range 10 {
		_, err := b.store.GetJob(b.ctx, "missing")
		require.ErrorIs(t, err, core.ErrNotFound)
		res, err := b.store.PutJobs(b.ctx, &core.PutJobsParams{Jobs: []*core.Job{j}})
		require.NoError(t, err)
		require.ErrorIs(t, res[0].Err, core.ErrConflict)
		_, err = b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: "a", Max: 0})
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.ErrorIs(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: j.ID, Lease: "wrong"})), core.ErrConflict)
	}
	// A backend that hangs, with callers that give up: not counted.
	b.down.hang.Store(true)
	b.down.down.Store(true)
	for range 10 {
		ctx, cancel := context.WithCancel(b.ctx)
		go cancel()
		require.ErrorIs(t, b.store.Ping(ctx), context.Canceled)
	}
	require.Equal(t, breaker.StateClosed, b.store.State())
	b.requireNoChange(t)
}

// TestCallTimeoutCounts checks that a backend that hangs instead of failing
// opens the breaker: each call runs out of CallTimeout.
func TestCallTimeoutCounts(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *breaker.Config) { c.CallTimeout = 20 * time.Millisecond; c.OpenTimeout = time.Hour })
	b.down.hang.Store(true)
	b.down.down.Store(true)
	for range 3 {
		start := time.Now()
		err := b.put(t, storetest.DueJob("a"))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(start), time.Second)
	}
	b.requireChange(t, breaker.StateClosed, breaker.StateOpen)
}

// TestEmptyClaimsDoNotCount checks that a claim that waits and finds nothing
// is neither a failure (its wait is not cut by CallTimeout) nor a success
// (it does not reset the failures in a row).
func TestEmptyClaimsDoNotCount(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *breaker.Config) { c.CallTimeout = 20 * time.Millisecond; c.OpenTimeout = time.Hour })
	claim := func() {
		start := time.Now()
		jobs, err := b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: "idle", Max: 1, Wait: 100 * time.Millisecond})
		require.NoError(t, err)
		require.Empty(t, jobs)
		require.GreaterOrEqual(t, time.Since(start), 90*time.Millisecond, "the claim waited its Wait, beyond CallTimeout")
	}
	claim()
	fail := func() {
		b.down.down.Store(true)
		require.ErrorIs(t, b.put(t, storetest.DueJob("a")), core.ErrUnavailable)
		b.down.down.Store(false)
	}
	fail()
	claim()
	fail()
	claim()
	b.requireNoChange(t)
	fail()
	b.requireChange(t, breaker.StateClosed, breaker.StateOpen)
}

// TestHalfOpenClaimProbesWithPing checks that a long claim made while
// half-open probes with Ping and holds no probe slot during its wait.
func TestHalfOpenClaimProbesWithPing(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *breaker.Config) { c.HalfOpenMaxRequests = 2 })
	b.trip(t)
	b.waitHalfOpen(t)
	b.down.down.Store(false)
	b.down.entered = make(chan string, 4)

	claimed := make(chan []*core.Job, 1)
	go func() {
		jobs, err := b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: "late", Max: 1, Wait: 5 * time.Second})
		if err != nil {
			jobs = nil
		}
		claimed <- jobs
	}()
	// The claim's Ping is one success of two; the claim then waits outside
	// the breaker, and the put is the second probe, which closes it.
	require.Equal(t, "Ping", <-b.down.entered)
	require.Equal(t, "ClaimJobs", <-b.down.entered)
	require.Equal(t, breaker.StateHalfOpen, b.store.State())
	j := storetest.DueJob("late")
	require.NoError(t, b.put(t, j))
	require.Equal(t, "PutJobs", <-b.down.entered)
	b.requireChange(t, breaker.StateHalfOpen, breaker.StateClosed)
	got := <-claimed
	require.Len(t, got, 1)
	require.Equal(t, j.ID, got[0].ID)
}

// TestHalfOpenProbeLimit checks that while half-open only
// HalfOpenMaxRequests calls reach the store at once.
func TestHalfOpenProbeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.trip(t)
	b.waitHalfOpen(t)
	b.down.hung = make(chan struct{}, 1)
	b.down.hang.Store(true) // the probe hangs until its ctx is done
	ctx, cancel := context.WithCancel(b.ctx)
	probe := make(chan error, 1)
	calls := b.down.calls.Load()
	go func() { probe <- b.store.Ping(ctx) }()
	<-b.down.hung
	for range 10 {
		require.ErrorIs(t, b.store.Ping(b.ctx), breaker.ErrOpen)
	}
	require.Equal(t, calls+1, b.down.calls.Load())
	cancel()
	require.ErrorIs(t, <-probe, context.Canceled)
	// A cancelled probe is not counted and frees its slot.
	b.down.down.Store(false)
	b.down.hang.Store(false)
	require.NoError(t, b.store.Ping(b.ctx))
	b.requireChange(t, breaker.StateHalfOpen, breaker.StateClosed)
}

// TestFailureRatio opens the breaker on the share of failures over the
// window rather than failures in a row.
func TestFailureRatio(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *breaker.Config) {
		c.ConsecutiveFailures = -1
		c.FailureRatio = 0.5
		c.MinRequests = 6
		c.Window = time.Hour
	})
	for i := range 6 {
		b.down.down.Store(i%2 == 1)
		err := b.store.Ping(b.ctx)
		if i%2 == 1 {
			require.ErrorIs(t, err, core.ErrUnavailable)
		} else {
			require.NoError(t, err)
		}
		if i < 5 {
			b.requireNoChange(t)
		}
	}
	b.requireChange(t, breaker.StateClosed, breaker.StateOpen)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]breaker.Config{
		"ratio":    {FailureRatio: 1.5},
		"no rule":  {ConsecutiveFailures: -1},
		"window":   {Window: time.Millisecond},
		"min":      {MinRequests: -1},
		"timeout":  {OpenTimeout: -time.Second},
		"halfopen": {HalfOpenMaxRequests: -1},
	} {
		require.Error(t, c.WithDefaults().Validate(), name)
	}
	require.NoError(t, breaker.Config{}.WithDefaults().Validate())
	require.Panics(t, func() { breaker.New(nil, breaker.Config{FailureRatio: 2}) })
}

func TestIsInfrastructure(t *testing.T) {
	t.Parallel()
	require.True(t, breaker.IsInfrastructure(core.ErrUnavailable))
	require.True(t, breaker.IsInfrastructure(context.DeadlineExceeded))
	require.True(t, breaker.IsInfrastructure(breaker.ErrOpen))
	require.False(t, breaker.IsInfrastructure(core.ErrClosed))
	require.False(t, breaker.IsInfrastructure(fmt.Errorf("store: %w", core.ErrStorageFull)), "a full store answers")
	require.False(t, breaker.IsInfrastructure(core.ErrNotFound))
	require.False(t, breaker.IsInfrastructure(core.ErrLeaseLost))
	require.False(t, breaker.IsInfrastructure(core.Invalid("x", "bad")))
	require.False(t, breaker.IsInfrastructure(errors.New("lua script error")))
}

// exportStore is memstore with export and import that record whether their
// ctx has a deadline and fail while down.
type exportStore struct {
	*memstore.Store
	down        atomic.Bool
	calls       atomic.Int64
	exportBound atomic.Bool
	importBound atomic.Bool
}

func (e *exportStore) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	e.calls.Add(1)
	_, bound := ctx.Deadline()
	e.exportBound.Store(bound)
	if e.down.Load() {
		return fmt.Errorf("fake backend: %w: connection refused", core.ErrUnavailable)
	}
	return e.Store.ExportJobs(ctx, fn)
}

func (e *exportStore) ImportJobs(ctx context.Context, jobs []*core.Job) ([]bool, error) {
	e.calls.Add(1)
	_, bound := ctx.Deadline()
	e.importBound.Store(bound)
	if e.down.Load() {
		return nil, fmt.Errorf("fake backend: %w: connection refused", core.ErrUnavailable)
	}
	return e.Store.ImportJobs(ctx, jobs)
}

func newExportBreaker(t *testing.T) (*exportStore, *breaker.Store) {
	t.Helper()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	x := &exportStore{Store: mem}
	return x, breaker.New(x, breaker.Config{
		ConsecutiveFailures: 3,
		OpenTimeout:         time.Hour,
		CallTimeout:         50 * time.Millisecond,
		Logger:              slog.New(slog.DiscardHandler),
	})
}

// TestExportImport checks that export and import pass through the breaker:
// the export is not bounded by CallTimeout, the import is; fn's errors,
// however they look, never count; the store's failures do, and once open
// both answer ErrOpen without reaching the store.
func TestExportImport(t *testing.T) {
	t.Parallel()
	x, s := newExportBreaker(t)
	ctx := t.Context()
	jobs := []*core.Job{storetest.DueJob("a"), storetest.DueJob("a")}
	res, err := s.ImportJobs(ctx, jobs)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, res)
	require.True(t, x.importBound.Load(), "ImportJobs is bounded by CallTimeout")

	var n int
	require.NoError(t, s.ExportJobs(ctx, func(*core.Job) error { n++; return nil }))
	require.Equal(t, 2, n)
	require.False(t, x.exportBound.Load(), "ExportJobs is not bounded by CallTimeout")

	// fn's error comes back as it was and does not count, even one that
	// looks like an outage.
	stop := fmt.Errorf("writing the export: %w", core.ErrUnavailable)
	for range 5 {
		err := s.ExportJobs(ctx, func(*core.Job) error { return stop })
		require.ErrorIs(t, err, stop)
		require.NotErrorIs(t, err, breaker.ErrOpen)
	}
	require.Equal(t, breaker.StateClosed, s.State())

	x.down.Store(true)
	require.ErrorIs(t, s.ExportJobs(ctx, func(*core.Job) error { return nil }), core.ErrUnavailable)
	_, err = s.ImportJobs(ctx, jobs)
	require.ErrorIs(t, err, core.ErrUnavailable)
	require.ErrorIs(t, s.ExportJobs(ctx, func(*core.Job) error { return nil }), core.ErrUnavailable)
	require.Equal(t, breaker.StateOpen, s.State(), "three failures of export and import open the breaker")
	calls := x.calls.Load()
	require.ErrorIs(t, s.ExportJobs(ctx, func(*core.Job) error { return nil }), breaker.ErrOpen)
	_, err = s.ImportJobs(ctx, jobs)
	require.ErrorIs(t, err, breaker.ErrOpen)
	require.Equal(t, calls, x.calls.Load(), "no call reached the store while open")
}

// TestExportImportUnsupported checks that over a store without the
// capabilities, export and import answer core.ErrUnsupported at once, reach
// nothing and count nothing.
func TestExportImportUnsupported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := b.down.calls.Load()
	for range 5 {
		err := b.store.ExportJobs(b.ctx, func(*core.Job) error { return nil })
		require.ErrorIs(t, err, core.ErrUnsupported)
		require.ErrorIs(t, err, errors.ErrUnsupported)
		_, err = b.store.ImportJobs(b.ctx, []*core.Job{storetest.DueJob("a")})
		require.ErrorIs(t, err, core.ErrUnsupported)
	}
	require.Equal(t, calls, b.down.calls.Load())
	require.Equal(t, breaker.StateClosed, b.store.State())
	b.requireNoChange(t)
}

// checkpointStore is memstore with a checkpoint that records whether its
// ctx has a deadline and fails while down, or with err when set.
type checkpointStore struct {
	*memstore.Store
	down  atomic.Bool
	calls atomic.Int64
	bound atomic.Bool
	err   error
}

func (c *checkpointStore) Checkpoint(ctx context.Context, _ string) error {
	c.calls.Add(1)
	_, bound := ctx.Deadline()
	c.bound.Store(bound)
	if c.down.Load() {
		return fmt.Errorf("fake backend: %w: disk gone", core.ErrUnavailable)
	}
	return c.err
}

// TestCheckpoint checks that a checkpoint passes through the breaker,
// unbounded by CallTimeout; that a failure of the file system does not
// count while the store's unavailability does; that once open the
// breaker refuses it; and that a store without the capability answers
// core.ErrUnsupported without counting.
func TestCheckpoint(t *testing.T) {
	t.Parallel()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	c := &checkpointStore{Store: mem}
	s := breaker.New(c, breaker.Config{
		ConsecutiveFailures: 3,
		OpenTimeout:         time.Hour,
		CallTimeout:         50 * time.Millisecond,
		Logger:              slog.New(slog.DiscardHandler),
	})
	ctx := t.Context()
	require.NoError(t, s.Checkpoint(ctx, "/backups/x"))
	require.False(t, c.bound.Load(), "Checkpoint is not bounded by CallTimeout")

	c.err = fmt.Errorf("pebblestore: checkpoint into /backups/x: %w", fs.ErrExist)
	for range 5 {
		require.ErrorIs(t, s.Checkpoint(ctx, "/backups/x"), fs.ErrExist)
	}
	require.Equal(t, breaker.StateClosed, s.State(), "a failed checkpoint is not an outage")

	c.err = nil
	c.down.Store(true)
	for range 3 {
		require.ErrorIs(t, s.Checkpoint(ctx, "/backups/x"), core.ErrUnavailable)
	}
	require.Equal(t, breaker.StateOpen, s.State())
	calls := c.calls.Load()
	require.ErrorIs(t, s.Checkpoint(ctx, "/backups/x"), breaker.ErrOpen)
	require.Equal(t, calls, c.calls.Load(), "no call reached the store while open")

	b := setup(t)
	before := b.down.calls.Load()
	for range 5 {
		err := b.store.Checkpoint(b.ctx, "/backups/x")
		require.ErrorIs(t, err, core.ErrUnsupported)
		require.ErrorIs(t, err, errors.ErrUnsupported)
	}
	require.Equal(t, before, b.down.calls.Load())
	require.Equal(t, breaker.StateClosed, b.store.State())
}
