package httptransport_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
)

// TestSchedules: PUT, GET, list and DELETE of /v1/schedules, with their
// next runs, and bad input refused.
func TestSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now().UTC()
	res := b.do(t, http.MethodPut, "/v1/schedules/nightly.report?next=2", `{
		"cron": "30 2 * * *", "time_zone": "America/New_York", "topic": "reports",
		"job": {"body": {"kind": "nightly"}, "key": "nightly", "ttr": "2m", "max_attempts": 3, "priority": -1},
		"missed": "last"}`)
	requireStatus(t, res, http.StatusOK)
	got := res.object(t)
	require.Equal(t, "nightly.report", got["name"])
	require.Equal(t, "America/New_York", got["time_zone"])
	require.Equal(t, "last", got["missed"])
	require.Nil(t, got["last_slot"])
	require.Equal(t, map[string]any{"body": map[string]any{"kind": "nightly"}, "key": "nightly", "ttr": "2m0s",
		"max_attempts": float64(3), "priority": float64(-1)}, got["job"])
	runs := got["next_runs"].([]any)
	require.Len(t, runs, 2)
	first, err := time.Parse(time.RFC3339Nano, runs[0].(string))
	require.NoError(t, err)
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	require.Equal(t, 2, first.In(ny).Hour())
	require.Equal(t, 30, first.In(ny).Minute())
	require.True(t, first.After(now) && first.Before(now.Add(25*time.Hour)), "%s", first)

	res = b.do(t, http.MethodPut, "/v1/schedules/every.minute", `{"cron": "@every 1m", "topic": "ticks", "paused": true}`)
	requireStatus(t, res, http.StatusOK)
	require.Empty(t, res.object(t)["next_runs"], "paused")
	res = b.do(t, http.MethodGet, "/v1/schedules?next=1", nil)
	requireStatus(t, res, http.StatusOK)
	list := res.object(t)["schedules"].([]any)
	require.Len(t, list, 2)
	require.Equal(t, "every.minute", list[0].(map[string]any)["name"])
	require.Len(t, list[1].(map[string]any)["next_runs"], 1)

	// Bad input: 400 naming the field, and nothing stored.
	for body, field := range map[string]string{
		`{"cron": "61 * * * *", "topic": "t"}`:                              "cron",
		`{"cron": "@hourly", "topic": "t", "time_zone": "Nope"}`:            "time_zone",
		`{"cron": "@hourly", "topic": "t", "missed": "some"}`:               "missed",
		`{"cron": "@hourly", "topic": "t", "job": {"ttr": "x"}}`:            "job.ttr",
		`{"cron": "@hourly", "topic": "t", "job": {"body": 1, "extra": 1}}`: "job.extra",
		`{"cron": "@hourly", "topic": "t", "start": "yesterday"}`:           "start",
		`{"cron": "@hourly", "topic": "t", "name": "other"}`:                "name",
		`{"cron": "@hourly", "topic": "a..b"}`:                              "topic",
	} {
		res = b.do(t, http.MethodPut, "/v1/schedules/bad", body)
		requireError(t, res, http.StatusBadRequest, "invalid_argument", field)
	}
	requireError(t, b.do(t, http.MethodGet, "/v1/schedules/bad", nil), http.StatusNotFound, "not_found", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/schedules?next=101", nil), http.StatusBadRequest, "invalid_argument", "next")

	require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/schedules/every.minute", nil).status)
	requireError(t, b.do(t, http.MethodDelete, "/v1/schedules/every.minute", nil), http.StatusNotFound, "not_found", "")
	res = b.do(t, http.MethodGet, "/v1/schedules/nightly.report", nil)
	requireStatus(t, res, http.StatusOK)
	require.Len(t, res.object(t)["next_runs"], 3, "the default")
}

