package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestE2EDrain shuts the service down with a webhook delivery in flight
// and a pull consumer holding a lease: while it drains, /readyz answers
// 503 and claims are refused, but reads, pushes and the consumer's ack are
// served; the webhook delivery finishes rather than being released; then
// the service exits 0, and after a restart nothing was delivered twice.
func TestE2EDrain(t *testing.T) {
	t.Parallel()
	arrived := make(chan string, 10)
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("Delayq-Id")
		<-release // the endpoint is slow: the drain must wait for it
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hook.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	args := append(defaultArgs(t.TempDir()), "--drain-timeout", "30s", "--shutdown-timeout", "60s")
	srv := startServer(t, args...)
	api := newCaller(t, srv.HTTPURL)
	status, answer := api.call(http.MethodPut, "/v1/topics/e2e.hooks", map[string]any{"delivery": map[string]any{"type": "webhook", "url": hook.URL}})
	require.Equal(t, http.StatusOK, status, "%s", answer)
	var hooked, pulled struct{ ID string }
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.hooks", "body": 1}, http.StatusCreated, &hooked)
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.pull", "body": 2}, http.StatusCreated, &pulled)
	held := api.claim("e2e.pull", 1, 5*time.Second)
	require.Len(t, held, 1)
	select {
	case id := <-arrived:
		require.Equal(t, hooked.ID, id)
	case <-time.After(20 * time.Second):
		t.Fatal("the webhook delivery did not start")
	}

	require.NoError(t, srv.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool {
		status, _ := api.call(http.MethodGet, "/readyz", nil)
		return status == http.StatusServiceUnavailable
	}, 10*time.Second, 20*time.Millisecond, "/readyz says it drains")
	status, answer = api.call(http.MethodGet, "/readyz", nil)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Contains(t, string(answer), "draining")
	status, answer = api.call(http.MethodPost, "/v1/topics/e2e.pull/claim", map[string]any{"max": 1})
	require.Equal(t, http.StatusServiceUnavailable, status, "%s", answer)
	require.Contains(t, string(answer), "draining")

	// Everything else is served: a read, a push, the held delivery's ack.
	var job struct{ State string }
	api.callJSON(http.MethodGet, "/v1/jobs/"+hooked.ID, nil, http.StatusOK, &job)
	require.Equal(t, "reserved", job.State, "the webhook delivery is in flight")
	var late struct{ ID string }
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.pull", "body": 3, "delay": "1h"}, http.StatusCreated, &late)
	status, answer = api.call(http.MethodPost, "/v1/jobs/"+pulled.ID+"/ack", map[string]any{"lease": held[0].Lease})
	require.Equal(t, http.StatusNoContent, status, "%s", answer)

	// The webhook answers: its delivery ends done, and the service exits.
	close(release)
	select {
	case <-srv.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not exit after the drain")
	}
	require.NoError(t, srv.Err())
	log := srv.log()
	require.Contains(t, log, `msg=draining`)
	require.Contains(t, log, `msg=drained`)
	require.NotContains(t, log, "released for redelivery")

	srv = startServer(t, args...)
	api = newCaller(t, srv.HTTPURL)
	for id, want := range map[string]string{hooked.ID: "done", pulled.ID: "done", late.ID: "scheduled"} {
		var j struct {
			State   string
			Attempt int
		}
		api.callJSON(http.MethodGet, "/v1/jobs/"+id, nil, http.StatusOK, &j)
		require.Equal(t, want, j.State, id)
		require.LessOrEqual(t, j.Attempt, 1, "%s delivered once", id)
	}
	select {
	case id := <-arrived:
		t.Fatalf("job %s was delivered again", id)
	default:
	}
}

// TestE2EInterruptSaysWhatItWaitsFor: the first SIGINT of serve logs what
// the shutdown waits for (the drain, with the consumers' unacked leases)
// and that a second Ctrl-C stops at once; the second SIGINT does, long
// before the drain would have ended, and the job held comes back when its
// lease runs out.
func TestE2EInterruptSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	args := append(defaultArgs(t.TempDir()), "--drain-timeout", "5m", "--shutdown-timeout", "10m")
	srv := startServer(t, args...)
	api := newCaller(t, srv.HTTPURL)
	var pushed struct{ ID string }
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.held", "body": 1, "ttr": "1s"}, http.StatusCreated, &pushed)
	require.Len(t, api.claim("e2e.held", 1, 5*time.Second), 1)

	require.NoError(t, srv.Signal(syscall.SIGINT))
	require.Eventually(t, func() bool { return strings.Contains(srv.log(), "unacked_leases=1") }, 20*time.Second, 20*time.Millisecond, srv.log())
	log := srv.log()
	require.Contains(t, log, "draining for up to 5m0s while consumers settle 1 unacked leases")
	require.Contains(t, log, "a second Ctrl-C (SIGINT or SIGTERM) stops at once")
	require.Contains(t, log, "drain_timeout=5m0s")

	// Once the message is out, the default handling is back: the second
	// SIGINT ends the process, without the 5 minutes of the drain.
	require.NoError(t, srv.Signal(syscall.SIGINT))
	select {
	case <-srv.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a second SIGINT did not stop the service")
	}
	require.Error(t, srv.Err(), "ended by the signal")
	require.NotContains(t, srv.log(), "msg=drained")

	srv = startServer(t, args...)
	api = newCaller(t, srv.HTTPURL)
	held := api.claim("e2e.held", 1, 20*time.Second)
	require.Len(t, held, 1, "delivered again once its lease ran out")
	require.Equal(t, pushed.ID, held[0].ID)
}
