package main

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/breaker"
)

func TestBreakerFlags(t *testing.T) {
	t.Parallel()
	res := runApp(t, map[string]string{"DELAYQ_BREAKER_OPEN_TIMEOUT": "30s"}, "", "serve",
		"--breaker-failures", "0", "--breaker-failure-ratio", "0.5", "--breaker-min-requests", "10",
		"--breaker-window", "1m", "--breaker-half-open-requests", "3", "--breaker-call-timeout", "2s",
		"--breaker-endpoint-failures", "7", "--breaker-endpoint-open-timeout", "1m")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, breakerFlags{
		Failures: 0, FailureRatio: 0.5, MinRequests: 10, Window: time.Minute, OpenTimeout: 30 * time.Second,
		HalfOpenRequests: 3, CallTimeout: 2 * time.Second, EndpointFailures: 7, EndpointOpenTimeout: time.Minute,
	}, res.cfg.Breaker)
	cfg, err := res.cfg.Breaker.store(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, -1, cfg.ConsecutiveFailures, "0 turns the rule off")
	require.Equal(t, 0.5, cfg.FailureRatio)

	for _, bad := range [][]string{
		{"--breaker-failure-ratio", "1.5"},
		{"--breaker-failures", "-1"},
		{"--breaker-open-timeout", "0s"},
		{"--breaker-half-open-requests", "0"},
	} {
		res := runApp(t, nil, "", append([]string{"serve"}, bad...)...)
		require.Equal(t, exitUsage, res.code, "%v", bad)
		require.Contains(t, res.stderr, bad[0])
	}
	off := defaultBreakerFlags()
	off.Failures = 0
	_, err = off.store(slog.New(slog.DiscardHandler))
	require.Error(t, err)
	require.Contains(t, err.Error(), "--breaker-failure-ratio")
	def := defaultBreakerFlags()
	cfg, err = def.store(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, breaker.ConsecutiveFailuresDefault, cfg.ConsecutiveFailures)
}

// TestE2EMetrics runs the binary and reads /metrics after a push.
func TestE2EMetrics(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off")
	api := newCaller(t, srv.HTTPURL)
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.metrics", "body": 1}, http.StatusCreated, nil)
	claimed := api.claim("e2e.metrics", 1, 5*time.Second)
	require.Len(t, claimed, 1)
	// Counts come from the last topic listing (the engine lists every 2s);
	// listing now makes it current.
	api.callJSON(http.MethodGet, "/v1/topics", nil, http.StatusOK, nil)
	resp, err := http.Get(srv.HTTPURL + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text := string(body)
	for _, want := range []string{
		`delayq_intake_jobs_total{outcome="accepted",queue="e2e.metrics",transport="http"} 1`,
		`delayq_lateness_seconds_count{queue="e2e.metrics",transport="http"} 1`,
		`delayq_breaker_state 0`,
		`delayq_jobs{queue="e2e.metrics",state="reserved"}`,
		`go_goroutines`,
	} {
		require.True(t, strings.Contains(text, want), "/metrics lacks %s:\n%s", want, text)
	}
	// Acknowledged, so that the shutdown's drain has nothing to wait for.
	status, answer := api.call(http.MethodPost, "/v1/jobs/"+claimed[0].ID+"/ack", map[string]any{"lease": claimed[0].Lease})
	require.Equal(t, http.StatusNoContent, status, "%s", answer)
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 10*time.Second))
}

// TestE2EMetricsAuthTopics: with --metrics-auth, an admin token restricted
// to topics reads only its topics' series from /metrics, without the
// instance-wide ones; an admin token for every topic reads them all.
func TestE2EMetricsAuthTopics(t *testing.T) {
	t.Parallel()
	const opsSecret, ordersSecret = "metrics-ops-secret-0123456789", "metrics-orders-secret-0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte("- name: ops\n  token: "+opsSecret+"\n  scopes: [admin]\n"+
		"- name: orders-admin\n  token: "+ordersSecret+"\n  scopes: [admin]\n  topics: [\"orders.>\"]\n"), 0o600))
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off", "--tokens-file", tokens, "--metrics-auth")
	client := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	do := func(method, path, secret, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.HTTPURL+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	for _, topic := range []string{"orders.close", "mail.send"} {
		status, answer := do(http.MethodPost, "/v1/jobs", opsSecret, `{"topic":"`+topic+`","delay":"1h"}`)
		require.Equal(t, http.StatusCreated, status, answer)
	}
	status, _ := do(http.MethodGet, "/metrics", "", "")
	require.Equal(t, http.StatusUnauthorized, status)

	status, text := do(http.MethodGet, "/metrics", opsSecret, "")
	require.Equal(t, http.StatusOK, status)
	for _, want := range []string{`queue="orders.close"`, `queue="mail.send"`, "go_goroutines", "delayq_breaker_state"} {
		require.Contains(t, text, want)
	}

	status, text = do(http.MethodGet, "/metrics", ordersSecret, "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, text, `delayq_intake_jobs_total{outcome="accepted",queue="orders.close",transport="http"} 1`)
	for _, absent := range []string{"mail.send", "go_goroutines", "process_", "delayq_breaker_state"} {
		require.NotContains(t, text, absent, "a restricted token sees only its topics' series")
	}
	for _, line := range strings.Split(text, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			require.Contains(t, line, `queue="orders.`, "every series is of the token's topics")
		}
	}
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 10*time.Second))
}
