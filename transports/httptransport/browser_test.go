package httptransport_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/transports/httptransport"
)

// TestContentType checks that a body must be JSON (NDJSON for import): a
// form or text/plain body, which a browser sends cross-site without asking,
// gets 415 and changes nothing; JSON with parameters and an empty body
// without a type are served.
func TestContentType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	job := `{"topic":"q","id":"j-1"}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/x-ndjson"} {
		res := b.do(t, http.MethodPost, "/v1/jobs", job, "Content-Type", ct)
		m := requireError(t, res, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
		require.Contains(t, m["error"].(map[string]any)["message"], "-H 'Content-Type: application/json'")
	}
	// No type with a body: curl -d without -H sends a form type, but a
	// program may send none.
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", job, "Content-Type", ""), http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	requireError(t, b.do(t, http.MethodPut, "/v1/topics/q", `{"max_attempts":3}`, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/topics/q/claim", `{"max":1}`, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/import", `{"id":"i-1","topic":"q","state":"ready"}`, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	require.Zero(t, storeLen(t, b.store))

	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", job, "Content-Type", "application/json; charset=utf-8"), http.StatusCreated)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"q"}]}`, "Content-Type", "Application/JSON"), http.StatusOK)
	// An empty body without a type, as curl -XPOST sends.
	requireStatus(t, b.do(t, http.MethodPost, "/v1/topics/q/claim", nil), http.StatusOK)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/import", "", "Content-Type", "application/x-ndjson"), http.StatusOK)
	require.Equal(t, 2, storeLen(t, b.store))
}

// TestCrossOriginProtection checks that a browser's cross-site POST is
// refused with 403 whatever its content type, that requests without Origin
// (curl, programs) and from trusted origins are served, and that reads stay
// open to cross-site GETs (a browser does not let the page read them).
func TestCrossOriginProtection(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.trustedOrigins = []string{"https://app.example.com"} })
	job := `{"topic":"q"}`
	for _, h := range [][]string{
		{"Origin", "https://evil.example", "Content-Type", "text/plain"},
		{"Origin", "https://evil.example"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site", "Origin", "https://sub.evil.example"},
	} {
		res := b.do(t, http.MethodPost, "/v1/jobs", job, h...)
		m := requireError(t, res, http.StatusForbidden, "permission_denied", "")
		require.Contains(t, m["error"].(map[string]any)["message"], "cross-origin")
	}
	requireError(t, b.do(t, http.MethodDelete, "/v1/topics/q", nil, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden, "permission_denied", "")
	require.Zero(t, storeLen(t, b.store))

	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", job), http.StatusCreated)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", job, "Origin", "https://app.example.com", "Sec-Fetch-Site", "cross-site"), http.StatusCreated)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", job, "Sec-Fetch-Site", "same-origin"), http.StatusCreated)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", job, "Origin", b.srv.URL), http.StatusCreated)
	requireStatus(t, b.do(t, http.MethodGet, "/v1/topics", nil, "Sec-Fetch-Site", "cross-site"), http.StatusOK)
	require.Equal(t, 4, storeLen(t, b.store))
}

// TestHostCheck checks the Host header: on a loopback connection without
// AllowedHosts, only loopback names and addresses are served (so a DNS
// rebinding name is refused 421), except the health probes; with
// AllowedHosts, only the hosts they match.
func TestHostCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, `{"topic":"q","id":"secret-1"}`)
	res := b.do(t, http.MethodGet, "/v1/export", nil, "Host", "attacker-rebind.example")
	m := requireError(t, res, http.StatusMisdirectedRequest, "misdirected_request", "")
	require.Contains(t, m["error"].(map[string]any)["message"], "--allowed-hosts")
	require.NotContains(t, string(res.body), "secret-1")
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"q"}`, "Host", "attacker-rebind.example:8080"), http.StatusMisdirectedRequest, "misdirected_request", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/jobs/secret-1", nil, "Host", "10.0.0.1"), http.StatusMisdirectedRequest, "misdirected_request", "")
	require.Equal(t, 1, storeLen(t, b.store))

	for _, host := range []string{"localhost", "localhost:8080", "LOCALHOST.", "127.0.0.1", "127.1.2.3:80", "[::1]:8080", "[::1]"} {
		res := b.do(t, http.MethodGet, "/v1/export", nil, "Host", host)
		requireStatus(t, res, http.StatusOK)
		require.Contains(t, string(res.body), "secret-1", "host %s", host)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		requireStatus(t, b.do(t, http.MethodGet, path, nil, "Host", "10.1.2.3:8080"), http.StatusOK)
	}

	named := setup(t, func(c *setupConfig) { c.allowedHosts = []string{"queue.example.com", "*.internal.example"} })
	for host, want := range map[string]int{
		"queue.example.com":        http.StatusOK,
		"queue.example.com:8443":   http.StatusOK,
		"a.b.internal.example":     http.StatusOK,
		"internal.example":         http.StatusMisdirectedRequest,
		"localhost":                http.StatusMisdirectedRequest,
		"attacker-rebind.example":  http.StatusMisdirectedRequest,
		"queue.example.com.evil.x": http.StatusMisdirectedRequest,
	} {
		res := named.do(t, http.MethodGet, "/v1/topics", nil, "Host", host)
		require.Equal(t, want, res.status, "host %s: %s", host, res.body)
		if want != http.StatusOK {
			require.True(t, strings.Contains(string(res.body), "misdirected_request"), "host %s: %s", host, res.body)
		}
	}
}

// TestRequireHost checks the Host check given to listeners of their own
// (the profiling endpoints'): as the API's, a foreign name on a loopback
// connection gets 421 with the JSON error body and never reaches the
// handler, and --allowed-hosts names what is served.
func TestRequireHost(t *testing.T) {
	t.Parallel()
	var served atomic.Int32
	inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, "secret")
	})
	get := func(t *testing.T, h http.Handler, host string) (int, string, string) {
		t.Helper()
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/debug/pprof/cmdline", nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}

	loopback, err := httptransport.RequireHost(nil, inner)
	require.NoError(t, err)
	for _, host := range []string{"attacker-rebind.example", "attacker-rebind.example:6060", "10.0.0.1"} {
		status, ct, body := get(t, loopback, host)
		require.Equal(t, http.StatusMisdirectedRequest, status, host)
		require.Equal(t, "application/json", ct)
		require.Contains(t, body, `"code":"misdirected_request"`)
		require.NotContains(t, body, "secret")
	}
	require.Zero(t, served.Load(), "refused requests never reach the handler")
	for _, host := range []string{"localhost:6060", "127.0.0.1", "[::1]:6060"} {
		status, _, body := get(t, loopback, host)
		require.Equal(t, http.StatusOK, status, host)
		require.Equal(t, "secret", body)
	}

	named, err := httptransport.RequireHost([]string{"*.internal.example"}, inner)
	require.NoError(t, err)
	status, _, _ := get(t, named, "pprof.internal.example:6060")
	require.Equal(t, http.StatusOK, status)
	status, _, _ = get(t, named, "localhost")
	require.Equal(t, http.StatusMisdirectedRequest, status, "an allow list names every host served")

	_, err = httptransport.RequireHost([]string{"a.example:80"}, inner)
	require.ErrorContains(t, err, "without port")
}
