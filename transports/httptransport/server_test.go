package httptransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRouting(t *testing.T) {
	t.Parallel()
	b := setup(t)

	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/"},
		{http.MethodGet, "/v2/jobs"},
		{http.MethodPost, "/v1/jobs/x/explode"},
		{http.MethodGet, "/v1/topics/t/subscribe"},
		{http.MethodGet, "/metrics"},
	} {
		res := b.do(t, tc.method, tc.path, nil)
		requireError(t, res, http.StatusNotFound, "not_found", "")
	}

	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, "/v1/jobs", "POST"},
		{http.MethodPatch, "/v1/jobs/x", "DELETE, GET, HEAD, PUT"},
		{http.MethodGet, "/v1/jobs/x/ack", "POST"},
		{http.MethodPost, "/v1/topics", "GET, HEAD"},
		{http.MethodPost, "/healthz", "GET, HEAD"},
	} {
		res := b.do(t, tc.method, tc.path, nil)
		requireError(t, res, http.StatusMethodNotAllowed, "method_not_allowed", "")
		require.Equal(t, tc.allow, res.header.Get("Allow"))
	}
}

func TestHandle(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.standIns = true })
	b.server.Handle("GET /v1/topics/{topic}/subscribe", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "subscribed to %s", r.PathValue("topic"))
	}))
	b.server.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("# metrics\n"))
	}))

	res := b.do(t, http.MethodGet, "/v1/topics/orders.close/subscribe", nil)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "subscribed to orders.close", string(res.body))
	res = b.do(t, http.MethodGet, "/metrics", nil)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "# metrics\n", string(res.body))
	// The built-in routes around them are unchanged.
	requireError(t, b.do(t, http.MethodGet, "/v1/topics/t/dead?limit=x", nil), http.StatusBadRequest, "invalid_argument", "limit")
	requireError(t, b.do(t, http.MethodPost, "/metrics", nil), http.StatusMethodNotAllowed, "method_not_allowed", "")
}

func TestJobRequestErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)

	for _, tc := range []struct {
		name, body, field string
	}{
		{"Empty", ``, ""},
		{"Malformed", `{"topic":`, ""},
		{"NotJSON", `topic=t`, ""},
		{"NotAnObject", `["t"]`, ""},
		{"Null", `null`, ""},
		{"Trailing", `{"topic":"t"} {"topic":"t"}`, ""},
		{"TrailingGarbage", `{"topic":"t"}]`, ""},
		{"UnknownField", `{"topic":"t","dealy":"1s"}`, "dealy"},
		{"TopicType", `{"topic":5}`, "topic"},
		{"IDType", `{"topic":"t","id":{}}`, "id"},
		{"KeyType", `{"topic":"t","key":[]}`, "key"},
		{"MaxAttemptsType", `{"topic":"t","max_attempts":"3"}`, "max_attempts"},
		{"MaxAttemptsFraction", `{"topic":"t","max_attempts":1.5}`, "max_attempts"},
		{"MaxAttemptsHuge", `{"topic":"t","max_attempts":1e40}`, "max_attempts"},
		{"MaxAttemptsRange", `{"topic":"t","max_attempts":1001}`, "max_attempts"},
		{"MaxAttemptsNegative", `{"topic":"t","max_attempts":-1}`, "max_attempts"},
		{"NoTopic", `{"body":1}`, "topic"},
		{"BadTopic", `{"topic":"orders.*"}`, "topic"},
		{"BadID", `{"topic":"t","id":"a/b"}`, "id"},
		{"BadKey", `{"topic":"t","key":"a\nb"}`, "key"},
		{"DelayWord", `{"topic":"t","delay":"soon"}`, "delay"},
		{"DelayBool", `{"topic":"t","delay":true}`, "delay"},
		{"DelayFraction", `{"topic":"t","delay":1.5}`, "delay"},
		{"DelayExponent", `{"topic":"t","delay":1e3}`, "delay"},
		{"DelayOverflow", `{"topic":"t","delay":99999999999999999999}`, "delay"},
		{"DelayOverflowString", `{"topic":"t","delay":"9999999999h"}`, "delay"},
		{"DelayNegative", `{"topic":"t","delay":"-1s"}`, "delay"},
		{"DelayNegativeMs", `{"topic":"t","delay":-1}`, "delay"},
		{"DelayTooFar", `{"topic":"t","delay":"9000h"}`, "delay"},
		{"DelayAndRunAt", `{"topic":"t","delay":"1s","run_at":"2030-01-01T00:00:00Z"}`, "delay"},
		{"RunAtFormat", `{"topic":"t","run_at":"2030-01-01 00:00:00"}`, "run_at"},
		{"RunAtNoZone", `{"topic":"t","run_at":"2030-01-01T00:00:00"}`, "run_at"},
		{"RunAtExponent", `{"topic":"t","run_at":1.7e9}`, "run_at"},
		{"RunAtBadDay", `{"topic":"t","run_at":"2030-02-30T00:00:00Z"}`, "run_at"},
		{"RunAtTooFar", `{"topic":"t","run_at":"2999-01-01T00:00:00Z"}`, "run_at"},
		{"TTRWord", `{"topic":"t","ttr":"long"}`, "ttr"},
		{"TTRShort", `{"topic":"t","ttr":"500ms"}`, "ttr"},
		{"TTRLong", `{"topic":"t","ttr":"13h"}`, "ttr"},
		{"BodyInvalidUTF8Escape", "{\"topic\":\"t\",\"body\":\"\\ud800\"", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.do(t, http.MethodPost, "/v1/jobs", tc.body)
			requireError(t, res, http.StatusBadRequest, "invalid_argument", tc.field)
			res = b.do(t, http.MethodPut, "/v1/jobs/j", tc.body)
			requireError(t, res, http.StatusBadRequest, "invalid_argument", tc.field)
		})
	}
	// Bad input changed nothing.
	requireNoTopics(t, b)
	requireError(t, b.do(t, http.MethodGet, "/v1/jobs/j", nil), http.StatusNotFound, "not_found", "")
}

func TestSizeLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.limits.MaxBodyBytes = 1000 })

	body := `"` + strings.Repeat("x", 998) + `"`
	b.push(t, `{"topic":"t","body":`+body+`}`)

	// A body over the engine's limit, in a request the server reads.
	res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t","body":"`+strings.Repeat("x", 1000)+`"}`)
	requireError(t, res, http.StatusRequestEntityTooLarge, "too_large", "body")
	res = b.do(t, http.MethodPut, "/v1/jobs/big", `{"topic":"t","body":"`+strings.Repeat("x", 1000)+`"}`)
	requireError(t, res, http.StatusRequestEntityTooLarge, "too_large", "body")

	// A request over the body limit plus the envelope's room is cut off
	// while it is read.
	huge := `{"topic":"t","body":"` + strings.Repeat("x", 1000+64<<10) + `"}`
	res = b.do(t, http.MethodPost, "/v1/jobs", huge)
	requireError(t, res, http.StatusRequestEntityTooLarge, "too_large", "")
	res = b.do(t, http.MethodPost, "/v1/topics/t/claim", `{"max":1,"wait":"`+strings.Repeat("1", 300<<10)+`ms"}`)
	requireError(t, res, http.StatusRequestEntityTooLarge, "too_large", "")
	res = b.do(t, http.MethodPost, "/v1/jobs/x/nack", `{"lease":"l","error":"`+strings.Repeat("e", 300<<10)+`"}`)
	requireError(t, res, http.StatusRequestEntityTooLarge, "too_large", "")

	// A batch job over the limit fails on its own.
	res = b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"t","body":"`+strings.Repeat("x", 1000)+`"},{"topic":"t"}]}`)
	requireStatus(t, res, http.StatusOK)
	m := res.object(t)
	results := m["results"].([]any)
	require.Equal(t, "too_large", results[0].(map[string]any)["error"].(map[string]any)["code"])
	require.Equal(t, "body", results[0].(map[string]any)["error"].(map[string]any)["field"])
	require.Equal(t, "ready", results[1].(map[string]any)["state"])

	topic, err := b.engine.GetTopic(t.Context(), "t")
	require.NoError(t, err)
	require.Equal(t, int64(2), topic.Counts.Ready)
}

func TestServerErrors(t *testing.T) {
	t.Parallel()

	t.Run("Unavailable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.push(t, `{"topic":"t"}`)
		b.down.mode.Store(modeUnavailable)
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t"}`), http.StatusServiceUnavailable, "unavailable", "")
		requireError(t, b.do(t, http.MethodGet, "/v1/jobs/"+id, nil), http.StatusServiceUnavailable, "unavailable", "")
		requireError(t, b.do(t, http.MethodGet, "/v1/topics", nil), http.StatusServiceUnavailable, "unavailable", "")
		requireError(t, b.do(t, http.MethodGet, "/readyz", nil), http.StatusServiceUnavailable, "unavailable", "")
		requireStatus(t, b.do(t, http.MethodGet, "/healthz", nil), http.StatusOK)

		b.down.mode.Store(modeUp)
		requireStatus(t, b.do(t, http.MethodGet, "/v1/jobs/"+id, nil), http.StatusOK)
	})

	t.Run("Internal", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.down.mode.Store(modeBroken)
		for _, res := range []*response{
			b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"t"}`),
			b.do(t, http.MethodGet, "/v1/jobs/x", nil),
			b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"t"}]}`),
		} {
			m := requireError(t, res, http.StatusInternalServerError, "internal", "")
			require.Equal(t, "internal error", m["error"].(map[string]any)["message"])
			require.NotContains(t, string(res.body), "10.0.0.7")
		}
		res := b.do(t, http.MethodGet, "/readyz", nil)
		requireError(t, res, http.StatusServiceUnavailable, "unavailable", "")
		require.NotContains(t, string(res.body), "10.0.0.7")
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodGet, "/healthz", nil)
	requireStatus(t, res, http.StatusOK)
	require.JSONEq(t, `{"status":"ok"}`, string(res.body))
	res = b.do(t, http.MethodGet, "/readyz", nil)
	requireStatus(t, res, http.StatusOK)
	require.JSONEq(t, `{"status":"ready"}`, string(res.body))
}

// TestVersion: GET /v1/version answers the binary's build (here the test
// binary's, whose Go version the toolchain stamps), and needs a valid
// token once tokens are configured.
func TestVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodGet, "/v1/version", nil)
	requireStatus(t, res, http.StatusOK)
	var v struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
	}
	require.NoError(t, json.Unmarshal(res.body, &v))
	require.Equal(t, runtime.Version(), v.GoVersion)
	require.NotEmpty(t, v.Version)

	a, _ := setupAuth(t)
	requireError(t, a.do(t, http.MethodGet, "/v1/version", nil), http.StatusUnauthorized, "unauthenticated", "")
	requireStatus(t, a.do(t, http.MethodGet, "/v1/version", nil, bearer(pushSecret)...), http.StatusOK)
}
