package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cliOf returns a runner of the binary's client commands against the
// server p (DELAYQ_SERVER), returning the exit code, stdout and stderr.
func cliOf(t *testing.T, p *serverProc) func(args ...string) (int, string, string) {
	return func(args ...string) (int, string, string) {
		t.Helper()
		return runCLIWith(t, []string{"DELAYQ_SERVER=" + p.HTTPURL}, "", args...)
	}
}

// TestClientClaimAckNack runs claim, ack and nack against a real server:
// claim prints each delivery as one JSON line, ack and nack settle many at
// once through the batch routes, and a failed item is printed as
// `ID: message` with exit code 1 while the others are settled.
func TestClientClaimAckNack(t *testing.T) {
	t.Parallel()
	run := cliOf(t, startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off"))
	state := func(id string) map[string]any {
		t.Helper()
		code, out, stderr := run("get", id)
		require.Equal(t, exitOK, code, stderr)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &m), out)
		return m
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		code, _, stderr := run("push", "work", `{"n": "`+id+`"}`, "--id", id)
		require.Equal(t, exitOK, code, stderr)
	}

	// Nothing due on another topic: no output, exit 0.
	code, out, stderr := run("claim", "idle", "--wait", "100ms")
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, out)

	code, out, stderr = run("claim", "work", "--max", "10", "--wait", "1s")
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	leases := map[string]string{}
	for _, line := range lines {
		d := printed(t, line)
		require.Equal(t, "work", d.Topic)
		require.Equal(t, `{"n":"`+d.ID+`"}`, string(d.Body))
		require.Equal(t, 1, d.Attempt)
		require.NotEmpty(t, d.LeaseExpiresAt)
		leases[d.ID] = d.Lease
	}
	require.Len(t, leases, 4)

	// ack: a and b are done; unknown and a lost lease fail alone.
	code, out, stderr = run("ack", "a", leases["a"], "unknown", "x", "b", leases["b"], "c", "wrong")
	require.Equal(t, exitError, code, stderr)
	require.Empty(t, out)
	require.Contains(t, stderr, `unknown: job "unknown" not found`)
	require.Contains(t, stderr, `c: the lease of job "c" is lost`)
	require.Contains(t, stderr, "delayq: 2 of 4 acks failed")
	require.NotContains(t, stderr, "a: ")
	require.Equal(t, "done", state("a")["state"])
	require.Equal(t, "done", state("b")["state"])
	require.Equal(t, "reserved", state("c")["state"])

	// A second ack of a finished job fails.
	code, _, stderr = run("ack", "a", leases["a"])
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, `a: the lease of job "a" is lost`)

	// nack: both retried after the delay, with the error kept.
	code, out, stderr = run("nack", "c", leases["c"], "d", leases["d"], "--delay", "1h", "--error", "upstream down")
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, out)
	require.Empty(t, stderr)
	for _, id := range []string{"c", "d"} {
		m := state(id)
		require.Equal(t, "scheduled", m["state"], id)
		require.Equal(t, "upstream down", m["last_error"], id)
	}
	code, _, stderr = run("nack", "c", leases["c"])
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, `c: the lease of job "c" is lost`)
	require.Contains(t, stderr, "delayq: 1 of 1 nacks failed")

	// The server refuses a bad delay: each item fails.
	code, _, stderr = run("nack", "c", "x", "--delay", "-1s")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "c: delay must be between 0 and")
}

// TestClientConsumeTopicOfOtherDelivery: claim and subscribe on a topic
// delivered by webhook or NATS say so and exit 1, rather than answering
// nothing or waiting for ever; a consumer topic is claimed as ever.
func TestClientConsumeTopicOfOtherDelivery(t *testing.T) {
	t.Parallel()
	run := cliOf(t, startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1"))
	for topic, config := range map[string]string{
		"by.hook": `{"delivery": {"type": "webhook", "url": "http://127.0.0.1:9/hook"}}`,
		"by.nats": `{"delivery": {"type": "nats", "subject": "billing.due"}}`,
	} {
		code, _, stderr := run("topic", "put", topic, config)
		require.Equal(t, exitOK, code, stderr)
	}
	for _, args := range [][]string{{"claim", "by.hook", "--wait", "10s"}, {"subscribe", "by.hook"}} {
		code, out, stderr := run(args...)
		require.Equal(t, exitError, code, "%v: %s", args, stderr)
		require.Empty(t, out)
		require.Contains(t, stderr, `delayq: topic "by.hook" delivers by webhook: delayq POSTs its jobs to http://127.0.0.1:9/hook, so consumers get none of its jobs`, "%v", args)
	}
	for _, args := range [][]string{{"claim", "by.nats"}, {"subscribe", "by.nats"}} {
		code, _, stderr := run(args...)
		require.Equal(t, exitError, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, `delayq: topic "by.nats" delivers by NATS: delayq publishes its jobs on billing.due, so consumers get none of its jobs`, "%v", args)
	}
	code, _, stderr := run("push", "by.pull", "--id", "pulled")
	require.Equal(t, exitOK, code, stderr)
	code, out, stderr := run("claim", "by.pull", "--wait", "5s")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "pulled", printed(t, out).ID)
}
