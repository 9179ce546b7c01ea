package core_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// slotCounter counts the slots engines report created (core.SlotObserver),
// and runs before, when set, once before the next put of a schedule record.
type slotCounter struct {
	core.Store
	created atomic.Int32
	mu      sync.Mutex
	before  func()
}

func (c *slotCounter) ObserveSlot(_ context.Context, _ *core.FireScheduleParams, created bool) {
	if created {
		c.created.Add(1)
	}
}

func (c *slotCounter) PutRecord(ctx context.Context, p *core.PutRecordParams) (uint64, error) {
	c.mu.Lock()
	f := c.before
	c.before = nil
	c.mu.Unlock()
	if f != nil && p.Kind == core.KindSchedule {
		f()
	}
	return c.Store.PutRecord(ctx, p)
}

func newSlotCounter(t *testing.T) (*slotCounter, *coretest.FakeClock) {
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = mem.Close() })
	return &slotCounter{Store: mem}, clock
}

// TestScheduleCrashBetweenJobAndCursor: an instance that created a slot's
// job and stopped before moving the cursor leaves the slot to the others,
// which create nothing again, even once that job is done, and move the
// cursor past it.
func TestScheduleCrashBetweenJobAndCursor(t *testing.T) {
	t.Parallel()
	store, clock := newSlotCounter(t)
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	start := clock.Now()
	_, err = e.PutSchedule(ctx, &core.Schedule{Name: "tick", Cron: "*/10 * * * *", Topic: "ticks"})
	require.NoError(t, err)

	// The crashed instance's half: the slot's job, done since.
	slot := start.Add(10 * time.Minute)
	clock.Advance(10*time.Minute + time.Second)
	j := &core.Job{ID: core.ScheduleID("tick", slot), Topic: "ticks", RunAt: slot, TTR: time.Minute, MaxAttempts: 1}
	res, err := store.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j}, IfAbsent: true})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Len(t, drainTopic(t, e, "ticks"), 1)

	e.FireSchedules(ctx)
	require.Empty(t, drainTopic(t, e, "ticks"), "the slot's done job is not made again")
	got, err := e.Get(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDone, got.State, "kept as it was")
	require.Zero(t, store.created.Load())
	sc, err := e.GetSchedule(ctx, "tick")
	require.NoError(t, err)
	require.Equal(t, slot, sc.Cursor, "the cursor moved past the slot")
}

// TestScheduleFireRace: engines firing one schedule at once, over and
// over, create each slot's job once.
func TestScheduleFireRace(t *testing.T) {
	t.Parallel()
	store, clock := newSlotCounter(t)
	var engines []*core.Engine
	for range 4 {
		e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock})
		require.NoError(t, err)
		engines = append(engines, e)
	}
	ctx := context.Background()
	_, err := engines[0].PutSchedule(ctx, &core.Schedule{Name: "sec", Cron: "@every 1s", Topic: "ticks"})
	require.NoError(t, err)
	const rounds = 20
	for range rounds {
		clock.Advance(time.Second)
		var wg sync.WaitGroup
		for _, e := range engines {
			wg.Go(func() {
				for range 3 {
					e.FireSchedules(ctx)
				}
			})
		}
		wg.Wait()
	}
	jobs := drainTopic(t, engines[0], "ticks")
	require.Len(t, jobs, rounds, "a job per slot")
	require.Equal(t, int32(rounds), store.created.Load(), "each slot reported created once")
	seen := map[time.Time]bool{}
	for _, j := range jobs {
		require.False(t, seen[j.RunAt], "slot %s twice", j.RunAt)
		seen[j.RunAt] = true
	}
}

// TestScheduleChangedWhileFiring: a definition put while another engine
// fires a slot is kept; the firing moves the cursor on it.
func TestScheduleChangedWhileFiring(t *testing.T) {
	t.Parallel()
	store, clock := newSlotCounter(t)
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock})
	require.NoError(t, err)
	other, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	s := &core.Schedule{Name: "tick", Cron: "*/10 * * * *", Topic: "ticks"}
	_, err = e.PutSchedule(ctx, s)
	require.NoError(t, err)
	clock.Advance(10*time.Minute + time.Second)
	store.mu.Lock()
	store.before = func() { // before the cursor's move
		changed := *s
		changed.Job.Priority = 7
		_, err := other.PutSchedule(ctx, &changed)
		require.NoError(t, err)
	}
	store.mu.Unlock()
	e.FireSchedules(ctx)
	require.Len(t, drainTopic(t, e, "ticks"), 1)
	got, err := e.GetSchedule(ctx, "tick")
	require.NoError(t, err)
	require.Equal(t, 7, got.Job.Priority, "the change is kept")
	require.Equal(t, clock.Now().Add(-time.Second).Truncate(time.Minute), got.Cursor, "the cursor moved")
}
