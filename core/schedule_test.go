package core_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// slots returns the schedule's slots in (from, to].
func slots(s *core.Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	for t := s.Next(from); !t.IsZero() && !t.After(to); t = s.Next(t) {
		out = append(out, t)
	}
	return out
}

func TestScheduleValidate(t *testing.T) {
	ok := core.Schedule{Name: "nightly", Cron: "0 3 * * *", Topic: "reports", TimeZone: "Europe/Paris"}
	require.NoError(t, ok.Validate())
	for _, c := range []struct {
		field string
		s     func(s *core.Schedule)
	}{
		{"name", func(s *core.Schedule) { s.Name = "" }},
		{"name", func(s *core.Schedule) { s.Name = "a b" }},
		{"cron", func(s *core.Schedule) { s.Cron = "" }},
		{"cron", func(s *core.Schedule) { s.Cron = "61 * * * *" }},
		{"cron", func(s *core.Schedule) { s.Cron = "* * *" }},
		{"cron", func(s *core.Schedule) { s.Cron = "TZ=UTC 0 3 * * *" }},
		{"cron", func(s *core.Schedule) { s.Cron = "@every 10ms" }},
		{"cron", func(s *core.Schedule) { s.Cron = "@every soon" }},
		{"time_zone", func(s *core.Schedule) { s.TimeZone = "Mars/Olympus" }},
		{"time_zone", func(s *core.Schedule) { s.TimeZone = "Local" }},
		{"topic", func(s *core.Schedule) { s.Topic = "" }},
		{"missed", func(s *core.Schedule) { s.Missed = "some" }},
		{"missed_limit", func(s *core.Schedule) { s.MissedLimit = core.MissedLimitMax + 1 }},
		{"jitter", func(s *core.Schedule) { s.Jitter = -time.Second }},
		{"jitter", func(s *core.Schedule) { s.Jitter = core.JitterMax + time.Millisecond }},
		{"end", func(s *core.Schedule) {
			s.Start = time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
			s.End = s.Start
		}},
	} {
		s := ok
		c.s(&s)
		err := s.Validate()
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe, "%+v", s)
		require.Equal(t, c.field, fe.Field, "%+v: %v", s, err)
	}
	for _, expr := range []string{"*/5 * * * *", "30 */5 * * * *", "@hourly", "@daily", "@every 90s", "0 9 * * MON-FRI"} {
		s := ok
		s.Cron = expr
		require.NoError(t, s.Validate(), expr)
	}
}

func TestScheduleNextCronAndZone(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	s := &core.Schedule{Name: "n", Cron: "0 3 * * *", TimeZone: "Europe/Paris", Topic: "t"}
	from := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	got := slots(s, from, from.Add(48*time.Hour))
	require.Equal(t, []time.Time{
		time.Date(2026, 6, 2, 3, 0, 0, 0, paris).UTC(),
		time.Date(2026, 6, 3, 3, 0, 0, 0, paris).UTC(),
	}, utc(got))
	// Six fields: seconds first.
	s.Cron, s.TimeZone = "15 * * * * *", ""
	require.Equal(t, time.Date(2026, 6, 1, 12, 0, 15, 0, time.UTC), s.Next(from))
	// Start and End bound the slots.
	s.Start = time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC)
	s.End = time.Date(2026, 6, 1, 13, 2, 0, 0, time.UTC)
	require.Equal(t, []time.Time{
		time.Date(2026, 6, 1, 13, 0, 15, 0, time.UTC),
		time.Date(2026, 6, 1, 13, 1, 15, 0, time.UTC),
	}, slots(s, from, from.Add(time.Hour*2)))
}

