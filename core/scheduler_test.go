package core_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// drainTopic claims topic's ready jobs and acknowledges them.
func drainTopic(t *testing.T, e *core.Engine, topic string) []*core.Job {
	t.Helper()
	jobs, err := e.Claim(context.Background(), &core.ClaimJobsParams{Topic: topic, Max: 100})
	require.NoError(t, err)
	for _, j := range jobs {
		require.NoError(t, e.Ack(context.Background(), &core.AckJobParams{ID: j.ID, Lease: j.Lease}))
	}
	return jobs
}

func runAts(jobs []*core.Job) []time.Time {
	out := make([]time.Time, len(jobs))
	for i, j := range jobs {
		out[i] = j.RunAt
	}
	return out
}

func TestPutScheduleValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for field, s := range map[string]core.Schedule{
		"cron":     {Name: "s", Cron: "nope", Topic: "t"},
		"job.body": {Name: "s", Cron: "@hourly", Topic: "t", Job: core.ScheduleJob{Body: json.RawMessage(`{`)}},
		"job.ttr":  {Name: "s", Cron: "@hourly", Topic: "t", Job: core.ScheduleJob{TTR: time.Nanosecond}},
		"job.key":  {Name: "s", Cron: "@hourly", Topic: "t", Job: core.ScheduleJob{Key: string(make([]byte, 300))}},
	} {
		_, err := b.engine.PutSchedule(ctx, &s)
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe, field)
		require.Equal(t, field, fe.Field)
	}
	list, err := b.engine.ListSchedules(ctx)
	require.NoError(t, err)
	require.Empty(t, list, "nothing stored")
}

// TestScheduleFiresEachSlotOnce: slots fire as the clock reaches them, each
// once however many engines look; a put that changes nothing keeps the
// schedule as it was, a change applies from then, a pause stops it and a
// delete ends it.
func TestScheduleFiresEachSlotOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	other, err := core.NewEngine(core.EngineConfig{Store: b.store, Clock: b.clock})
	require.NoError(t, err)
	start := b.clock.Now() // 10:00
	s := &core.Schedule{Name: "tick", Cron: "*/10 * * * *", Topic: "ticks",
		Job: core.ScheduleJob{Body: json.RawMessage(`{"tick":true}`), Priority: 3, MaxAttempts: 2}}
	stored, err := b.engine.PutSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, start, stored.CreatedAt)
	require.Equal(t, []time.Time{start.Add(10 * time.Minute), start.Add(20 * time.Minute)}, stored.Upcoming(start, 2))

	// Nothing before the first slot; the loop would wake at it.
	require.Equal(t, 2*time.Second, b.engine.FireSchedules(ctx), "TopicRefresh bounds the wait")
	require.Empty(t, drainTopic(t, b.engine, "ticks"))
	b.clock.Advance(10*time.Minute - time.Second)
	require.Equal(t, time.Second, b.engine.FireSchedules(ctx))

	b.clock.Advance(time.Second + 5*time.Millisecond) // 10:10:00.005
	for i := range 3 {
		if i > 0 {
			b.clock.Advance(10 * time.Minute)
		}
		b.engine.FireSchedules(ctx)
		other.FireSchedules(ctx)
		b.engine.FireSchedules(ctx)
	}
	jobs := drainTopic(t, b.engine, "ticks")
	require.Equal(t, []time.Time{start.Add(10 * time.Minute), start.Add(20 * time.Minute), start.Add(30 * time.Minute)}, runAts(jobs))
	j := jobs[0]
	require.Equal(t, core.ScheduleID("tick", j.RunAt), j.ID)
	require.JSONEq(t, `{"tick":true}`, string(j.Body))
	require.Equal(t, 3, j.Priority)
	require.Equal(t, 2, j.MaxAttempts)
	got, err := b.engine.GetSchedule(ctx, "tick")
	require.NoError(t, err)
	require.Equal(t, start.Add(30*time.Minute), got.Cursor)

	// The same definition again: nothing changes. A new one applies from
	// now: 10:35, every 5 minutes -> 10:40 next, not 10:35.
	b.clock.Advance(4 * time.Minute) // 10:34:00.005
	again, err := b.engine.PutSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, stored.UpdatedAt, again.UpdatedAt)
	s.Cron = "*/5 * * * *"
	changed, err := b.engine.PutSchedule(ctx, s)
	require.NoError(t, err)
	require.Equal(t, b.clock.Now().Truncate(time.Millisecond), changed.UpdatedAt)
	require.Equal(t, start, changed.CreatedAt)
	b.clock.Advance(time.Minute)
	b.engine.FireSchedules(ctx)
	require.Equal(t, []time.Time{start.Add(35 * time.Minute)}, runAts(drainTopic(t, b.engine, "ticks")))

	// Paused: nothing fires, and on resume the slots it passed do not.
	s.Paused = true
	_, err = b.engine.PutSchedule(ctx, s)
	require.NoError(t, err)
	b.clock.Advance(10 * time.Minute)
	b.engine.FireSchedules(ctx)
	require.Empty(t, drainTopic(t, b.engine, "ticks"))
	s.Paused = false
	_, err = b.engine.PutSchedule(ctx, s)
	require.NoError(t, err)
	b.engine.FireSchedules(ctx)
	require.Empty(t, drainTopic(t, b.engine, "ticks"))

	require.NoError(t, b.engine.DeleteSchedule(ctx, "tick"))
	require.ErrorIs(t, b.engine.DeleteSchedule(ctx, "tick"), core.ErrNotFound)
	b.clock.Advance(time.Hour)
	b.engine.FireSchedules(ctx)
	require.Empty(t, drainTopic(t, b.engine, "ticks"))
}

