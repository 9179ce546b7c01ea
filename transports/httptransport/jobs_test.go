package httptransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func TestCreateJob(t *testing.T) {
	t.Parallel()

	t.Run("DelayString", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		now := b.clock.Now()
		res := b.do(t, http.MethodPost, "/v1/jobs",
			`{"topic":"orders.close","body":{"order":42},"delay":"15m","ttr":"45s","max_attempts":3,"key":"order-42"}`)
		requireStatus(t, res, http.StatusCreated)
		m := res.object(t)
		id := m["id"].(string)
		require.Len(t, id, 26)
		require.Equal(t, map[string]any{
			"id": id, "topic": "orders.close", "run_at": rfc3339ms(now.Add(15 * time.Minute)), "state": "scheduled",
		}, m)
		require.Equal(t, "/v1/jobs/"+id, res.header.Get("Location"))

		got := b.getJob(t, id)
		require.Equal(t, map[string]any{
			"id": id, "topic": "orders.close", "key": "order-42", "body": map[string]any{"order": float64(42)},
			"run_at": rfc3339ms(now.Add(15 * time.Minute)), "ttr": "45s", "max_attempts": float64(3),
			"priority": float64(0), "attempt": float64(0), "state": "scheduled", "created_at": rfc3339ms(now),
			"updated_at": rfc3339ms(now), "last_error": "",
			"trail": []any{map[string]any{"at": rfc3339ms(now), "event": "created", "via": "http"}},
		}, got)
	})

	t.Run("DelayMilliseconds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		now := b.clock.Now()
		res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t","delay":1500}`)
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, rfc3339ms(now.Add(1500*time.Millisecond)), res.object(t)["run_at"])
	})

	t.Run("RunAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		at := b.clock.Now().Add(time.Hour).Truncate(time.Second).Add(250 * time.Millisecond)
		res := b.do(t, http.MethodPost, "/v1/jobs",
			fmt.Sprintf(`{"topic":"t","run_at":%q}`, at.In(time.FixedZone("x", 2*3600)).Format(time.RFC3339Nano)))
		requireStatus(t, res, http.StatusCreated)
		m := res.object(t)
		require.Equal(t, rfc3339ms(at), m["run_at"])
		require.True(t, strings.HasSuffix(m["run_at"].(string), "Z"))
		require.Equal(t, "scheduled", m["state"])

		// Unix seconds, as older delay-queue clients send them.
		res = b.do(t, http.MethodPost, "/v1/jobs", fmt.Sprintf(`{"topic":"t","run_at":%d.25}`, at.Unix()))
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, rfc3339ms(at), res.object(t)["run_at"])
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t","run_at":1.7e9}`), http.StatusBadRequest, "invalid_argument", "run_at")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t","run_at":-1}`), http.StatusBadRequest, "invalid_argument", "run_at")
	})

	t.Run("DueNowIsReady", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		past := b.clock.Now().Add(-time.Hour)
		res := b.do(t, http.MethodPost, "/v1/jobs", fmt.Sprintf(`{"topic":"t","run_at":%q}`, past.Format(time.RFC3339)))
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, "ready", res.object(t)["state"])
		res = b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t"}`)
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, "ready", res.object(t)["state"])
	})

	t.Run("BodyByteForByte", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, body := range []string{
			`{ "b" : [1, 2.50, "<&>"],  "a":"\u00e9" }`,
			`"just a string"`,
			`12.500e3`,
			`null`,
			`[ ]`,
		} {
			id := b.push(t, `{"topic":"t","body":`+body+`}`)
			res := b.do(t, http.MethodGet, "/v1/jobs/"+id, nil)
			requireStatus(t, res, http.StatusOK)
			require.Contains(t, string(res.body), `"body":`+body+`,`)
			var raw struct{ Body json.RawMessage }
			require.NoError(t, json.Unmarshal(res.body, &raw))
			require.Equal(t, body, string(raw.Body))
		}
		id := b.push(t, `{"topic":"t"}`)
		require.Nil(t, b.getJob(t, id)["body"])
	})

	t.Run("TraceParent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t"}`, "traceparent", tp)
		requireStatus(t, res, http.StatusCreated)
		job, err := b.store.GetJob(t.Context(), res.object(t)["id"].(string))
		require.NoError(t, err)
		require.Equal(t, tp, job.TraceParent)

		res = b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t"}`, "traceparent", "not-a-traceparent")
		requireStatus(t, res, http.StatusCreated)
		job, err = b.store.GetJob(t.Context(), res.object(t)["id"].(string))
		require.NoError(t, err)
		require.Empty(t, job.TraceParent)
	})

	t.Run("ConflictShowsExistingJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, `{"topic":"t","id":"job-1","body":{"v":1},"delay":"1m"}`)
		res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t","id":"job-1","body":{"v":2}}`)
		m := requireError(t, res, http.StatusConflict, "conflict", "")
		job := m["job"].(map[string]any)
		require.Equal(t, "job-1", job["id"])
		require.Equal(t, map[string]any{"v": float64(1)}, job["body"])
		require.Equal(t, "scheduled", job["state"])
		require.NotContains(t, job, "lease")
		// The existing job is unchanged.
		require.Equal(t, map[string]any{"v": float64(1)}, b.getJob(t, "job-1")["body"])
	})

	t.Run("RefusesWhatItWouldAlter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// JSON is UTF-8: a body would be stored raw and a key silently
		// changed to U+FFFD. An explicit zero is not "the default".
		for _, c := range []struct{ body, field string }{
			{"{\"topic\":\"t\",\"body\":\"\xff\xfe\"}", ""},
			{"{\"topic\":\"t\",\"key\":\"k\xff\"}", ""},
			{`{"topic":"t","ttr":"0s"}`, "ttr"},
			{`{"topic":"t","ttr":0}`, "ttr"},
			{`{"topic":"t","max_attempts":0}`, "max_attempts"},
			{`{"topic":"t","priority":11}`, "priority"},
			{`{"topic":"t","priority":-11}`, "priority"},
		} {
			m := requireError(t, b.do(t, http.MethodPost, "/v1/jobs", c.body), http.StatusBadRequest, "invalid_argument", c.field)
			require.NotEmpty(t, m["error"].(map[string]any)["message"])
			requireError(t, b.do(t, http.MethodPut, "/v1/jobs/j1", c.body), http.StatusBadRequest, "invalid_argument", c.field)
			res := b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[`+c.body+`]}`)
			if c.field == "" {
				requireError(t, res, http.StatusBadRequest, "invalid_argument", "")
				continue
			}
			requireStatus(t, res, http.StatusOK)
			var batch struct{ Results []map[string]any }
			require.NoError(t, json.Unmarshal(res.body, &batch))
			require.Equal(t, c.field, batch.Results[0]["error"].(map[string]any)["field"])
		}
		topics, err := b.store.ListTopicStates(t.Context())
		require.NoError(t, err)
		require.Empty(t, topics, "nothing was stored")
	})

	t.Run("Priority", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		urgent := b.push(t, `{"topic":"t","priority":-10,"body":1}`)
		normal := b.push(t, `{"topic":"t","body":2}`)
		require.Equal(t, float64(-10), b.getJob(t, urgent)["priority"])
		require.Equal(t, float64(0), b.getJob(t, normal)["priority"])
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t","priority":1.5}`), http.StatusBadRequest, "invalid_argument", "priority")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t","priority":"high"}`), http.StatusBadRequest, "invalid_argument", "priority")
	})

	t.Run("FinishedIDIsReused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, `{"topic":"t","id":"job-1","delay":"1m"}`)
		requireStatus(t, b.do(t, http.MethodDelete, "/v1/jobs/job-1", nil), http.StatusNoContent)
		b.push(t, `{"topic":"t","id":"job-1"}`)
		require.Equal(t, "ready", b.getJob(t, "job-1")["state"])
	})
}

