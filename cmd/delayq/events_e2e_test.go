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

// TestE2EJobEventsKill9 acknowledges 200 jobs of a topic with events, each
// with a next step (then), on the local default and on Redis, kills delayq
// with SIGKILL right after the last ack was answered, and starts it again:
// every acknowledged job has its event on the events topic and its step on
// the step's topic, once each, whether made before the kill or after the
// restart (both follow the store's record of finished jobs from a cursor
// in the store), but on the local store those whose ack the kill took
// back, which are delivered again.
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
				jobs[i] = fmt.Sprintf(`{"topic":"orders","body":{"n":%d},"then":{"topic":"orders.next","body":{"n":%[1]d}}}`, i)
			}
			status, answer := c.call(http.MethodPost, "/v1/jobs/batch", json.RawMessage(`{"jobs":[`+strings.Join(jobs, ",")+`]}`))
			require.Equal(t, http.StatusOK, status, "%s", answer)
			var pushed struct {
				Results []struct {
					ID string `json:"id"`
				} `json:"results"`
			}
			require.NoError(t, json.Unmarshal(answer, &pushed))
			require.Len(t, pushed.Results, n)
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

			told := map[string]time.Time{} // acked job: its finish, as its event says
			stepped := map[string]string{} // acked job: the id of its step
			deadline := time.Now().Add(time.Minute)
			for empty := 0; (len(told) < n || len(stepped) < n) && empty < 2; {
				require.True(t, time.Now().Before(deadline), "%d events and %d steps of %d acks", len(told), len(stepped), n)
				ds := c.claim("orders.events", 100, 1500*time.Millisecond)
				steps := c.claim("orders.next", 100, 1500*time.Millisecond)
				if len(ds)+len(steps) == 0 {
					empty++ // no more for 3 s
				}
				for _, d := range ds {
					var ev core.Event
					require.NoError(t, json.Unmarshal(d.Body, &ev))
					require.Equal(t, "delayq.job.done", ev.Type)
					require.True(t, acked[ev.Data.ID], "an event of a job not acknowledged: %s", d.Body)
					_, twice := told[ev.Data.ID]
					require.False(t, twice, "two events of %s", ev.Data.ID)
					require.Equal(t, core.EventID(ev.Data.ID, core.EventDone, ev.Time), d.ID)
					told[ev.Data.ID] = ev.Time
				}
				for _, d := range steps {
					var body struct{ N int }
					require.NoError(t, json.Unmarshal(d.Body, &body))
					parent := pushed.Results[body.N].ID
					require.True(t, acked[parent], "a step of a job not acknowledged: %s", parent)
					_, twice := stepped[parent]
					require.False(t, twice, "two steps of %s", parent)
					stepped[parent] = d.ID
				}
				for _, st := range c.ackAll(append(ds, steps...)) {
					require.Equal(t, http.StatusNoContent, st)
				}
			}
			// Each finish told made its step, under the id derived from it.
			for id, at := range told {
				require.Equal(t, core.ChainID(id, at), stepped[id], "the step of %s", id)
			}
			require.Len(t, stepped, len(told), "steps and events of the same acks")
			// An acknowledged job without an event is one whose ack the
			// kill took back: the local store syncs acks in the background
			// (docs/backends.md), and the job is delivered again; Redis,
			// which was not killed, lost none.
			for id := range acked {
				if _, ok := told[id]; ok {
					continue
				}
				require.Equal(t, backendLocal, backend, "job %s acknowledged, no event", id)
				var j struct {
					State string `json:"state"`
				}
				c.callJSON(http.MethodGet, "/v1/jobs/"+id, nil, http.StatusOK, &j)
				require.Contains(t, []string{"ready", "reserved"}, j.State, "job %s acknowledged, no event, and %s", id, j.State)
			}
			t.Logf("%d events and %d steps of %d acks", len(told), len(stepped), n)
		})
	}
}
