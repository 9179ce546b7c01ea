package connecttransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// nightly is a schedule whose slots are fixed whatever the clock: hourly
// from a start years ahead.
func nightly() *delayqv1.ScheduleConfig {
	return &delayqv1.ScheduleConfig{
		Cron: "@every 1h", TimeZone: "Europe/Paris", Topic: "reports",
		Job:   &delayqv1.ScheduleJob{Body: `{"report": 1}`, Key: "k", Ttr: "5m", MaxAttempts: 3, Priority: -2},
		Start: "2040-01-01T00:00:00Z", End: "2040-02-01T00:00:00Z", Missed: "all", Jitter: "30s",
	}
}

// httpSchedule reads a schedule through the HTTP API, to compare.
func (b *testBundle) httpSchedule(t *testing.T, name string) map[string]any {
	t.Helper()
	res, err := http.Get(b.srv.URL + "/v1/schedules/" + name)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var v map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&v))
	return v
}

// TestSchedules puts, reads, lists and deletes schedules, with their next
// runs, and checks that bad definitions are refused naming the field and
// store nothing.
func TestSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var put delayqv1.PutScheduleResponse
	b.must(t, "PutSchedule", &delayqv1.PutScheduleRequest{Name: "nightly", Schedule: nightly()}, &put)
	sc := put.Schedule
	require.Equal(t, "nightly", sc.Name)
	require.Equal(t, "@every 1h", sc.Cron)
	require.Equal(t, "Europe/Paris", sc.TimeZone)
	require.Equal(t, "reports", sc.Topic)
	require.Equal(t, `{"report": 1}`, sc.Job.Body, "byte for byte")
	require.Equal(t, "k", sc.Job.Key)
	require.Equal(t, "5m0s", sc.Job.Ttr)
	require.EqualValues(t, 3, sc.Job.MaxAttempts)
	require.EqualValues(t, -2, sc.Job.Priority)
	require.Equal(t, "30s", sc.Jitter)
	require.Equal(t, "2040-01-01T00:00:00.000Z", sc.Start)
	require.Equal(t, "2040-02-01T00:00:00.000Z", sc.End)
	require.Equal(t, "all", sc.Missed)
	require.EqualValues(t, core.MissedLimitDefault, sc.MissedLimit, "the default shown under all")
	require.Empty(t, sc.LastSlot, "nothing fired yet")
	require.NotEmpty(t, sc.CreatedAt)
	require.Equal(t, []string{"2040-01-01T00:00:00.000Z", "2040-01-01T01:00:00.000Z", "2040-01-01T02:00:00.000Z"}, sc.NextRuns)

	stored, err := b.engine.GetSchedule(context.Background(), "nightly")
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, stored.Job.TTR)
	require.Equal(t, time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC), stored.Start.UTC())

	// The same schedule as the HTTP API shows it.
	h := b.httpSchedule(t, "nightly")
	require.Equal(t, sc.CreatedAt, h["created_at"])
	require.Equal(t, sc.UpdatedAt, h["updated_at"])
	require.Equal(t, sc.Start, h["start"])
	require.Len(t, h["next_runs"], 3)
	for i, r := range h["next_runs"].([]any) {
		require.Equal(t, sc.NextRuns[i], r)
	}
	require.Equal(t, sc.Job.Ttr, h["job"].(map[string]any)["ttr"])
	require.Equal(t, sc.Jitter, h["jitter"])

	var got delayqv1.GetScheduleResponse
	b.must(t, "GetSchedule", &delayqv1.GetScheduleRequest{Name: "nightly", Next: proto.Int32(5)}, &got)
	require.Len(t, got.Schedule.NextRuns, 5)
	require.Equal(t, "2040-01-01T04:00:00.000Z", got.Schedule.NextRuns[4])
	b.must(t, "GetSchedule", &delayqv1.GetScheduleRequest{Name: "nightly", Next: proto.Int32(0)}, &got)
	require.Empty(t, got.Schedule.NextRuns, "an explicit 0 is none, not the default")
	got.Schedule.NextRuns = sc.NextRuns
	requireSameSchedule(t, sc, got.Schedule, "get shows what put answered")

	// Defaults: no job, no zone, no policy.
	b.must(t, "PutSchedule", &delayqv1.PutScheduleRequest{Name: "a.daily", Schedule: &delayqv1.ScheduleConfig{Cron: "30 2 * * *", Topic: "mail"}}, &put)
	require.Equal(t, "UTC", put.Schedule.TimeZone)
	require.Equal(t, "skip", put.Schedule.Missed)
	require.Zero(t, put.Schedule.MissedLimit)
	require.Equal(t, "null", put.Schedule.Job.Body)
	require.Empty(t, put.Schedule.Job.Ttr)
	require.Empty(t, put.Schedule.Start)
	require.Len(t, put.Schedule.NextRuns, 3)

	var list delayqv1.ListSchedulesResponse
	b.must(t, "ListSchedules", &delayqv1.ListSchedulesRequest{}, &list)
	require.Len(t, list.Schedules, 2)
	require.Equal(t, "a.daily", list.Schedules[0].Name, "by name")
	require.Equal(t, "nightly", list.Schedules[1].Name)
	require.Len(t, list.Schedules[1].NextRuns, 3)
	b.must(t, "ListSchedules", &delayqv1.ListSchedulesRequest{Next: proto.Int32(1)}, &list)
	require.Len(t, list.Schedules[1].NextRuns, 1)
	for _, next := range []int32{-1, core.UpcomingMax + 1} {
		err := b.call(t, "", "ListSchedules", &delayqv1.ListSchedulesRequest{Next: proto.Int32(next)}, &list)
		requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "next")
		err = b.call(t, "", "GetSchedule", &delayqv1.GetScheduleRequest{Name: "nightly", Next: proto.Int32(next)}, &got)
		requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "next")
	}

	// Bad definitions, new or replacing nightly, store nothing.
	bad := map[string]func(*delayqv1.ScheduleConfig){
		"cron":         func(c *delayqv1.ScheduleConfig) { c.Cron = "every day" },
		"time_zone":    func(c *delayqv1.ScheduleConfig) { c.TimeZone = "Mars/Olympus" },
		"topic":        func(c *delayqv1.ScheduleConfig) { c.Topic = "a..b" },
		"start":        func(c *delayqv1.ScheduleConfig) { c.Start = "yesterday" },
		"end":          func(c *delayqv1.ScheduleConfig) { c.End = "1999-01-01T00:00:00Z" },
		"missed":       func(c *delayqv1.ScheduleConfig) { c.Missed = "some" },
		"missed_limit": func(c *delayqv1.ScheduleConfig) { c.MissedLimit = core.MissedLimitMax + 1 },
		"job.ttr":      func(c *delayqv1.ScheduleConfig) { c.Job.Ttr = "soon" },
		"job.body":     func(c *delayqv1.ScheduleConfig) { c.Job.Body = `{"report":` },
		"job.priority": func(c *delayqv1.ScheduleConfig) { c.Job.Priority = 11 },
	}
	for field, mod := range bad {
		for _, name := range []string{"new", "nightly"} {
			c := nightly()
			mod(c)
			err := b.call(t, "", "PutSchedule", &delayqv1.PutScheduleRequest{Name: name, Schedule: c}, &put)
			requireStatus(t, err, codes.InvalidArgument, "invalid_argument", field)
		}
	}
	err = b.call(t, "", "PutSchedule", &delayqv1.PutScheduleRequest{Name: "new"}, &put)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "cron")
	err = b.call(t, "", "PutSchedule", &delayqv1.PutScheduleRequest{Name: "a/b", Schedule: nightly()}, &put)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "name")
	_, err = b.engine.GetSchedule(context.Background(), "new")
	require.ErrorIs(t, err, core.ErrNotFound, "a refused put stores nothing")
	now, err := b.engine.GetSchedule(context.Background(), "nightly")
	require.NoError(t, err)
	require.True(t, now.SameDefinition(stored), "a refused replacement changes nothing")
	require.Equal(t, stored.UpdatedAt, now.UpdatedAt)

	b.must(t, "DeleteSchedule", &delayqv1.DeleteScheduleRequest{Name: "nightly"}, &delayqv1.DeleteScheduleResponse{})
	err = b.call(t, "", "GetSchedule", &delayqv1.GetScheduleRequest{Name: "nightly"}, &got)
	requireStatus(t, err, codes.NotFound, "not_found", "")
	err = b.call(t, "", "DeleteSchedule", &delayqv1.DeleteScheduleRequest{Name: "nightly"}, &delayqv1.DeleteScheduleResponse{})
	requireStatus(t, err, codes.NotFound, "not_found", "")
	b.must(t, "ListSchedules", &delayqv1.ListSchedulesRequest{}, &list)
	require.Len(t, list.Schedules, 1)
}