// TestSchedulesAccess: schedules need the admin scope, and a token
// restricted to some topics sees and changes only theirs.
func TestSchedulesAccess(t *testing.T) {
	t.Parallel()
	tokens, err := auth.NewTokens([]auth.Token{
		{Name: "ops", Token: adminSecret, Scopes: []auth.Scope{auth.ScopeAdmin}},
		{Name: "producer", Token: pushSecret, Scopes: []auth.Scope{auth.ScopePush}},
		{Name: "orders-admin", Token: ordersSecret, Scopes: []auth.Scope{auth.ScopeAdmin}, Topics: []string{"orders.>"}},
	})
	require.NoError(t, err)
	b := setup(t, func(c *setupConfig) { c.tokens = tokens })
	put := func(secret, name, topic string) *response {
		return b.do(t, http.MethodPut, "/v1/schedules/"+name, `{"cron": "@hourly", "topic": "`+topic+`"}`, bearer(secret)...)
	}
	requireStatus(t, put(adminSecret, "billing", "billing.run"), http.StatusOK)
	requireError(t, put(pushSecret, "x", "orders.x"), http.StatusForbidden, "permission_denied", "")
	requireStatus(t, put(ordersSecret, "orders.close", "orders.close"), http.StatusOK)
	// Replacing another topic's schedule is answered as reading it is:
	// 404 naming only the schedule, never its topic.
	res := put(ordersSecret, "billing", "orders.x")
	e := requireError(t, res, http.StatusNotFound, "not_found", "")["error"].(map[string]any)
	require.Equal(t, `schedule "billing" not found`, e["message"])
	require.NotContains(t, string(res.body), "billing.run")
	got := b.do(t, http.MethodGet, "/v1/schedules/billing", nil, bearer(ordersSecret)...)
	require.Equal(t, e, requireError(t, got, http.StatusNotFound, "not_found", "")["error"], "PUT answers as GET")
	requireError(t, put(ordersSecret, "mine", "billing.run"), http.StatusForbidden, "permission_denied", "")

	res = b.do(t, http.MethodGet, "/v1/schedules", nil, bearer(ordersSecret)...)
	requireStatus(t, res, http.StatusOK)
	list := res.object(t)["schedules"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, "orders.close", list[0].(map[string]any)["name"])
	requireError(t, b.do(t, http.MethodGet, "/v1/schedules/billing", nil, bearer(ordersSecret)...), http.StatusNotFound, "not_found", "")
	requireError(t, b.do(t, http.MethodDelete, "/v1/schedules/billing", nil, bearer(ordersSecret)...), http.StatusNotFound, "not_found", "")
	requireStatus(t, b.do(t, http.MethodGet, "/v1/schedules/billing", nil, bearer(adminSecret)...), http.StatusOK)
}

// TestSchedulesExportImport: an export carries schedules, first, with
// their times and cursor; an import restores them as they were, skips a
// name in use, and fails a bad schedule line alone.
func TestSchedulesExportImport(t *testing.T) {
	t.Parallel()
	src, dst := setup(t), setup(t)
	res := src.do(t, http.MethodPut, "/v1/schedules/nightly", `{"cron": "0 3 * * *", "time_zone": "Europe/Paris",
		"topic": "reports", "job": {"body": {"a": 1}, "ttr": "1m"}, "missed": "all", "start": "2026-01-01T00:00:00Z"}`)
	requireStatus(t, res, http.StatusOK)
	slot := src.clock.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	// The slot fired: the schedule's record (core.KindSchedule) has it as
	// its cursor.
	rec, err := src.store.GetRecord(t.Context(), core.KindSchedule, "nightly")
	require.NoError(t, err)
	var fired map[string]any
	require.NoError(t, json.Unmarshal(rec.Value, &fired))
	fired["cursor"] = slot
	value, err := json.Marshal(fired)
	require.NoError(t, err)
	_, err = src.store.PutRecord(t.Context(), &core.PutRecordParams{Kind: core.KindSchedule, Name: "nightly", Value: value, Revision: rec.Revision})
	require.NoError(t, err)
	src.push(t, `{"topic":"reports","id":"j-1"}`)
	res = src.do(t, http.MethodGet, "/v1/export", nil)
	requireStatus(t, res, http.StatusOK)
	lines := strings.Split(strings.TrimSpace(string(res.body)), "\n")
	require.Len(t, lines, 2)
	require.True(t, strings.HasPrefix(lines[0], `{"schedule":`), lines[0])

	a := dst.importBody(t, string(res.body), "Content-Type", "application/x-ndjson")
	require.Equal(t, 2, a.Imported, "%+v", a)
	want := src.do(t, http.MethodGet, "/v1/schedules/nightly?next=0", nil).object(t)
	got := dst.do(t, http.MethodGet, "/v1/schedules/nightly?next=0", nil).object(t)
	require.Equal(t, want, got)
	require.Equal(t, wireMS(slot), got["last_slot"])

	bad := `{"schedule": {"name": "b", "cron": "nope", "topic": "t"}}` + "\n" + lines[0] + "\n"
	a = dst.importBody(t, bad, "Content-Type", "application/x-ndjson")
	require.Equal(t, 0, a.Imported)
	require.Equal(t, 1, a.Skipped, "the name is in use")
	require.Equal(t, 1, a.Failed)
	require.Equal(t, "cron", a.Errors[0].Error.Field)
}

