package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
)

// metricsOf returns the text of srv's /metrics.
func metricsOf(t *testing.T, srv *serverProc) string {
	t.Helper()
	resp, err := http.Get(srv.HTTPURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestE2ERoles runs delayq as two processes on one Redis (--roles): one
// with the api role alone takes the pushes and the schedule; one with
// deliver and schedules delivers the jobs to a webhook and fires the
// schedule. The api instance delivers nothing and fires nothing (its
// metrics count no attempt and no slot), and the other answers only its
// health, readiness and metrics. A partial --roles on the local backend
// is refused.
func TestE2ERoles(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, "serve", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-listen", "off", "--roles", "api")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--roles api leaves deliver,schedules to other instances")
	code, _, stderr = runCLI(t, "serve", "--backend", "memory", "--roles", "api,gateway")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, `not "gateway"`)

	redistest.Require(t)
	rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(rs.Kill)
	delivered := make(chan string, 100)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		delivered <- r.Header.Get("Delayq-Id")
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	common := []string{"--backend", "redis", "--redis-url", rs.URL(), "--http", "127.0.0.1:0", "--nats-listen", "off"}
	apiSrv := startServer(t, append(common, "--roles", "api")...)
	workSrv := startServer(t, append(common, "--roles", "deliver,schedules")...)
	api := newCaller(t, apiSrv.HTTPURL)
	work := newCaller(t, workSrv.HTTPURL)

	api.callJSON(http.MethodPut, "/v1/topics/hooked", map[string]any{"delivery": map[string]any{"type": "webhook", "url": hook.URL}}, http.StatusOK, nil)
	api.callJSON(http.MethodPut, "/v1/schedules/tick", map[string]any{"cron": "* * * * * *", "topic": "ticks", "job": map[string]any{"body": 1}}, http.StatusOK, nil)
	want := map[string]bool{}
	for range 5 {
		var job struct {
			ID string `json:"id"`
		}
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "hooked", "body": 1}, http.StatusCreated, &job)
		want[job.ID] = true
	}
	got := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case id := <-delivered:
			require.True(t, want[id], "delivered %q, not pushed", id)
			got[id] = true
		case <-timeout:
			t.Fatalf("delivered %d of %d:\n%s", len(got), len(want), workSrv.log())
		}
	}
	// The schedule fires, through the other instance: its jobs wait on
	// topic ticks for a pull claim, which the api instance serves.
	require.Eventually(t, func() bool {
		var c struct {
			Jobs []map[string]any `json:"jobs"`
		}
		api.callJSON(http.MethodPost, "/v1/topics/ticks/claim", map[string]any{"max": 1}, http.StatusOK, &c)
		return len(c.Jobs) == 1
	}, 30*time.Second, 100*time.Millisecond, "a slot's job")

	apiMetrics, workMetrics := metricsOf(t, apiSrv), metricsOf(t, workSrv)
	require.Contains(t, workMetrics, `delayq_attempts_total{outcome="ok",queue="hooked",transport="webhook"} 5`)
	require.NotContains(t, apiMetrics, `queue="hooked",transport="webhook"`, "the api instance delivered nothing")
	require.Contains(t, workMetrics, `delayq_schedule_slots_fired_total{schedule="tick"}`)
	require.NotContains(t, apiMetrics, `delayq_schedule_slots_fired_total{schedule="tick"}`, "the api instance fired nothing")

	status, answer := work.call(http.MethodPost, "/v1/jobs", map[string]any{"topic": "hooked", "body": 1})
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, string(answer), "serves no API")
	status, _ = work.call(http.MethodGet, "/readyz", nil)
	require.Equal(t, http.StatusOK, status)
	require.True(t, strings.Contains(workSrv.log(), "no api role"), workSrv.log())
}