// requireSameSchedule checks that two schedule messages are equal.
func requireSameSchedule(t *testing.T, want, got *delayqv1.Schedule, msg string) {
	t.Helper()
	require.True(t, proto.Equal(want, got), "%s:\nwant %v\ngot  %v", msg, want, got)
}

// TestSchedulesAccess: schedules need admin, and a token restricted to
// topics sees and changes only the schedules of its topics, as over HTTP.
func TestSchedulesAccess(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	put := func(token, name, topic string) error {
		return b.call(t, token, "PutSchedule", &delayqv1.PutScheduleRequest{Name: name,
			Schedule: &delayqv1.ScheduleConfig{Cron: "@hourly", Topic: topic}}, &delayqv1.PutScheduleResponse{})
	}
	require.NoError(t, put(adminToken, "billing", "billing"))
	for _, token := range []string{pushToken, consumeToken} {
		requireStatus(t, put(token, "x", "mail"), codes.PermissionDenied, "permission_denied", "")
		err := b.call(t, token, "ListSchedules", &delayqv1.ListSchedulesRequest{}, &delayqv1.ListSchedulesResponse{})
		requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
		err = b.call(t, token, "GetSchedule", &delayqv1.GetScheduleRequest{Name: "billing"}, &delayqv1.GetScheduleResponse{})
		requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
		err = b.call(t, token, "DeleteSchedule", &delayqv1.DeleteScheduleRequest{Name: "billing"}, &delayqv1.DeleteScheduleResponse{})
		requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	}
	err := b.call(t, "", "ListSchedules", &delayqv1.ListSchedulesRequest{}, &delayqv1.ListSchedulesResponse{})
	requireStatus(t, err, codes.Unauthenticated, "unauthenticated", "")

	require.NoError(t, put(mailOnlyToken, "mine", "mail"))
	// Replacing another topic's schedule is answered as reading it is:
	// NotFound naming only the schedule, never its topic.
	putErr := requireStatus(t, put(mailOnlyToken, "billing", "mail"), codes.NotFound, "not_found", "")
	getErr := requireStatus(t, b.call(t, mailOnlyToken, "GetSchedule", &delayqv1.GetScheduleRequest{Name: "billing"},
		&delayqv1.GetScheduleResponse{}), codes.NotFound, "not_found", "")
	require.Equal(t, getErr.Message, putErr.Message, "PutSchedule answers as GetSchedule")
	requireStatus(t, put(mailOnlyToken, "other", "billing"), codes.PermissionDenied, "permission_denied", "")
	_, err = b.engine.GetSchedule(context.Background(), "other")
	require.ErrorIs(t, err, core.ErrNotFound)
	billing, err := b.engine.GetSchedule(context.Background(), "billing")
	require.NoError(t, err)
	require.Equal(t, "billing", billing.Topic, "not taken over")

	var list delayqv1.ListSchedulesResponse
	require.NoError(t, b.call(t, mailOnlyToken, "ListSchedules", &delayqv1.ListSchedulesRequest{}, &list))
	require.Len(t, list.Schedules, 1)
	require.Equal(t, "mine", list.Schedules[0].Name)
	err = b.call(t, mailOnlyToken, "GetSchedule", &delayqv1.GetScheduleRequest{Name: "billing"}, &delayqv1.GetScheduleResponse{})
	requireStatus(t, err, codes.NotFound, "not_found", "")
	err = b.call(t, mailOnlyToken, "DeleteSchedule", &delayqv1.DeleteScheduleRequest{Name: "billing"}, &delayqv1.DeleteScheduleResponse{})
	requireStatus(t, err, codes.NotFound, "not_found", "")
	require.NoError(t, b.call(t, adminToken, "ListSchedules", &delayqv1.ListSchedulesRequest{}, &list))
	require.Len(t, list.Schedules, 2, "billing is still there")
	require.NoError(t, b.call(t, mailOnlyToken, "DeleteSchedule", &delayqv1.DeleteScheduleRequest{Name: "mine"}, &delayqv1.DeleteScheduleResponse{}))
}

