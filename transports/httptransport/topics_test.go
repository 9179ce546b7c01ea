package httptransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTopics(t *testing.T) {
	t.Parallel()

	t.Run("ErrorBodyRoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPut, "/v1/topics/hooks", `{"delivery": {"type": "webhook", "url": "https://svc/hook", "error_body": true}}`)
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, true, res.object(t)["delivery"].(map[string]any)["error_body"])
		res = b.do(t, http.MethodGet, "/v1/topics/hooks", nil)
		requireStatus(t, res, http.StatusOK)
		got := res.object(t)
		require.Equal(t, true, got["delivery"].(map[string]any)["error_body"])
		// GET's delivery (but secret_set) may be sent back, and keeps it.
		delivery := got["delivery"].(map[string]any)
		delete(delivery, "secret_set")
		again, err := json.Marshal(map[string]any{"delivery": delivery})
		require.NoError(t, err)
		delivery["secret_set"] = false
		res = b.do(t, http.MethodPut, "/v1/topics/hooks", string(again))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, got["delivery"], res.object(t)["delivery"])
		// Off by default, and not shown then.
		res = b.do(t, http.MethodPut, "/v1/topics/hooks", `{"delivery": {"type": "webhook", "url": "https://svc/hook"}}`)
		requireStatus(t, res, http.StatusOK)
		require.NotContains(t, res.object(t)["delivery"], "error_body")
		res = b.do(t, http.MethodPut, "/v1/topics/hooks", `{"delivery": {"type": "webhook", "url": "https://svc/hook", "error_body": "yes"}}`)
		requireStatus(t, res, http.StatusBadRequest)
		require.Contains(t, string(res.body), `"field":"delivery.error_body"`)
	})

	t.Run("WebhookHeadersAndMethod", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hook := func(extra string) string {
			return `{"delivery": {"type": "webhook", "url": "https://svc/hook", ` + extra + `}}`
		}
		tooMany := map[string]string{}
		for i := range 21 {
			tooMany[fmt.Sprintf("X-H%d", i)] = "v"
		}
		many, err := json.Marshal(tooMany)
		require.NoError(t, err)
		for body, field := range map[string]string{
			hook(`"method": "GET"`):                             "delivery.method",
			hook(`"method": "post"`):                            "delivery.method",
			hook(`"headers": {"Content-Type": "text/plain"}`):   "delivery.headers.Content-Type",
			hook(`"headers": {"delayq-id": "x"}`):               "delivery.headers.delayq-id",
			hook(`"headers": {"Webhook-Signature": "x"}`):       "delivery.headers.Webhook-Signature",
			hook(`"headers": {"bad name": "x"}`):                "delivery.headers",
			hook(`"headers": {"X-A": "line\nbreak"}`):           "delivery.headers.X-A",
			hook(`"headers": {"X-A": "1", "x-a": "2"}`):         "delivery.headers",
			hook(`"headers": ` + string(many)):                  "delivery.headers",
			hook(`"headers": ["X-A"]`):                          "delivery.headers",
			`{"delivery": {"headers": {"Authorization": "x"}}}`: "delivery.headers",
			`{"delivery": {"type": "nats", "method": "PUT"}}`:   "delivery.method",
		} {
			res := b.do(t, http.MethodPut, "/v1/topics/hooks", body)
			requireStatus(t, res, http.StatusBadRequest)
			require.Contains(t, string(res.body), `"field":"`+field+`"`, body)
		}
		res := b.do(t, http.MethodGet, "/v1/topics/hooks", nil)
		requireStatus(t, res, http.StatusNotFound) // refused changes stored nothing
	})

	t.Run("SecretRotation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const current, previous = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "0ld-s3cr3t"
		res := b.do(t, http.MethodPut, "/v1/topics/hooks", `{"delivery": {"type": "webhook", "url": "https://svc/hook",
			"secret": "`+current+`", "previous_secret": "`+previous+`"}}`)
		requireStatus(t, res, http.StatusOK)
		for _, r := range []*response{res, b.do(t, http.MethodGet, "/v1/topics/hooks", nil)} {
			require.NotContains(t, string(r.body), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
			require.NotContains(t, string(r.body), previous)
			d := r.object(t)["delivery"].(map[string]any)
			require.Equal(t, true, d["secret_set"])
			require.Equal(t, true, d["previous_secret_set"])
		}
		// The rotation ends: the previous secret is no longer sent, nor shown.
		res = b.do(t, http.MethodPut, "/v1/topics/hooks", `{"delivery": {"type": "webhook", "url": "https://svc/hook", "secret": "`+current+`"}}`)
		requireStatus(t, res, http.StatusOK)
		require.NotContains(t, res.object(t)["delivery"], "previous_secret_set")
	})

	t.Run("RetrySchedule", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPut, "/v1/topics/retry", `{"backoff": {"delays": ["1m", 180000, "0s", "7m"]}}`)
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, []any{"1m0s", "3m0s", "0s", "7m0s"}, res.object(t)["backoff"].(map[string]any)["delays"])
		res = b.do(t, http.MethodGet, "/v1/topics/retry", nil)
		require.Equal(t, []any{"1m0s", "3m0s", "0s", "7m0s"}, res.object(t)["backoff"].(map[string]any)["delays"])
		// Without a schedule, none is shown.
		res = b.do(t, http.MethodPut, "/v1/topics/retry", `{"backoff": {"delays": []}}`)
		requireStatus(t, res, http.StatusOK)
		require.NotContains(t, res.object(t)["backoff"], "delays")

		tooMany := `{"backoff": {"delays": [` + strings.Repeat(`"1s",`, 100) + `"1s"]}}`
		for body, field := range map[string]string{
			`{"backoff": {"delays": ["1m", "soon"]}}`: "backoff.delays[1]",
			`{"backoff": {"delays": [null]}}`:         "backoff.delays[0]",
			`{"backoff": {"delays": ["-1s"]}}`:        "backoff.delays[0]",
			`{"backoff": {"delays": ["169h"]}}`:       "backoff.delays[0]",
			`{"backoff": {"delays": "1m"}}`:           "backoff.delays",
			tooMany:                                   "backoff.delays",
		} {
			res := b.do(t, http.MethodPut, "/v1/topics/retry", body)
			requireStatus(t, res, http.StatusBadRequest)
			require.Contains(t, string(res.body), `"field":"`+field+`"`, body)
		}
		// Refused changes changed nothing.
		res = b.do(t, http.MethodGet, "/v1/topics/retry", nil)
		require.NotContains(t, res.object(t)["backoff"], "delays")
	})

	t.Run("PauseResume", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPost, "/v1/topics/mail/pause", nil)
		requireStatus(t, res, http.StatusOK)
		got := res.object(t)
		require.Equal(t, "mail", got["name"])
		require.Equal(t, true, got["paused"])
		require.Equal(t, false, got["configured"])

		res = b.do(t, http.MethodGet, "/v1/topics", nil)
		requireStatus(t, res, http.StatusOK)
		require.Contains(t, string(res.body), `"name":"mail"`, "a paused topic is listed")
		res = b.do(t, http.MethodPut, "/v1/topics/mail", `{"ttr": "5s"}`)
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, true, res.object(t)["paused"], "a PUT keeps the pause")

		// Pausing is not configuration: a PUT cannot set it.
		res = b.do(t, http.MethodPut, "/v1/topics/mail", `{"paused": false}`)
		requireStatus(t, res, http.StatusBadRequest)
		require.Contains(t, string(res.body), `"field":"paused"`)

		res = b.do(t, http.MethodPost, "/v1/topics/mail/resume", nil)
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, false, res.object(t)["paused"])
		res = b.do(t, http.MethodGet, "/v1/topics/mail", nil)
		require.Equal(t, false, res.object(t)["paused"])

		requireStatus(t, b.do(t, http.MethodPost, "/v1/topics/bad..name/pause", nil), http.StatusBadRequest)
	})

	t.Run("PutGetListDelete", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPut, "/v1/topics/orders.close", `{
			"delivery": {"type": "webhook", "url": "https://svc/hook", "timeout": "5s", "secret": "s3cr3t",
				"method": "PUT", "headers": {"authorization": "Bearer t0ken", "X-Api-Key": "k3y"}},
			"ttr": "45s", "max_attempts": 16,
			"backoff": {"initial": "2s", "max": 3600000, "factor": 3, "jitter": 0.1},
			"concurrency": 64}`)
		requireStatus(t, res, http.StatusOK)
		for _, secret := range []string{"s3cr3t", "t0ken", "k3y"} {
			require.NotContains(t, string(res.body), secret, "header values and the secret are never shown")
		}
		want := map[string]any{
			"name": "orders.close",
			"delivery": map[string]any{
				"type": "webhook", "url": "https://svc/hook", "timeout": "5s", "secret_set": true,
				"method": "PUT", "header_names": []any{"Authorization", "X-Api-Key"},
			},
			"ttr": "45s", "max_attempts": float64(16),
			"backoff":     map[string]any{"initial": "2s", "max": "1h0m0s", "factor": float64(3), "jitter": 0.1},
			"concurrency": float64(64), "configured": true, "paused": false,
			"counts": map[string]any{"scheduled": float64(0), "ready": float64(0), "reserved": float64(0), "done": float64(0), "dead": float64(0), "cancelled": float64(0)},
		}
		require.Equal(t, want, res.object(t))

		res = b.do(t, http.MethodGet, "/v1/topics/orders.close", nil)
		requireStatus(t, res, http.StatusOK)
		require.NotContains(t, string(res.body), "s3cr3t")
		require.Equal(t, want, res.object(t))

		// The topic's defaults apply to its jobs.
		id := b.push(t, `{"topic":"orders.close","delay":"1m"}`)
		job := b.getJob(t, id)
		require.Equal(t, "45s", job["ttr"])
		require.Equal(t, float64(16), job["max_attempts"])

		// A topic with jobs but no configuration is listed, with defaults.
		b.push(t, `{"topic":"plain"}`)
		b.push(t, `{"topic":"plain"}`)
		require.Len(t, b.claim(t, "plain", 1), 1)
		// Done and cancelled jobs count too, in the order of the states.
		b.push(t, `{"topic":"plain"}`)
		c := b.claim(t, "plain", 1)
		require.Len(t, c, 1)
		requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+c[0]["id"].(string)+"/ack", map[string]any{"lease": c[0]["lease"]}), http.StatusNoContent)
		cancelled := b.push(t, `{"topic":"plain","delay":"1h"}`)
		requireStatus(t, b.do(t, http.MethodDelete, "/v1/jobs/"+cancelled, nil), http.StatusNoContent)
		res = b.do(t, http.MethodGet, "/v1/topics/plain", nil)
		requireStatus(t, res, http.StatusOK)
		require.Contains(t, string(res.body),
			`"counts":{"scheduled":0,"ready":1,"reserved":1,"done":1,"dead":0,"cancelled":1}`)
		res = b.do(t, http.MethodGet, "/v1/topics", nil)
		requireStatus(t, res, http.StatusOK)
		require.NotContains(t, string(res.body), "s3cr3t")
		var list struct{ Topics []map[string]any }
		require.NoError(t, json.Unmarshal(res.body, &list))
		require.Len(t, list.Topics, 2)
		require.Equal(t, "orders.close", list.Topics[0]["name"])
		require.Equal(t, map[string]any{"scheduled": float64(1), "ready": float64(0), "reserved": float64(0), "done": float64(0), "dead": float64(0), "cancelled": float64(0)}, list.Topics[0]["counts"])
		plain := list.Topics[1]
		require.Equal(t, "plain", plain["name"])
		require.Equal(t, false, plain["configured"])
		require.Equal(t, map[string]any{"type": "consumer", "secret_set": false}, plain["delivery"])
		require.Equal(t, "30s", plain["ttr"])
		require.Equal(t, map[string]any{"scheduled": float64(0), "ready": float64(1), "reserved": float64(1), "done": float64(1), "dead": float64(0), "cancelled": float64(1)}, plain["counts"])

		// PUT replaces; what GET answered may be sent back.
		res = b.do(t, http.MethodPut, "/v1/topics/plain", `{"name":"plain","delivery":{"type":"consumer"},"ttr":"1m"}`)
		requireStatus(t, res, http.StatusOK)
		m := res.object(t)
		require.Equal(t, true, m["configured"])
		require.Equal(t, "1m0s", m["ttr"])
		require.Equal(t, float64(1), m["counts"].(map[string]any)["ready"])

		requireStatus(t, b.do(t, http.MethodDelete, "/v1/topics/orders.close", nil), http.StatusNoContent)
		requireError(t, b.do(t, http.MethodDelete, "/v1/topics/orders.close", nil), http.StatusNotFound, "not_found", "")
		res = b.do(t, http.MethodGet, "/v1/topics/orders.close", nil)
		requireStatus(t, res, http.StatusOK) // it still has a job
		require.Equal(t, false, res.object(t)["configured"])
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodGet, "/v1/topics", nil)
		requireStatus(t, res, http.StatusOK)
		require.JSONEq(t, `{"topics":[]}`, string(res.body))
		requireError(t, b.do(t, http.MethodGet, "/v1/topics/nope", nil), http.StatusNotFound, "not_found", "")
		requireError(t, b.do(t, http.MethodGet, "/v1/topics/a..b", nil), http.StatusNotFound, "not_found", "")
		requireError(t, b.do(t, http.MethodDelete, "/v1/topics/nope", nil), http.StatusNotFound, "not_found", "")
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tc := range []struct {
			path, body, field string
		}{
			{"/v1/topics/t", `{"ttr":"fast"}`, "ttr"},
			{"/v1/topics/t", `{"ttr":"0.5s"}`, "ttr"},
			{"/v1/topics/t", `{"max_attempts":"3"}`, "max_attempts"},
			{"/v1/topics/t", `{"concurrency":-1}`, "concurrency"},
			{"/v1/topics/t", `{"delivery":{"type":"carrier-pigeon"}}`, "delivery.type"},
			{"/v1/topics/t", `{"delivery":{"type":"nats"}}`, "delivery.type"},
			{"/v1/topics/t", `{"delivery":{"type":"webhook"}}`, "delivery.url"},
			{"/v1/topics/t", `{"delivery":{"type":"webhook","url":"http://x","timeout":"1h"}}`, "delivery.timeout"},
			{"/v1/topics/t", `{"delivery":{"type":"webhook","url":"http://x","timeout":true}}`, "delivery.timeout"},
			{"/v1/topics/t", `{"delivery":{"kind":"webhook"}}`, "delivery.kind"},
			{"/v1/topics/t", `{"delivery":{"url":7}}`, "delivery.url"},
			{"/v1/topics/t", `{"delivery":"webhook"}`, "delivery"},
			{"/v1/topics/t", `{"backoff":{"initial":"1x"}}`, "backoff.initial"},
			{"/v1/topics/t", `{"backoff":{"max":"-1s"}}`, "backoff.max"},
			{"/v1/topics/t", `{"backoff":{"factor":0.5}}`, "backoff.factor"},
			{"/v1/topics/t", `{"backoff":{"jitter":"a"}}`, "backoff.jitter"},
			{"/v1/topics/t", `{"backoff":{"steps":3}}`, "backoff.steps"},
			{"/v1/topics/t", `{"name":"u"}`, "name"},
			{"/v1/topics/t", `{"secret":"x"}`, "secret"},
			{"/v1/topics/t", `{"delivery":{"type":"webhook","url":"https://svc/hook","previous_secret":"old"}}`, "delivery.previous_secret"},
			{"/v1/topics/t", `{"delivery":{"type":"webhook","url":"https://svc/hook","secret":"s","previous_secret":"s"}}`, "delivery.previous_secret"},
			{"/v1/topics/t", `{"delivery":{"type":"webhook","url":"https://svc/hook","secret":"s","previous_secret":7}}`, "delivery.previous_secret"},
			{"/v1/topics/t", ``, ""},
			{"/v1/topics/t", `{"ttr":"1m"`, ""},
			{"/v1/topics/t", `{"ttr":"1m"}x`, ""},
			{"/v1/topics/a*b", `{}`, "topic"},
		} {
			res := b.do(t, http.MethodPut, tc.path, tc.body)
			requireError(t, res, http.StatusBadRequest, "invalid_argument", tc.field)
		}
		requireNoTopics(t, b)
	})
}

