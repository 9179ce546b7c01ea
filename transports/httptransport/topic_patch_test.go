package httptransport_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPatchTopic checks PATCH /v1/topics/{topic}: a JSON merge patch
// changes the settings it names, merges objects, drops those set to null,
// and keeps the secret and headers it does not name; bad patches and bad
// results change nothing.
func TestPatchTopic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireStatus(t, b.do(t, http.MethodPut, "/v1/topics/orders.close", `{
		"delivery": {"type": "webhook", "url": "https://svc/hook", "timeout": "5s", "secret": "s3cr3t",
			"method": "PUT", "headers": {"authorization": "Bearer t0ken"}},
		"ttr": "45s", "max_attempts": 16, "rate": {"limit": 10, "period": "1s"},
		"backoff": {"initial": "2s", "max": "1h", "factor": 3, "jitter": 0.1, "delays": ["1s", "1m"]},
		"concurrency": 64}`), http.StatusOK)
	stored := func() map[string]any {
		res := b.do(t, http.MethodGet, "/v1/topics/orders.close", nil)
		requireStatus(t, res, http.StatusOK)
		return res.object(t)
	}
	before := stored()

	res := b.do(t, http.MethodPatch, "/v1/topics/orders.close", `{"max_attempts": 5}`, "Content-Type", "application/merge-patch+json")
	requireStatus(t, res, http.StatusOK)
	got := res.object(t)
	require.Equal(t, float64(5), got["max_attempts"])
	want := before
	want["max_attempts"] = float64(5)
	require.Equal(t, want, got, "only max_attempts changed")
	cur, err := b.engine.GetTopic(t.Context(), "orders.close")
	require.NoError(t, err)
	require.Equal(t, "s3cr3t", cur.Delivery.Secret, "the secret it did not name is kept")
	require.Equal(t, map[string]string{"authorization": "Bearer t0ken"}, cur.Delivery.Headers)

	// An object merges; null drops a setting.
	res = b.do(t, http.MethodPatch, "/v1/topics/orders.close", `{"delivery": {"timeout": "7s", "method": null}, "rate": null}`)
	requireStatus(t, res, http.StatusOK)
	cur, err = b.engine.GetTopic(t.Context(), "orders.close")
	require.NoError(t, err)
	require.Equal(t, "https://svc/hook", cur.Delivery.URL)
	require.Equal(t, "s3cr3t", cur.Delivery.Secret)
	require.Equal(t, "7s", cur.Delivery.Timeout.String())
	require.Empty(t, cur.Delivery.Method, "dropped: POST again")
	require.Zero(t, cur.Rate.Limit, "the rate limit is lifted")
	require.Equal(t, 5, cur.MaxAttempts)
	require.Len(t, cur.Backoff.Delays, 2)

	// Bad input changes nothing.
	after := stored()
	for _, c := range []struct{ body, field string }{
		{`{"max_attempts": -1}`, "max_attempts"},
		{`{"delivery": {"timeout": "1h"}}`, "delivery.timeout"},
		{`{"delivery": {"kind": "webhook"}}`, "delivery.kind"},
		{`{"name": "other"}`, "name"},
		{`[{"op": "replace", "path": "/max_attempts", "value": 2}]`, ""},
		{`null`, ""},
		{`"x"`, ""},
	} {
		requireError(t, b.do(t, http.MethodPatch, "/v1/topics/orders.close", c.body), http.StatusBadRequest, "invalid_argument", c.field)
		require.Equal(t, after, stored(), "%s changed nothing", c.body)
	}
	requireError(t, b.do(t, http.MethodPatch, "/v1/topics/orders.close", `{}`, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	requireError(t, b.do(t, http.MethodPatch, "/v1/topics/nosuch", `{"max_attempts": 2}`), http.StatusNotFound, "not_found", "")
	requireError(t, b.do(t, http.MethodPatch, "/v1/topics/a..b", `{"max_attempts": 2}`), http.StatusNotFound, "not_found", "")

	// A topic with jobs and no configuration gets one.
	b.push(t, `{"topic":"plain","body":1}`)
	res = b.do(t, http.MethodPatch, "/v1/topics/plain", `{"max_attempts": 2}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, true, res.object(t)["configured"])
	require.Equal(t, float64(2), res.object(t)["max_attempts"])
}
