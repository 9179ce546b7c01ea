package storetest

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// NewSchedule returns a schedule of topic as the engine stores it: every
// 5 minutes in Europe/Paris, started an hour ago, never fired.
func NewSchedule(name, topic string) *core.Schedule {
	now := core.StoreTime(time.Now())
	return &core.Schedule{
		Name:     name,
		Cron:     "*/5 * * * *",
		TimeZone: "Europe/Paris",
		Topic:    topic,
		Job: core.ScheduleJob{
			Body: json.RawMessage(`{"report":"daily"}`), Key: "k", TTR: 45 * time.Second,
			MaxAttempts: 3, Priority: -2,
		},
		Start:       now.Add(-time.Hour),
		End:         now.Add(24 * time.Hour),
		Missed:      core.MissedAll,
		MissedLimit: 5,
		CreatedAt:   now,
		UpdatedAt:   now,
	}
}

// slotJob returns the job a schedule's slot creates, due at the slot.
func slotJob(name, topic string, slot time.Time) *core.Job {
	j := NewJob(topic, slot)
	j.ID = core.ScheduleID(name, slot)
	return j
}

// fire fires a slot, requiring no error.
func (b *testBundle) fire(t *testing.T, name string, slot time.Time, job *core.Job) bool {
	t.Helper()
	ok, err := b.store.FireSchedule(b.ctx, &core.FireScheduleParams{Name: name, Slot: slot, Job: job})
	require.NoError(t, err, "fire %s at %s", name, slot)
	return ok
}

// requireCursor requires the schedule's cursor to be at.
func (b *testBundle) requireCursor(t *testing.T, name string, at time.Time) {
	t.Helper()
	got, err := b.store.GetSchedule(b.ctx, name)
	require.NoError(t, err)
	require.True(t, at.Equal(got.Cursor), "cursor of %s: want %s, got %s", name, at, got.Cursor)
}

