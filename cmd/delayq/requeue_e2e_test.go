package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/client"
)

// TestClientRequeueByFilter: `delayq requeue --error-contains TEXT TOPIC`
// requeues only the topic's dead jobs whose last error contains TEXT,
// `--all TOPIC` the rest, and `requeue ID` one job, against a real server;
// `cancel` with a filter cancels the scheduled jobs it matches.
func TestClientRequeueByFilter(t *testing.T) {
	t.Parallel()
	run := cliOf(t, startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off"))
	state := func(id string) string {
		t.Helper()
		code, out, stderr := run("get", id, "--output", "table")
		require.Equal(t, exitOK, code, stderr)
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "state" {
				return f[1]
			}
		}
		t.Fatalf("no state row in %q", out)
		return ""
	}
	// Five jobs die on their only attempt: three of a 503, two of a
	// timeout; one of another topic dies of a 503 too.
	reasons := map[string]string{"a": "upstream 503", "b": "upstream 503", "c": "upstream 503", "d": "timeout", "e": "timeout"}
	for id := range reasons {
		code, _, stderr := run("push", "rq", "--id", id, "--max-attempts", "1")
		require.Equal(t, exitOK, code, stderr)
	}
	code, _, stderr := run("push", "rq.other", "--id", "z", "--max-attempts", "1")
	require.Equal(t, exitOK, code, stderr)
	for topic, n := range map[string]int{"rq": 5, "rq.other": 1} {
		code, out, stderr := run("claim", topic, "--max", "10", "--wait", "5s")
		require.Equal(t, exitOK, code, stderr)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, n, out)
		for _, line := range lines {
			d := printed(t, line)
			reason := reasons[d.ID]
			if d.ID == "z" {
				reason = "upstream 503"
			}
			code, _, stderr := run("nack", d.ID, d.Lease, "--error", reason)
			require.Equal(t, exitOK, code, stderr)
		}
	}
	for _, id := range []string{"a", "b", "c", "d", "e", "z"} {
		require.Equal(t, "dead", state(id), id)
	}

	// The answer of the route, sample aside.
	counted := func(out string) (int, bool) {
		t.Helper()
		var v struct {
			Count  int          `json:"count"`
			DryRun bool         `json:"dry_run"`
			Sample []client.Job `json:"sample"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &v), out)
		require.Len(t, v.Sample, v.Count, "fewer than 10: each in the sample")
		return v.Count, v.DryRun
	}
	code, out, stderr := run("requeue", "--error-contains", "503", "--dry-run", "rq")
	require.Equal(t, exitOK, code, stderr)
	n, dry := counted(out)
	require.Equal(t, 3, n)
	require.True(t, dry)
	require.Equal(t, "dead", state("a"), "a dry run changes nothing")

	code, out, stderr = run("requeue", "--error-contains", "503", "rq")
	require.Equal(t, exitOK, code, stderr)
	n, dry = counted(out)
	require.Equal(t, 3, n)
	require.False(t, dry)
	for id, want := range map[string]string{"a": "ready", "b": "ready", "c": "ready", "d": "dead", "e": "dead", "z": "dead"} {
		require.Equal(t, want, state(id), id)
	}

	// Nothing left to match: none requeued, exit 0.
	code, out, stderr = run("requeue", "--error-contains", "503", "rq", "--output", "table")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^count\s+0$`, out)

	code, out, stderr = run("requeue", "--all", "rq")
	require.Equal(t, exitOK, code, stderr)
	n, _ = counted(out)
	require.Equal(t, 2, n)
	require.Equal(t, "ready", state("d"))
	require.Equal(t, "ready", state("e"))
	require.Equal(t, "dead", state("z"), "another topic's dead job stays")

	code, out, stderr = run("requeue", "z")
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, out)
	require.Equal(t, "ready", state("z"))

	code, _, stderr = run("requeue", "--all", "--error-contains", "x", "rq")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "exclusive")
	code, _, stderr = run("requeue", "--all", "--since", "yesterday", "rq")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "invalid --since")

	// Cancel by filter: the scheduled jobs with run_at before --until.
	for _, delay := range []string{"1h", "2h", "3h"} {
		code, _, stderr := run("push", "rq.c", "--delay", delay)
		require.Equal(t, exitOK, code, stderr)
	}
	until := time.Now().Add(150 * time.Minute).UTC().Format(time.RFC3339)
	code, out, stderr = run("cancel", "--state", "scheduled", "--until", until, "rq.c")
	require.Equal(t, exitOK, code, stderr)
	n, _ = counted(out)
	require.Equal(t, 2, n)
	code, out, stderr = run("cancel", "--all", "--dry-run", "rq.c")
	require.Equal(t, exitOK, code, stderr)
	n, _ = counted(out)
	require.Equal(t, 1, n, "the third is left")
}