// TestScheduleMissedSlots: after a downtime, each policy fires what it
// says, once, and the loop goes on from there.
func TestScheduleMissedSlots(t *testing.T) {
	t.Parallel()
	for policy, want := range map[string][]int{
		core.MissedSkip: {60},
		core.MissedLast: {50, 60},
		core.MissedAll:  {40, 50, 60},
	} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			ctx := context.Background()
			start := b.clock.Now()
			_, err := b.engine.PutSchedule(ctx, &core.Schedule{Name: "m", Cron: "*/10 * * * *", Topic: "m",
				Missed: policy, MissedLimit: 2})
			require.NoError(t, err)
			b.clock.Advance(10*time.Minute + time.Second)
			b.engine.FireSchedules(ctx)
			require.Len(t, drainTopic(t, b.engine, "m"), 1)
			// Down from 10:10 to 11:00:30: 10:20 to 10:50 missed.
			b.clock.Advance(50*time.Minute + 29*time.Second)
			b.engine.FireSchedules(ctx)
			b.engine.FireSchedules(ctx)
			var wantAt []time.Time
			for _, m := range want {
				wantAt = append(wantAt, start.Add(time.Duration(m)*time.Minute))
			}
			require.Equal(t, wantAt, runAts(drainTopic(t, b.engine, "m")))
			b.clock.Advance(10 * time.Minute)
			b.engine.FireSchedules(ctx)
			require.Equal(t, []time.Time{start.Add(70 * time.Minute)}, runAts(drainTopic(t, b.engine, "m")))
		})
	}
}

// TestScheduleLoop: a started engine fires on its own, woken by its clock.
func TestScheduleLoop(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = store.Close() })
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock, TopicRefresh: time.Hour})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(ctx) })
	start := clock.Now()
	_, err = e.PutSchedule(ctx, &core.Schedule{Name: "loop", Cron: "@every 90s", Topic: "loop"})
	require.NoError(t, err)
	// The put wakes the loop, which waits for the first slot.
	require.NoError(t, clock.BlockUntilContext(ctx, 2)) // the refresh ticker and the schedule timer
	clock.Advance(90 * time.Second)
	jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "loop", Max: 1, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, start.Add(90*time.Second), jobs[0].RunAt)
}