// testSchedules: PutSchedule, GetSchedule, ListSchedules and DeleteSchedule
// keep schedules as given, and a put keeps the cursor.
func testSchedules(t *testing.T, b *testBundle) {
	list, err := b.store.ListSchedules(b.ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = b.store.GetSchedule(b.ctx, "nightly")
	require.ErrorIs(t, err, core.ErrNotFound)

	nightly := NewSchedule("nightly", "reports")
	hourly := NewSchedule("hourly.cleanup", "jobs.cleanup")
	hourly.Cron, hourly.TimeZone, hourly.Paused = "@every 1h", "", true
	hourly.Start, hourly.End, hourly.Job = time.Time{}, time.Time{}, core.ScheduleJob{}
	nightly.Cursor = time.Now() // ignored: a new schedule has no cursor
	for _, s := range []*core.Schedule{nightly, hourly} {
		require.NoError(t, b.store.PutSchedule(b.ctx, s))
	}
	got, err := b.store.GetSchedule(b.ctx, "nightly")
	require.NoError(t, err)
	want := nightly.Clone()
	want.Cursor = time.Time{}
	requireSameSchedule(t, want, got)
	list, err = b.store.ListSchedules(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "hourly.cleanup", list[0].Name, "sorted by name")
	requireSameSchedule(t, hourly, list[0])
	requireSameSchedule(t, want, list[1])

	// The cursor outlives a put of a new definition.
	slot := core.StoreTime(time.Now().Add(-time.Minute))
	require.False(t, b.fire(t, "nightly", slot, nil))
	changed := nightly.Clone()
	changed.Cron, changed.Cursor = "0 3 * * *", time.Time{}
	require.NoError(t, b.store.PutSchedule(b.ctx, changed))
	got, err = b.store.GetSchedule(b.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, "0 3 * * *", got.Cron)
	require.True(t, slot.Equal(got.Cursor), "cursor kept: %s", got.Cursor)

	// Delete drops the schedule and its cursor.
	require.NoError(t, b.store.DeleteSchedule(b.ctx, "nightly"))
	require.ErrorIs(t, b.store.DeleteSchedule(b.ctx, "nightly"), core.ErrNotFound)
	_, err = b.store.GetSchedule(b.ctx, "nightly")
	require.ErrorIs(t, err, core.ErrNotFound)
	_, err = b.store.FireSchedule(b.ctx, &core.FireScheduleParams{Name: "nightly", Slot: slot.Add(time.Second), Job: slotJob("nightly", "reports", slot)})
	require.ErrorIs(t, err, core.ErrNotFound)
	require.NoError(t, b.store.PutSchedule(b.ctx, nightly))
	b.requireCursor(t, "nightly", time.Time{})
	list, err = b.store.ListSchedules(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
}

func requireSameSchedule(t *testing.T, want, got *core.Schedule) {
	t.Helper()
	require.True(t, want.SameDefinition(got), "want %+v\n got %+v", want, got)
	require.True(t, want.CreatedAt.Equal(got.CreatedAt) && want.UpdatedAt.Equal(got.UpdatedAt),
		"times: want %s %s, got %s %s", want.CreatedAt, want.UpdatedAt, got.CreatedAt, got.UpdatedAt)
	require.True(t, want.Cursor.Equal(got.Cursor), "cursor: want %s, got %s", want.Cursor, got.Cursor)
}

// testFireSchedule: a slot fires once; an older slot, or one whose job id
// names a job the store has in any state (finished too), creates nothing;
// a slot without a job moves the cursor alone.
func testFireSchedule(t *testing.T, b *testBundle) {
	const name, topic = "every5", "sched.fire"
	require.NoError(t, b.store.PutSchedule(b.ctx, NewSchedule(name, topic)))
	base := core.StoreTime(time.Now().Add(-time.Hour))
	slot := func(i int) time.Time { return base.Add(time.Duration(i) * 5 * time.Minute) }

	first := slotJob(name, topic, slot(1))
	require.True(t, b.fire(t, name, slot(1), first))
	got := b.get(t, first.ID)
	require.Equal(t, core.StateReady, got.State)
	require.True(t, slot(1).Equal(got.RunAt))
	b.requireCursor(t, name, slot(1))

	// The same slot, or an older one, again: nothing.
	require.False(t, b.fire(t, name, slot(1), slotJob(name, topic, slot(1))))
	older := slotJob(name, topic, slot(0))
	require.False(t, b.fire(t, name, slot(0), older))
	_, err := b.store.GetJob(b.ctx, older.ID)
	require.ErrorIs(t, err, core.ErrNotFound)
	b.requireCursor(t, name, slot(1))

	// Passing over slots moves the cursor alone.
	require.False(t, b.fire(t, name, slot(3), nil))
	b.requireCursor(t, name, slot(3))
	require.False(t, b.fire(t, name, slot(2), slotJob(name, topic, slot(2))))

	// A job with the slot's id, finished: kept as it is, not overwritten.
	claimed := claimUntil(t, b.ctx, b.store, topic, 1, 1, dueWait)
	require.Equal(t, first.ID, claimed[0].ID)
	require.NoError(t, ack(b, claimed[0]))
	again := slotJob(name, topic, slot(4))
	again.ID = first.ID
	require.False(t, b.fire(t, name, slot(4), again))
	require.Equal(t, core.StateDone, b.get(t, first.ID).State)
	b.requireCursor(t, name, slot(4))

	// A later slot fires.
	fifth := slotJob(name, topic, slot(5))
	require.True(t, b.fire(t, name, slot(5), fifth))
	require.Equal(t, core.StateReady, b.get(t, fifth.ID).State)

	_, err = b.store.FireSchedule(b.ctx, &core.FireScheduleParams{Name: name})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
}

// testFireScheduleRace: instances firing the same slots at once, each
// behind the others at times, create each slot's job once.
func testFireScheduleRace(t *testing.T, b *testBundle) {
	const name, topic, slots = "race", "sched.race", 20
	require.NoError(t, b.store.PutSchedule(b.ctx, NewSchedule(name, topic)))
	stores := []core.Store{b.store, b.open(t)}
	base := core.StoreTime(time.Now().Add(-time.Hour))
	var created [slots]atomic.Int32
	var failures errs
	var wg sync.WaitGroup
	for w := range 4 {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for i := range slots {
				at := base.Add(time.Duration(i) * time.Second)
				ok, err := s.FireSchedule(b.ctx, &core.FireScheduleParams{Name: name, Slot: at, Job: slotJob(name, topic, at)})
				if err != nil {
					failures.add(err)
					return
				}
				if ok {
					created[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, failures.err())
	for i := range slots {
		require.LessOrEqual(t, created[i].Load(), int32(1), "slot %d created twice", i)
		at := base.Add(time.Duration(i) * time.Second)
		_, err := b.store.GetJob(b.ctx, core.ScheduleID(name, at))
		if created[i].Load() == 1 {
			require.NoError(t, err, "slot %d reported created", i)
		} else {
			require.ErrorIs(t, err, core.ErrNotFound, "slot %d not reported created", i)
		}
	}
	// Every instance tries the first and the last slot; the cursor can be
	// past neither before one of them fires it.
	require.Equal(t, int32(1), created[0].Load(), "the first slot is created")
	require.Equal(t, int32(1), created[slots-1].Load(), "the last slot is created")
	b.requireCursor(t, name, base.Add((slots-1)*time.Second))
}