func TestPutJob(t *testing.T) {
	t.Parallel()

	t.Run("CreatedThenReplaced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		now := b.clock.Now()
		res := b.do(t, http.MethodPut, "/v1/jobs/job-1", `{"topic":"t","delay":"1m","body":1}`)
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, "/v1/jobs/job-1", res.header.Get("Location"))
		require.Equal(t, map[string]any{"id": "job-1", "topic": "t", "run_at": rfc3339ms(now.Add(time.Minute)), "state": "scheduled"}, res.object(t))

		res = b.do(t, http.MethodPut, "/v1/jobs/job-1", `{"topic":"t","delay":"2m","body":2,"id":"job-1"}`)
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, rfc3339ms(now.Add(2*time.Minute)), res.object(t)["run_at"])
		got := b.getJob(t, "job-1")
		require.Equal(t, float64(2), got["body"])
		require.Equal(t, rfc3339ms(now.Add(2*time.Minute)), got["run_at"])
	})

	t.Run("ConflictWhileReserved", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireStatus(t, b.do(t, http.MethodPut, "/v1/jobs/job-1", `{"topic":"t"}`), http.StatusCreated)
		require.Len(t, b.claim(t, "t", 1), 1)
		res := b.do(t, http.MethodPut, "/v1/jobs/job-1", `{"topic":"t","delay":"1m"}`)
		m := requireError(t, res, http.StatusConflict, "conflict", "")
		require.Equal(t, "reserved", m["job"].(map[string]any)["state"])
	})

	t.Run("IDMismatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPut, "/v1/jobs/job-1", `{"topic":"t","id":"job-2"}`)
		requireError(t, res, http.StatusBadRequest, "invalid_argument", "id")
		requireError(t, b.do(t, http.MethodGet, "/v1/jobs/job-1", nil), http.StatusNotFound, "not_found", "")
	})

	t.Run("BadID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPut, "/v1/jobs/bad%20id", `{"topic":"t"}`)
		requireError(t, res, http.StatusBadRequest, "invalid_argument", "id")
	})
}

