package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
	"github.com/delayq/delayq/core"
)

// TestE2ESchedules runs a per-second schedule on the default backend and
// on Redis through the CLI: its slots arrive as jobs, once each, across a
// restart (the schedule and its cursor are kept); get and list show the
// last slot; /metrics counts the slots; bad input exits non-zero; delete
// stops it.
func TestE2ESchedules(t *testing.T) {
	t.Parallel()
	t.Run("Local", func(t *testing.T) {
		t.Parallel()
		testSchedules(t, defaultArgs(t.TempDir()))
	})
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		redistest.Require(t)
		rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
		require.NoError(t, err)
		t.Cleanup(rs.Kill)
		testSchedules(t, []string{"--backend", "redis", "--redis-url", rs.URL(), "--http", "127.0.0.1:0", "--nats-listen", "off"})
	})
}

func testSchedules(t *testing.T, args []string) {
	srv := startServer(t, args...)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLIWith(t, []string{"DELAYQ_SERVER=" + srv.HTTPURL}, "", args...)
	}
	code, out, stderr := run("schedule", "put", "tick", `{"cron": "* * * * * *", "topic": "ticks", "job": {"body": {"tick": true}}}`, "--next", "2")
	require.Equal(t, exitOK, code, stderr)
	var put map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &put), out)
	require.Len(t, put["next_runs"], 2)

	seen := map[string]bool{}
	collect := func(n int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for len(seen) < n && time.Now().Before(deadline) {
			code, out, stderr := run("claim", "ticks", "--max", "100", "--wait", "2s")
			require.Equal(t, exitOK, code, stderr)
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if line == "" {
					continue
				}
				d := printed(t, line)
				runAt, err := time.Parse(time.RFC3339Nano, d.RunAt)
				require.NoError(t, err)
				require.Equal(t, core.ScheduleID("tick", runAt), d.ID)
				require.Equal(t, runAt.Truncate(time.Second), runAt, "a whole second")
				require.JSONEq(t, `{"tick":true}`, string(d.Body))
				require.False(t, seen[d.ID], "slot %s twice", d.RunAt)
				seen[d.ID] = true
				code, _, stderr := run("ack", d.ID, d.Lease)
				require.Equal(t, exitOK, code, stderr)
			}
		}
		require.GreaterOrEqual(t, len(seen), n)
	}
	collect(3)

	resp, err := http.Get(srv.HTTPURL + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metrics), `delayq_schedule_slots_fired_total{`)
	require.Contains(t, string(metrics), "\ndelayq_schedules 1\n")

	// A restart keeps the schedule and its cursor: no slot again.
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 30*time.Second))
	srv = startServer(t, args...)
	collect(len(seen) + 2)

	code, out, stderr = run("schedule", "list", "--next", "0")
	require.Equal(t, exitOK, code, stderr)
	var list struct {
		Schedules []map[string]any `json:"schedules"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	require.Len(t, list.Schedules, 1)
	require.NotNil(t, list.Schedules[0]["last_slot"])
	require.Empty(t, list.Schedules[0]["next_runs"])

	code, _, stderr = run("schedule", "put", "bad", `{"cron": "every day", "topic": "ticks"}`)
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "cron")
	code, _, stderr = run("schedule", "get", "bad")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "not found")

	// Run by hand: one job of the template now, with an id of its own.
	code, out, stderr = run("schedule", "run", "tick")
	require.Equal(t, exitOK, code, stderr)
	var pushed struct{ ID, Topic string }
	require.NoError(t, json.Unmarshal([]byte(out), &pushed), out)
	require.Equal(t, "ticks", pushed.Topic)
	require.False(t, strings.HasPrefix(pushed.ID, "s-"), "not a slot's id: %s", pushed.ID)
	code, _, stderr = run("schedule", "run", "bad")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "not found")

	code, _, stderr = run("schedule", "delete", "tick")
	require.Equal(t, exitOK, code, stderr)
	code, _, _ = run("schedule", "get", "tick")
	require.Equal(t, exitError, code)
}