// TestExportImportSchedules: an export carries every schedule before the
// jobs, in batches, with times and cursor; an import restores them as
// they were, skips a name in use, and fails a bad schedule alone at its
// position in the stream.
func TestExportImportSchedules(t *testing.T) {
	t.Parallel()
	from, to := setup(t), setup(t)
	ctx := context.Background()
	slot := time.Date(2025, 6, 1, 3, 0, 0, 0, time.UTC)
	_, err := from.engine.ImportSchedule(ctx, &core.Schedule{Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Paris",
		Topic: "reports", Job: core.ScheduleJob{Body: []byte(`{"a": 1}`), TTR: time.Minute}, Missed: core.MissedAll,
		Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), CreatedAt: slot.Add(-time.Hour), Cursor: slot})
	require.NoError(t, err)
	for i := range 300 { // with nightly, more than one batch
		_, err := from.engine.PutSchedule(ctx, &core.Schedule{Name: fmt.Sprintf("s%03d", i), Cron: "@daily", Topic: "mail"})
		require.NoError(t, err)
	}
	from.push(t, "reports", "1")

	schedules, jobs, err := from.exportAll(t, "")
	require.NoError(t, err)
	require.Len(t, schedules, 301)
	require.Len(t, jobs, 1)
	var want delayqv1.GetScheduleResponse
	from.must(t, "GetSchedule", &delayqv1.GetScheduleRequest{Name: "nightly", Next: proto.Int32(0)}, &want)
	require.Equal(t, "nightly", schedules[0].Name)
	requireSameSchedule(t, want.Schedule, schedules[0], "exported as GetSchedule shows it, without next_runs")
	require.Equal(t, "2025-06-01T03:00:00.000Z", schedules[0].LastSlot)

	badSchedule := &delayqv1.Schedule{Name: "bad", Cron: "nope", Topic: "mail"}
	res, err := to.importStream(t, "",
		&delayqv1.ImportRequest{Schedules: schedules[:2]},
		&delayqv1.ImportRequest{Schedules: append([]*delayqv1.Schedule{badSchedule}, schedules[2:]...), Jobs: jobs})
	require.NoError(t, err)
	require.EqualValues(t, 302, res.Imported)
	require.EqualValues(t, 1, res.Failed)
	require.EqualValues(t, 3, res.Errors[0].Index, "the position in the stream")
	require.Equal(t, "cron", res.Errors[0].Error.GetField())
	var got delayqv1.GetScheduleResponse
	to.must(t, "GetSchedule", &delayqv1.GetScheduleRequest{Name: "nightly", Next: proto.Int32(0)}, &got)
	requireSameSchedule(t, want.Schedule, got.Schedule, "as it was, cursor and times kept")
	_, err = to.engine.GetSchedule(ctx, "bad")
	require.ErrorIs(t, err, core.ErrNotFound)

	res, err = to.importStream(t, "", &delayqv1.ImportRequest{Schedules: schedules[:1]})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Skipped, "the name is in use")
}