func TestBatch(t *testing.T) {
	t.Parallel()

	t.Run("MixedResults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, `{"topic":"t","id":"taken","delay":"1h"}`)
		now := b.clock.Now()
		res := b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[
			{"topic":"t","id":"a","body":{"x": 1},"delay":"1s"},
			{"topic":"t","delay":"soon"},
			5,
			{"topic":"bad topic"},
			{"topic":"t","id":"taken"},
			{"topic":"t","nope":1},
			{"topic":"t","body":"<b>"}
		]}`)
		requireStatus(t, res, http.StatusOK)
		var v struct {
			Results []map[string]any `json:"results"`
		}
		require.NoError(t, json.Unmarshal(res.body, &v))
		require.Len(t, v.Results, 7)

		require.Equal(t, map[string]any{"id": "a", "topic": "t", "run_at": rfc3339ms(now.Add(time.Second)), "state": "scheduled"}, v.Results[0])
		requireResultError(t, v.Results[1], "invalid_argument", "delay")
		requireResultError(t, v.Results[2], "invalid_argument", "")
		requireResultError(t, v.Results[3], "invalid_argument", "topic")
		requireResultError(t, v.Results[4], "conflict", "")
		require.Equal(t, "taken", v.Results[4]["job"].(map[string]any)["id"])
		requireResultError(t, v.Results[5], "invalid_argument", "nope")
		require.Equal(t, "ready", v.Results[6]["state"])

		require.Equal(t, map[string]any{"x": float64(1)}, b.getJob(t, "a")["body"])
		require.Equal(t, "<b>", b.getJob(t, v.Results[6]["id"].(string))["body"])
		topic, err := b.engine.GetTopic(t.Context(), "t")
		require.NoError(t, err)
		require.Equal(t, core.Counts{Scheduled: 2, Ready: 1}, topic.Counts)
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[]}`), http.StatusBadRequest, "invalid_argument", "jobs")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{}`), http.StatusBadRequest, "invalid_argument", "jobs")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":{}}`), http.StatusBadRequest, "invalid_argument", "jobs")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[],"x":1}`), http.StatusBadRequest, "invalid_argument", "x")
	})

	t.Run("TooManyJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *setupConfig) { c.limits.MaxBatch = 3 })
		jobs := strings.Repeat(`{"topic":"t"},`, 4)
		res := b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[`+strings.TrimSuffix(jobs, ",")+`]}`)
		requireError(t, res, http.StatusRequestEntityTooLarge, "too_large", "jobs")
		requireNoTopics(t, b)

		res = b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"t"},{"topic":"t"},{"topic":"t"}]}`)
		requireStatus(t, res, http.StatusOK)
	})

	t.Run("RequestTooLarge", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *setupConfig) { c.maxRequestBytes = 1024 })
		res := b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"t","body":"`+strings.Repeat("x", 1100)+`"}]}`)
		requireError(t, res, http.StatusRequestEntityTooLarge, "too_large", "")
		requireNoTopics(t, b)
	})

	t.Run("BackendDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.down.mode.Store(modeUnavailable)
		// Every job failed server-side: the batch is answered 503 as a whole.
		res := b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"t"},{"topic":"t"}]}`)
		requireError(t, res, http.StatusServiceUnavailable, "unavailable", "")

		// A bad job fails on its own; the others report the outage.
		res = b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"t"},{"topic":""}]}`)
		requireStatus(t, res, http.StatusOK)
		var v struct {
			Results []map[string]any `json:"results"`
		}
		require.NoError(t, json.Unmarshal(res.body, &v))
		requireResultError(t, v.Results[0], "unavailable", "")
		requireResultError(t, v.Results[1], "invalid_argument", "topic")
	})
}

