package core_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/core/storetest"
)

// fireRecorder records, for each slot fired with a job, whether the
// engine told the store's decorators (core.SlotObserver) it was blocked
// and it created nothing: what the telemetry decorator counts as
// delayq_schedule_slots_blocked_total.
type fireRecorder struct {
	core.Store
	mu      sync.Mutex
	blocked []bool
}

func (r *fireRecorder) ObserveSlot(_ context.Context, p *core.FireScheduleParams, created bool) {
	if p.Job != nil {
		r.mu.Lock()
		r.blocked = append(r.blocked, p.Blocked && !created)
		r.mu.Unlock()
	}
}

func (r *fireRecorder) takeBlocked() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.blocked
	r.blocked = nil
	return out
}

// TestScheduleSlotBlocked: a slot whose job id a job not made for it holds
// (one that took the slot's id) creates nothing, and the engine says so: a
// warning with schedule, slot and id, and Blocked for the decorators'
// count. A job the slot itself made (another instance fired it meanwhile)
// and a keyed schedule's unfinished job of an earlier slot are not blocks.
func TestScheduleSlotBlocked(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = mem.Close() })
	rec := &fireRecorder{Store: mem}
	var logs bytes.Buffer // FireSchedules runs in the test's goroutine
	e, err := core.NewEngine(core.EngineConfig{Store: rec, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	ctx := context.Background()
	start := clock.Now()
	_, err = e.PutSchedule(ctx, &core.Schedule{Name: "nightly", Cron: "*/10 * * * *", Topic: "reports"})
	require.NoError(t, err)

	// A job of another topic took the first slot's id (a client did, before
	// such ids were refused).
	slot := start.Add(10 * time.Minute)
	held := storetest.NewJob("other", start.Add(time.Hour))
	held.ID, held.CreatedAt = core.ScheduleID("nightly", slot), start
	_, err = mem.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{held}})
	require.NoError(t, err)
	clock.Advance(10*time.Minute + time.Second)
	e.FireSchedules(ctx)
	require.Empty(t, drainTopic(t, e, "reports"), "the slot fired nothing")
	require.Equal(t, []bool{true}, rec.takeBlocked())
	line := logs.String()
	require.Contains(t, line, "level=WARN")
	require.Contains(t, line, "schedule=nightly")
	require.Contains(t, line, "slot=2026-11-21T10:10:00")
	require.Contains(t, line, "id="+held.ID)
	logs.Reset()

	// The next slot fires as usual, and is no block.
	clock.Advance(10 * time.Minute)
	e.FireSchedules(ctx)
	require.Len(t, drainTopic(t, e, "reports"), 1)
	require.Equal(t, []bool{false}, rec.takeBlocked())

	// The slot's own job, made by another instance after the slot came
	// but before this one fired, is no block either.
	clock.Advance(10 * time.Minute)
	own := storetest.NewJob("reports", clock.Now())
	own.ID, own.CreatedAt = core.ScheduleID("nightly", start.Add(30*time.Minute)), clock.Now()
	_, err = mem.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{own}})
	require.NoError(t, err)
	e.FireSchedules(ctx)
	require.Equal(t, []bool{false}, rec.takeBlocked())
	require.Empty(t, logs.String())

	// A keyed schedule's slot while the key's job of an earlier slot is
	// unfinished creates nothing, as docs/api.md promises (runs do not
	// overlap): that is no block, and no warning.
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "keyed", UniqueKeys: core.UniqueKeysReject}))
	_, err = e.PutSchedule(ctx, &core.Schedule{Name: "daily", Cron: "*/10 * * * *", Topic: "keyed", Job: core.ScheduleJob{Key: "d"}})
	require.NoError(t, err)
	_ = rec.takeBlocked()
	clock.Advance(10 * time.Minute)
	e.FireSchedules(ctx)
	require.Equal(t, []bool{false, false}, rec.takeBlocked(), "nightly and daily fire")
	clock.Advance(10 * time.Minute)
	e.FireSchedules(ctx)
	require.Equal(t, []bool{false, false}, rec.takeBlocked())
	require.Empty(t, logs.String())
}

// TestKeyedScheduleFiresAfterTheRunFinished: a keyed schedule's slot
// creates nothing while the key's job of an earlier slot is unfinished,
// and creates the key's job again once that run finished (done, and kept
// for the retention period), as docs/api.md promises: only an unfinished
// run blocks the next.
func TestKeyedScheduleFiresAfterTheRunFinished(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = mem.Close() })
	e, err := core.NewEngine(core.EngineConfig{Store: mem, Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "keyed", UniqueKeys: core.UniqueKeysReject}))
	_, err = e.PutSchedule(ctx, &core.Schedule{Name: "report", Cron: "*/10 * * * *", Topic: "keyed", Job: core.ScheduleJob{Key: "r"}})
	require.NoError(t, err)
	id := core.KeyID("keyed", "r")

	clock.Advance(10 * time.Minute)
	e.FireSchedules(ctx)
	first, err := e.Get(ctx, id)
	require.NoError(t, err)

	clock.Advance(10 * time.Minute)
	e.FireSchedules(ctx)
	again, err := e.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, first.RunAt, again.RunAt, "the run is unfinished: the slot creates nothing")

	claimed, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "keyed", Max: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.NoError(t, e.Ack(ctx, &core.AckJobParams{ID: id, Lease: claimed[0].Lease}))
	clock.Advance(10 * time.Minute)
	e.FireSchedules(ctx)
	next, err := e.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, core.StateReady, next.State, "the run finished: the next slot makes the key's job again")
	require.Equal(t, clock.Now().Truncate(10*time.Minute), next.RunAt)
}