// TestExportImportSchedulesAccess: a token restricted to topics exports and
// imports only the schedules of its topics.
func TestExportImportSchedulesAccess(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	ctx := context.Background()
	for _, topic := range []string{"mail", "secret"} {
		_, err := b.engine.PutSchedule(ctx, &core.Schedule{Name: topic, Cron: "@daily", Topic: topic})
		require.NoError(t, err)
	}
	all, _, err := b.exportAll(t, adminToken)
	require.NoError(t, err)
	require.Len(t, all, 2)
	mine, _, err := b.exportAll(t, mailOnlyToken)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, "mail", mine[0].Topic)

	require.NoError(t, b.engine.DeleteSchedule(ctx, "secret"))
	res, err := b.importStream(t, mailOnlyToken, &delayqv1.ImportRequest{Schedules: all})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Skipped, "mail exists")
	require.EqualValues(t, 1, res.Failed)
	require.Equal(t, "permission_denied", res.Errors[0].Error.GetCode())
	_, err = b.engine.GetSchedule(ctx, "secret")
	require.ErrorIs(t, err, core.ErrNotFound)
}

// TestScheduleLastRuns: GetSchedule's runs answers the last slots up to
// the cursor, newest first, as GET /v1/schedules/{name}?runs= does; runs
// out of range is InvalidArgument naming it.
func TestScheduleLastRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.engine.Clock().Now().Add(-time.Hour).UTC().Truncate(time.Hour)
	_, err := b.engine.ImportSchedule(t.Context(), &core.Schedule{Name: "tick", Cron: "*/10 * * * *", Topic: "ticks",
		CreatedAt: created, UpdatedAt: created, Cursor: created.Add(40 * time.Minute)})
	require.NoError(t, err)
	var got delayqv1.GetScheduleResponse
	b.must(t, "GetSchedule", &delayqv1.GetScheduleRequest{Name: "tick", Runs: 2}, &got)
	require.Len(t, got.Schedule.LastRuns, 2)
	for i, m := range []time.Duration{40, 30} {
		slot := created.Add(m * time.Minute)
		require.Equal(t, slot.Format("2006-01-02T15:04:05.000Z"), got.Schedule.LastRuns[i].Slot)
		require.Equal(t, core.ScheduleID("tick", slot), got.Schedule.LastRuns[i].JobId)
		require.Empty(t, got.Schedule.LastRuns[i].State, "no job made")
	}
	res, err := http.Get(b.srv.URL + "/v1/schedules/tick?runs=2")
	require.NoError(t, err)
	defer res.Body.Close()
	var h struct {
		LastRuns []struct {
			Slot  string `json:"slot"`
			JobID string `json:"job_id"`
		} `json:"last_runs"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&h))
	require.Len(t, h.LastRuns, 2)
	for i, r := range h.LastRuns {
		require.Equal(t, got.Schedule.LastRuns[i].Slot, r.Slot, "as the HTTP API")
		require.Equal(t, got.Schedule.LastRuns[i].JobId, r.JobID)
	}
	b.must(t, "GetSchedule", &delayqv1.GetScheduleRequest{Name: "tick"}, &got)
	require.Empty(t, got.Schedule.LastRuns, "none without runs")
	err = b.call(t, "", "GetSchedule", &delayqv1.GetScheduleRequest{Name: "tick", Runs: core.UpcomingMax + 1}, &got)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "runs")
}
