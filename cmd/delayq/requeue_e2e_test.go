package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClientRequeueByFilter: `delayq requeue --error-contains TEXT TOPIC`
// requeues only the topic's dead jobs whose last error contains TEXT,
// `--all TOPIC` the rest, and `requeue ID` one job, against a real server.
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

	code, out, stderr := run("requeue", "--error-contains", "503", "rq")
	require.Equal(t, exitOK, code, stderr)
	require.JSONEq(t, `{"requeued": 3, "failed": 0}`, out)
	for id, want := range map[string]string{"a": "ready", "b": "ready", "c": "ready", "d": "dead", "e": "dead", "z": "dead"} {
		require.Equal(t, want, state(id), id)
	}

	// Nothing left to match: none requeued, exit 0.
	code, out, stderr = run("requeue", "--error-contains", "503", "rq", "--output", "table")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^requeued\s+0$`, out)

	code, out, stderr = run("requeue", "--all", "rq")
	require.Equal(t, exitOK, code, stderr)
	require.JSONEq(t, `{"requeued": 2, "failed": 0}`, out)
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
}