func requireResultError(t *testing.T, result map[string]any, code, field string) {
	t.Helper()
	e, ok := result["error"].(map[string]any)
	require.True(t, ok, "result: %v", result)
	require.Equal(t, code, e["code"], "result: %v", result)
	require.Equal(t, field, e["field"], "result: %v", result)
	require.NotEmpty(t, e["message"])
	require.NotContains(t, result, "id")
}

func TestGetJob(t *testing.T) {
	t.Parallel()
	b := setup(t)

	requireError(t, b.do(t, http.MethodGet, "/v1/jobs/nope", nil), http.StatusNotFound, "not_found", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/jobs/not%20an%20id", nil), http.StatusNotFound, "not_found", "")

	id := b.push(t, `{"topic":"t","ttr":"10s"}`)
	got := b.getJob(t, id)
	require.NotContains(t, got, "lease_expires_at")

	deliveries := b.claim(t, "t", 1)
	require.Len(t, deliveries, 1)
	res := b.do(t, http.MethodGet, "/v1/jobs/"+id, nil)
	requireStatus(t, res, http.StatusOK)
	got = res.object(t)
	require.Equal(t, "reserved", got["state"])
	require.Equal(t, float64(1), got["attempt"])
	require.Equal(t, rfc3339ms(b.clock.Now().Add(10*time.Second)), got["lease_expires_at"])
	require.NotContains(t, got, "lease")
	require.NotContains(t, string(res.body), deliveries[0]["lease"].(string))
}

func TestCancelJob(t *testing.T) {
	t.Parallel()
	b := setup(t)

	id := b.push(t, `{"topic":"t","delay":"1m"}`)
	requireStatus(t, b.do(t, http.MethodDelete, "/v1/jobs/"+id, nil), http.StatusNoContent)
	require.Equal(t, "cancelled", b.getJob(t, id)["state"])
	requireError(t, b.do(t, http.MethodDelete, "/v1/jobs/"+id, nil), http.StatusNotFound, "not_found", "")
	requireError(t, b.do(t, http.MethodDelete, "/v1/jobs/unknown", nil), http.StatusNotFound, "not_found", "")
	requireError(t, b.do(t, http.MethodDelete, "/v1/jobs/bad%20id", nil), http.StatusNotFound, "not_found", "")

	id = b.push(t, `{"topic":"t"}`)
	claimed := b.claim(t, "t", 1)
	require.Len(t, claimed, 1)
	requireError(t, b.do(t, http.MethodDelete, "/v1/jobs/"+id, nil), http.StatusConflict, "conflict", "")
	require.Equal(t, "reserved", b.getJob(t, id)["state"])
	requireError(t, b.do(t, http.MethodDelete, "/v1/jobs/"+id+"?running=yes", nil), http.StatusBadRequest, "invalid_argument", "running")
	require.Equal(t, "reserved", b.getJob(t, id)["state"], "a bad running changes nothing")

	// running=true cancels it while it is delivered: its ack and nack are
	// conflicts that say so.
	requireStatus(t, b.do(t, http.MethodDelete, "/v1/jobs/"+id+"?running=true", nil), http.StatusNoContent)
	job := b.getJob(t, id)
	require.Equal(t, "cancelled", job["state"])
	require.Equal(t, "cancelled", job["history"].([]any)[0].(map[string]any)["outcome"])
	lease := claimed[0]["lease"]
	for _, op := range []string{"ack", "nack"} {
		e := requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/"+op, map[string]any{"lease": lease}), http.StatusConflict, "conflict", "")
		require.Contains(t, e["error"].(map[string]any)["message"], "was cancelled while its delivery (attempt 1) ran", op)
	}
	requireError(t, b.do(t, http.MethodDelete, "/v1/jobs/"+id+"?running=true", nil), http.StatusNotFound, "not_found", "")
}

// requireNoTopics checks that nothing was stored.
func requireNoTopics(t *testing.T, b *testBundle) {
	t.Helper()
	ts, err := b.engine.ListTopics(t.Context())
	require.NoError(t, err)
	require.Empty(t, ts)
}