func TestScheduleNextEvery(t *testing.T) {
	created := time.Date(2026, 6, 1, 12, 0, 0, 300_000_000, time.UTC)
	s := &core.Schedule{Name: "n", Cron: "@every 90s", Topic: "t", CreatedAt: created}
	// Counted from CreatedAt, in real time, whatever the zone.
	got := slots(s, created, created.Add(4*time.Minute))
	require.Equal(t, []time.Time{created.Add(90 * time.Second), created.Add(180 * time.Second)}, got)
	s.TimeZone = "America/New_York"
	require.Equal(t, got, slots(s, created, created.Add(4*time.Minute)))
	// From Start, which is itself a slot.
	s.Start = created.Add(time.Hour)
	require.Equal(t, s.Start, s.Next(created))
	require.Equal(t, s.Start.Add(90*time.Second), s.Next(s.Start))
}

// TestScheduleDaylightSaving: a wall-clock time that occurs twice fires
// once, at its first occurrence; one that does not occur fires once, when
// the gap ends.
func TestScheduleDaylightSaving(t *testing.T) {
	at := func(y int, m time.Month, d, h, mi int, zone string) time.Time {
		// zone pins the offset of an ambiguous wall time.
		off := map[string]int{"EST": -5 * 3600, "EDT": -4 * 3600}[zone]
		return time.Date(y, m, d, h, mi, 0, 0, time.FixedZone(zone, off)).UTC()
	}
	every30 := &core.Schedule{Name: "n", Cron: "*/30 * * * *", TimeZone: "America/New_York", Topic: "t"}

	// Fall back, 2026-11-01 02:00 EDT -> 01:00 EST: 01:00 and 01:30 occur
	// twice and fire once each, at their first occurrence.
	from := at(2026, 11, 1, 0, 15, "EDT")
	require.Equal(t, []time.Time{
		at(2026, 11, 1, 0, 30, "EDT"),
		at(2026, 11, 1, 1, 0, "EDT"),
		at(2026, 11, 1, 1, 30, "EDT"),
		at(2026, 11, 1, 2, 0, "EST"),
		at(2026, 11, 1, 2, 30, "EST"),
	}, slots(every30, from, at(2026, 11, 1, 2, 30, "EST")))
	// A daily 01:30 fires once that day, and a schedule made during the
	// second 01:00-02:00 does not fire the 01:30 that already passed.
	daily := &core.Schedule{Name: "n", Cron: "30 1 * * *", TimeZone: "America/New_York", Topic: "t"}
	require.Equal(t, []time.Time{at(2026, 11, 1, 1, 30, "EDT"), at(2026, 11, 2, 1, 30, "EST")},
		slots(daily, at(2026, 10, 31, 12, 0, "EDT"), at(2026, 11, 2, 12, 0, "EST")))
	require.Equal(t, at(2026, 11, 2, 1, 30, "EST"), daily.Next(at(2026, 11, 1, 1, 10, "EST")))

	// Spring forward, 2026-03-08 02:00 EST -> 03:00 EDT: 02:00 and 02:30 do
	// not occur; the slots in the gap fire once, at 03:00 EDT, with 03:00's.
	from = at(2026, 3, 8, 1, 15, "EST")
	require.Equal(t, []time.Time{
		at(2026, 3, 8, 1, 30, "EST"),
		at(2026, 3, 8, 3, 0, "EDT"),
		at(2026, 3, 8, 3, 30, "EDT"),
	}, slots(every30, from, at(2026, 3, 8, 3, 30, "EDT")))
	daily.Cron = "30 2 * * *"
	require.Equal(t, []time.Time{at(2026, 3, 7, 2, 30, "EST"), at(2026, 3, 8, 3, 0, "EDT"), at(2026, 3, 9, 2, 30, "EDT")},
		slots(daily, at(2026, 3, 7, 0, 0, "EST"), at(2026, 3, 9, 12, 0, "EDT")))
}