// TestTopicDelay: a topic's delay is the delay of its pushes that give
// neither delay nor run_at, single or in a batch; an explicit delay (0
// included) or run_at wins; GET shows it, PATCH drops it with null, and a
// bad one is refused naming the field, storing nothing.
func TestTopicDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	res := b.do(t, http.MethodPut, "/v1/topics/later", `{"delay": "10m"}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "10m0s", res.object(t)["delay"])

	id := b.push(t, `{"topic": "later"}`)
	require.Equal(t, rfc3339ms(now.Add(10*time.Minute)), b.getJob(t, id)["run_at"])
	require.Equal(t, "scheduled", b.getJob(t, id)["state"])
	id = b.push(t, `{"topic": "later", "delay": "0s"}`)
	require.Equal(t, rfc3339ms(now), b.getJob(t, id)["run_at"], "an explicit delay of 0: now")
	id = b.push(t, `{"topic": "later", "run_at": "`+rfc3339ms(now.Add(time.Minute))+`"}`)
	require.Equal(t, rfc3339ms(now.Add(time.Minute)), b.getJob(t, id)["run_at"])
	res = b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs": [{"topic": "later"}]}`)
	requireStatus(t, res, http.StatusOK)
	require.Contains(t, string(res.body), rfc3339ms(now.Add(10*time.Minute)))
	id = b.push(t, `{"topic": "other"}`)
	require.Equal(t, rfc3339ms(now), b.getJob(t, id)["run_at"], "another topic: now")

	requireError(t, b.do(t, http.MethodPut, "/v1/topics/later", `{"delay": "-1s"}`), http.StatusBadRequest, "invalid_argument", "delay")
	requireError(t, b.do(t, http.MethodPut, "/v1/topics/later", `{"delay": "9000h"}`), http.StatusBadRequest, "invalid_argument", "delay")
	requireError(t, b.do(t, http.MethodPut, "/v1/topics/later", `{"delay": "soon"}`), http.StatusBadRequest, "invalid_argument", "delay")
	stored, err := b.engine.GetTopic(t.Context(), "later")
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, stored.Delay, "refused puts change nothing")

	res = b.do(t, http.MethodPatch, "/v1/topics/later", `{"delay": null}`, "Content-Type", "application/merge-patch+json")
	requireStatus(t, res, http.StatusOK)
	require.NotContains(t, res.object(t), "delay")
	id = b.push(t, `{"topic": "later"}`)
	require.Equal(t, rfc3339ms(now), b.getJob(t, id)["run_at"])
}