// TestScheduleDaylightSavingOnClock walks an engine's clock through a
// fall-back and a spring-forward in New York, firing as it goes: each
// wall-clock time fires once, and the slots of the gap once, at its end.
func TestScheduleDaylightSavingOnClock(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	for name, c := range map[string]struct {
		from, to time.Time
		want     []string
	}{
		"FallBack": {
			from: time.Date(2026, 11, 1, 0, 10, 0, 0, ny), // EDT
			to:   time.Date(2026, 11, 1, 3, 10, 0, 0, ny), // EST
			want: []string{"00:30 EDT", "01:00 EDT", "01:30 EDT", "02:00 EST", "02:30 EST", "03:00 EST"},
		},
		"SpringForward": {
			from: time.Date(2026, 3, 8, 1, 10, 0, 0, ny), // EST
			to:   time.Date(2026, 3, 8, 4, 10, 0, 0, ny), // EDT
			want: []string{"01:30 EST", "03:00 EDT", "03:30 EDT", "04:00 EDT"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := coretest.NewFakeClockAt(c.from)
			store := memstore.New(memstore.Config{Clock: clock})
			t.Cleanup(func() { _ = store.Close() })
			e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock})
			require.NoError(t, err)
			ctx := context.Background()
			_, err = e.PutSchedule(ctx, &core.Schedule{Name: "half-hour", Cron: "*/30 * * * *", TimeZone: "America/New_York", Topic: "t"})
			require.NoError(t, err)
			var got []string
			for clock.Now().Before(c.to) {
				clock.Advance(5 * time.Minute)
				e.FireSchedules(ctx)
				for _, j := range drainTopic(t, e, "t") {
					require.Equal(t, clock.Now().Truncate(30*time.Minute).UTC(), j.RunAt.UTC(), "fired on time")
					got = append(got, j.RunAt.In(ny).Format("15:04 MST"))
				}
			}
			require.Equal(t, c.want, got)
		})
	}
}

// TestScheduleJitter: with jitter, each slot's job runs at the slot plus
// an offset within the jitter, the same for every engine and every
// computation of the slot, and different slots get different offsets;
// the job keeps the slot's id, so each slot still fires once.
func TestScheduleJitter(t *testing.T) {
	t.Parallel()
	s := &core.Schedule{Name: "spread", Cron: "@every 1m", Topic: "spread", Jitter: 30 * time.Second}
	slot := time.Date(2026, 11, 21, 10, 1, 0, 0, time.UTC)
	offsets := map[time.Duration]bool{}
	for i := range 20 {
		at := slot.Add(time.Duration(i) * time.Minute)
		runAt := s.SlotRunAt(at)
		require.Equal(t, runAt, s.SlotRunAt(at), "decided once per slot")
		off := runAt.Sub(at)
		require.True(t, off >= 0 && off < s.Jitter, "offset %s outside [0, %s)", off, s.Jitter)
		require.Zero(t, off%time.Millisecond)
		offsets[off] = true
	}
	require.Greater(t, len(offsets), 10, "offsets spread: %v", offsets)
	other := *s
	other.Name = "spread.too"
	require.NotEqual(t, s.SlotRunAt(slot), other.SlotRunAt(slot), "each schedule its own offsets")
	other.Jitter = 0
	require.Equal(t, slot, other.SlotRunAt(slot), "no jitter: the slot")

	b := setup(t, nil)
	ctx := context.Background()
	another, err := core.NewEngine(core.EngineConfig{Store: b.store, Clock: b.clock})
	require.NoError(t, err)
	stored, err := b.engine.PutSchedule(ctx, s)
	require.NoError(t, err)
	first := stored.Upcoming(b.clock.Now(), 1)[0]
	b.clock.Advance(first.Sub(b.clock.Now()) + time.Millisecond)
	b.engine.FireSchedules(ctx)
	another.FireSchedules(ctx)
	job, err := b.engine.Get(ctx, core.ScheduleID("spread", first))
	require.NoError(t, err, "the slot's job has the slot's id")
	require.Equal(t, s.SlotRunAt(first), job.RunAt)
	b.clock.Advance(s.Jitter)
	require.Len(t, drainTopic(t, b.engine, "spread"), 1, "fired once")
}