func utc(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

// TestScheduleDue: on-time slots fire; missed ones by the policy.
func TestScheduleDue(t *testing.T) {
	base := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	mk := func(missed string, limit int) *core.Schedule {
		return &core.Schedule{Name: "n", Cron: "*/10 * * * *", Topic: "t", Missed: missed, MissedLimit: limit,
			CreatedAt: base, UpdatedAt: base, Cursor: base.Add(10 * time.Minute)}
	}
	m := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }

	// Nothing due yet.
	fire, missed, pass := mk("", 0).Due(m(15))
	require.Empty(t, fire)
	require.Zero(t, missed)
	require.True(t, pass.IsZero())
	// On time, a little late.
	fire, missed, pass = mk("", 0).Due(m(20).Add(30 * time.Second))
	require.Equal(t, []time.Time{m(20)}, fire)
	require.Zero(t, missed)
	require.Equal(t, m(20), pass)

	// Down from 12:15 to 13:00:20: 20..50 missed, 13:00 on time.
	now := m(60).Add(20 * time.Second)
	fire, missed, pass = mk(core.MissedSkip, 0).Due(now)
	require.Equal(t, []time.Time{m(60)}, fire)
	require.Equal(t, 4, missed)
	require.Equal(t, m(60), pass)
	fire, missed, _ = mk(core.MissedLast, 0).Due(now)
	require.Equal(t, []time.Time{m(50), m(60)}, fire)
	require.Equal(t, 3, missed)
	fire, missed, _ = mk(core.MissedAll, 2).Due(now)
	require.Equal(t, []time.Time{m(40), m(50), m(60)}, fire)
	require.Equal(t, 2, missed)
	fire, missed, _ = mk(core.MissedAll, 0).Due(now)
	require.Equal(t, []time.Time{m(20), m(30), m(40), m(50), m(60)}, fire)
	require.Zero(t, missed)

	// Down until 13:05: every slot missed; skip passes over them all.
	fire, missed, pass = mk(core.MissedSkip, 0).Due(m(65))
	require.Empty(t, fire)
	require.Equal(t, 5, missed)
	require.Equal(t, m(60), pass)

	// A change at 12:45 applies from then; a paused schedule fires nothing.
	s := mk(core.MissedAll, 0)
	s.UpdatedAt = m(45)
	fire, _, _ = s.Due(now)
	require.Equal(t, []time.Time{m(50), m(60)}, fire)
	s.Paused = true
	fire, _, _ = s.Due(now)
	require.Empty(t, fire)

	// Far behind (a per-second schedule down for two days): the latest
	// slots fire, found without walking every one.
	sec := &core.Schedule{Name: "n", Cron: "* * * * * *", Topic: "t", Missed: core.MissedLast, CreatedAt: base, UpdatedAt: base}
	now = base.Add(48 * time.Hour).Add(500 * time.Millisecond)
	fire, missed, pass = sec.Due(now)
	require.Len(t, fire, 61) // the last missed one and a minute on time
	require.Equal(t, now.Truncate(time.Second), pass)
	require.Equal(t, now.Truncate(time.Second).Add(-time.Minute), fire[0])
	require.GreaterOrEqual(t, missed, 100_000-61)
}

func TestScheduleID(t *testing.T) {
	slot := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	id := core.ScheduleID("nightly", slot)
	require.True(t, core.IsScheduleID(id))
	require.NoError(t, core.ValidateID(id))
	require.Equal(t, id, core.ScheduleID("nightly", slot.In(mustZone(t, "Asia/Tokyo"))))
	require.NotEqual(t, id, core.ScheduleID("nightly", slot.Add(time.Millisecond)))
	require.NotEqual(t, id, core.ScheduleID("nightly2", slot))
	require.False(t, core.IsScheduleID(core.KeyID("t", "k")))
}

func TestScheduleSameDefinition(t *testing.T) {
	a := &core.Schedule{Name: "n", Cron: "@hourly", Topic: "t", CreatedAt: time.Now(), Cursor: time.Now()}
	b := &core.Schedule{Name: "n", Cron: "@hourly", Topic: "t"}
	require.True(t, a.SameDefinition(b))
	b.Paused = true
	require.False(t, a.SameDefinition(b))
}