// TestTopicExplicitZeros: a backoff's explicit "initial": "0s", "max": "0s"
// and "jitter": 0 are zero (a failed attempt is retried at once), absent
// ones the defaults; a PATCH keeps the zeros; GET shows them.
func TestTopicExplicitZeros(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPut, "/v1/topics/now", `{"backoff": {"initial": "0s", "jitter": 0}}`)
	requireStatus(t, res, http.StatusOK)
	backoff := res.object(t)["backoff"].(map[string]any)
	require.Equal(t, "0s", backoff["initial"])
	require.EqualValues(t, 0, backoff["jitter"])
	require.Equal(t, "1h0m0s", backoff["max"], "absent: the default")
	require.EqualValues(t, 2, backoff["factor"])

	id := b.push(t, `{"topic": "now"}`)
	lease := b.claim(t, "now", 1)[0]["lease"].(string)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/nack", map[string]any{"lease": lease, "error": "again"}), http.StatusNoContent)
	job := b.getJob(t, id)
	require.Equal(t, rfc3339ms(b.clock.Now()), job["run_at"], "retried at once")
	require.Len(t, b.claim(t, "now", 1), 1)

	res = b.do(t, http.MethodPatch, "/v1/topics/now", `{"max_attempts": 5}`, "Content-Type", "application/merge-patch+json")
	requireStatus(t, res, http.StatusOK)
	backoff = res.object(t)["backoff"].(map[string]any)
	require.Equal(t, "0s", backoff["initial"], "kept by a patch of another field")
	require.EqualValues(t, 0, backoff["jitter"])

	res = b.do(t, http.MethodPut, "/v1/topics/now", `{"backoff": {"max": "0s"}}`)
	requireStatus(t, res, http.StatusOK)
	backoff = res.object(t)["backoff"].(map[string]any)
	require.Equal(t, "1s", backoff["initial"], "absent again: the default")
	require.Equal(t, "0s", backoff["max"])
	require.EqualValues(t, 0.2, backoff["jitter"])
}