func wireMS(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// TestScheduleRun: POST /v1/schedules/{name}/run pushes one job of the
// template now, with a fresh id, and leaves the schedule's cursor; a
// unique key's unfinished job is a conflict; an unknown schedule 404.
func TestScheduleRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireStatus(t, b.do(t, http.MethodPut, "/v1/schedules/nightly", `{"cron": "0 3 * * *", "topic": "reports", "paused": true,
		"job": {"body": {"kind": "nightly"}, "ttr": "2m", "max_attempts": 3, "priority": -1}}`), http.StatusOK)
	// The topic's delay is for pushes: a run is now.
	requireStatus(t, b.do(t, http.MethodPut, "/v1/topics/reports", `{"delay": "1h"}`), http.StatusOK)
	before, err := b.engine.GetSchedule(t.Context(), "nightly")
	require.NoError(t, err)
	res := b.do(t, http.MethodPost, "/v1/schedules/nightly/run", nil)
	requireStatus(t, res, http.StatusCreated)
	id := res.object(t)["id"].(string)
	require.Equal(t, "/v1/jobs/"+id, res.header.Get("Location"))
	require.False(t, core.IsDerivedID(id), "a fresh id, not a slot's: %s", id)
	job := b.getJob(t, id)
	require.Equal(t, "ready", job["state"])
	require.Equal(t, rfc3339ms(b.clock.Now()), job["run_at"])
	require.Equal(t, map[string]any{"kind": "nightly"}, job["body"])
	require.Equal(t, "2m0s", job["ttr"])
	require.EqualValues(t, 3, job["max_attempts"])
	require.EqualValues(t, -1, job["priority"])
	second := b.do(t, http.MethodPost, "/v1/schedules/nightly/run", nil)
	requireStatus(t, second, http.StatusCreated)
	require.NotEqual(t, id, second.object(t)["id"], "each run is a job of its own")
	after, err := b.engine.GetSchedule(t.Context(), "nightly")
	require.NoError(t, err)
	require.Equal(t, before.Cursor, after.Cursor, "the cursor does not move")
	require.Equal(t, before.UpdatedAt, after.UpdatedAt)

	requireStatus(t, b.do(t, http.MethodPut, "/v1/topics/keyed", `{"unique_keys": "reject"}`), http.StatusOK)
	requireStatus(t, b.do(t, http.MethodPut, "/v1/schedules/keyed", `{"cron": "@hourly", "topic": "keyed", "job": {"key": "k"}}`), http.StatusOK)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/schedules/keyed/run", nil), http.StatusCreated)
	requireError(t, b.do(t, http.MethodPost, "/v1/schedules/keyed/run", nil), http.StatusConflict, "conflict", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/schedules/nope/run", nil), http.StatusNotFound, "not_found", "")
}

// TestScheduleJitterWire: a schedule's jitter is read as a duration,
// shown when set, and refused out of range, naming the field.
func TestScheduleJitterWire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPut, "/v1/schedules/spread", `{"cron": "@hourly", "topic": "t", "jitter": "30s"}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "30s", res.object(t)["jitter"])
	stored, err := b.engine.GetSchedule(t.Context(), "spread")
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, stored.Jitter)
	res = b.do(t, http.MethodPut, "/v1/schedules/spread", `{"cron": "@hourly", "topic": "t"}`)
	requireStatus(t, res, http.StatusOK)
	require.NotContains(t, res.object(t), "jitter", "none: absent")
	requireError(t, b.do(t, http.MethodPut, "/v1/schedules/spread", `{"cron": "@hourly", "topic": "t", "jitter": "25h"}`), http.StatusBadRequest, "invalid_argument", "jitter")
	requireError(t, b.do(t, http.MethodPut, "/v1/schedules/spread", `{"cron": "@hourly", "topic": "t", "jitter": "soon"}`), http.StatusBadRequest, "invalid_argument", "jitter")
}

// TestScheduleLastRuns: GET /v1/schedules/{name}?runs=N answers the last
// slots up to the cursor, newest first, with their jobs' states now (none
// for a slot without a job), only when asked; runs out of range is 400.
func TestScheduleLastRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.clock.Now().Add(-time.Hour).UTC().Truncate(time.Hour)
	slot := func(m int) time.Time { return created.Add(time.Duration(m) * time.Minute) }
	sid := core.ScheduleID("tick", slot(40))
	lines := `{"schedule": {"name": "tick", "cron": "*/10 * * * *", "time_zone": "UTC", "topic": "ticks", "job": {"body": null}, ` +
		`"paused": false, "missed": "skip", "created_at": "` + wireMS(created) + `", "updated_at": "` + wireMS(created) +
		`", "last_slot": "` + wireMS(slot(40)) + `"}}` + "\n" +
		`{"id": "` + sid + `", "topic": "ticks", "key": "", "body": null, "state": "scheduled", "ttr": "30s", "max_attempts": 3, "priority": 0, ` +
		`"attempt": 0, "last_error": "", "created_at": "` + wireMS(slot(40)) + `", "run_at": "` + wireMS(slot(40).Add(3*time.Hour)) + `"}` + "\n"
	a := b.importBody(t, lines, "Content-Type", "application/x-ndjson")
	require.Equal(t, 2, a.Imported, "%+v", a)

	got := b.do(t, http.MethodGet, "/v1/schedules/tick?runs=2", nil).object(t)
	require.Equal(t, []any{
		map[string]any{"slot": wireMS(slot(40)), "job_id": sid, "state": "scheduled"},
		map[string]any{"slot": wireMS(slot(30)), "job_id": core.ScheduleID("tick", slot(30))},
	}, got["last_runs"])
	require.NotContains(t, b.do(t, http.MethodGet, "/v1/schedules/tick", nil).object(t), "last_runs", "only when asked")
	require.Equal(t, []any{}, b.do(t, http.MethodGet, "/v1/schedules/tick?runs=0", nil).object(t)["last_runs"])
	for _, bad := range []string{"101", "-1", "x"} {
		requireError(t, b.do(t, http.MethodGet, "/v1/schedules/tick?runs="+bad, nil), http.StatusBadRequest, "invalid_argument", "runs")
	}
}
