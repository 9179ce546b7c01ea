package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
	"github.com/delayq/delayq/core"
)

// TestE2EJobEventsKill9 acknowledges 200 jobs of a topic with events, on
// the local default and on Redis, kills delayq with SIGKILL right after the
// last ack was answered, and starts it again: every acknowledged job has
// its event on the events topic, once, whether it was made before the kill
// or after the restart (the events follow the store's record of finished
// jobs from a cursor in the store), but on the local store those whose
// ack the kill took back, which are delivered again.
func TestE2EJobEventsKill9(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{backendLocal, backendRedis} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			args := []string{"--backend", backend, "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-listen", "off"}
			if backend == backendRedis {
				redistest.Require(t)
				rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
				require.NoError(t, err)
				t.Cleanup(rs.Kill)
				args = append(args, "--redis-url", rs.URL())
			}
			srv := startServer(t, args...)
			c := newCaller(t, srv.HTTPURL)
			c.callJSON(http.MethodPut, "/v1/topics/orders", map[string]any{"events": map[string]any{"topic": "orders.events", "on": []string{"done"}}}, http.StatusOK, nil)
			const n = 200
			jobs := make([]string, n)
			for i := range jobs {
				jobs[i] = fmt.Sprintf(`{"topic":"orders","body":{"n":%d}}`, i)
			}
			status, answer := c.call(http.MethodPost, "/v1/jobs/batch", json.RawMessage(`{"jobs":[`+strings.Join(jobs, ",")+`]}`))
			require.Equal(t, http.StatusOK, status, "%s", answer)
			acked := map[string]bool{}
			for len(acked) < n {
				ds := c.claim("orders", 100, 5*time.Second)
				require.NotEmpty(t, ds, "claimed only %d", len(acked))
				for i, st := range c.ackAll(ds) {
					require.Equal(t, http.StatusNoContent, st)
					acked[ds[i].ID] = true
				}
			}
			srv.Kill() // SIGKILL, right after the last ack's answer
			srv = startServer(t, args...)
			c = newCaller(t, srv.HTTPURL)

			told := map[string]bool{}
			deadline := time.Now().Add(time.Minute)
			for empty := 0; len(told) < n && empty < 2; {
				require.True(t, time.Now().Before(deadline), "%d events of %d acks", len(told), n)
				ds := c.claim("orders.events", 100, 3*time.Second)
				if len(ds) == 0 {
					empty++ // no more for 3 s
				}
				for _, d := range ds {
					var ev core.Event
					require.NoError(t, json.Unmarshal(d.Body, &ev))
					require.Equal(t, "delayq.job.done", ev.Type)
					require.True(t, acked[ev.Data.ID], "an event of a job not acknowledged: %s", d.Body)
					require.False(t, told[ev.Data.ID], "two events of %s", ev.Data.ID)
					require.Equal(t, core.EventID(ev.Data.ID, core.EventDone, ev.Time), d.ID)
					told[ev.Data.ID] = true
				}
				for _, st := range c.ackAll(ds) {
					require.Equal(t, http.StatusNoContent, st)
				}
			}
			// An acknowledged job without an event is one whose ack the
			// kill took back: the local store syncs acks in the background
			// (docs/backends.md), and the job is delivered again; Redis,
			// which was not killed, lost none.
			for id := range acked {
				if told[id] {
					continue
				}
				require.Equal(t, backendLocal, backend, "job %s acknowledged, no event", id)
				var j struct {
					State string `json:"state"`
				}
				c.callJSON(http.MethodGet, "/v1/jobs/"+id, nil, http.StatusOK, &j)
				require.Contains(t, []string{"ready", "reserved"}, j.State, "job %s acknowledged, no event, and %s", id, j.State)
			}
			t.Logf("%d events of %d acks", len(told), n)
		})
	}
}
