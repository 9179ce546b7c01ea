package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClientTopicSet: `delayq topic set` changes the settings its flags
// and PATCH name and keeps the others, the webhook's secret included, and
// refuses bad input without changing anything, against a real server.
func TestClientTopicSet(t *testing.T) {
	t.Parallel()
	run := cliOf(t, startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off"))
	code, _, stderr := run("topic", "put", "orders", `{"delivery": {"type": "webhook", "url": "https://svc.example/hook", "secret": "s3cr3t-0123456789"},
		"max_attempts": 3, "rate": {"limit": 10}, "on_dead": "orders.dead"}`)
	require.Equal(t, exitOK, code, stderr)
	topic := func() map[string]any {
		t.Helper()
		code, out, stderr := run("topics", "orders")
		require.Equal(t, exitOK, code, stderr)
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &v), out)
		return v
	}

	code, out, stderr := run("topic", "set", "orders", "--max-attempts", "5", "--ttr", "2m", "--webhook-timeout", "5s", "--delay", "90s", "--retention", "720h", "--key-concurrency", "1", "--fair", "--rate-per-key")
	require.Equal(t, exitOK, code, stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.EqualValues(t, 5, got["max_attempts"])
	require.Equal(t, "2m0s", got["ttr"])
	require.Equal(t, "1m30s", got["delay"])
	require.Equal(t, "720h0m0s", got["retention"])
	require.EqualValues(t, 1, got["key_concurrency"])
	require.Equal(t, true, got["fair"])
	require.Equal(t, map[string]any{"limit": 10.0, "period": "1s", "burst": 10.0, "per_key": true}, got["rate"], "per_key merged into the rate kept")
	d := got["delivery"].(map[string]any)
	require.Equal(t, "5s", d["timeout"])
	require.Equal(t, "https://svc.example/hook", d["url"], "kept")
	require.Equal(t, true, d["secret_set"], "the secret is kept")
	require.Equal(t, "orders.dead", got["on_dead"], "kept")

	code, out, stderr = run("topic", "set", "orders", "--events-topic", "orders.audit", "--events-on", "done,dead")
	require.Equal(t, exitOK, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, map[string]any{"topic": "orders.audit", "on": []any{"done", "dead"}}, got["events"])
	code, out, stderr = run("topics", "orders", "--output", "table")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^events +orders\.audit on done,dead$`, out)
	require.Regexp(t, `(?m)^key_concurrency +1$`, out)
	require.Regexp(t, `(?m)^fair +true$`, out)
	require.Regexp(t, `(?m)^rate +10 per 1s, burst 10, per key$`, out)
	code, _, stderr = run("topic", "set", "orders", "--events-on", "cancelled")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, map[string]any{"topic": "orders.audit", "on": []any{"cancelled"}}, topic()["events"], "the topic kept")
	code, _, stderr = run("topic", "set", "orders", "--events-topic", "", "--fair=false")
	require.Equal(t, exitOK, code, stderr)
	require.NotContains(t, topic(), "events")
	require.NotContains(t, topic(), "fair")

	code, _, stderr = run("topic", "set", "orders", `{"on_dead": null}`, "--rate-limit", "0")
	require.Equal(t, exitOK, code, stderr)
	after := topic()
	require.NotContains(t, after, "on_dead")
	require.NotContains(t, after, "rate")
	require.EqualValues(t, 5, after["max_attempts"])

	for _, args := range [][]string{
		{"topic", "set", "orders"},                                                                // nothing to change
		{"topic", "set", "orders", "[1]"},                                                         // not an object
		{"topic", "set", "orders", "--max-attempts", "-2"},                                        // refused by the server
		{"topic", "set", "orders", "--key-concurrency", "10001"},                                  // out of range
		{"topic", "set", "orders", "--ttr", "5"},                                                  // a duration without its unit
		{"topic", "set", "orders", "--delay", "-1s"},                                              // negative
		{"topic", "set", "orders", "--retention", "1500ms"},                                       // not whole seconds
		{"topic", "set", "nosuch", "--max-attempts", "2"},                                         // no such topic
		{"topic", "set", "orders", "--kafka-topic", "k"},                                          // no --kafka-brokers (and a url kept)
		{"topic", "set", "orders", "--webhook-url", "https://svc.example/", "--kafka-topic", "k"}, // two deliveries
		{"topic", "set", "orders", "--events-on", "done"},                                         // no events topic
		{"topic", "set", "orders", "--rate-per-key"},                                              // per_key without a limit
		{"topic", "set", "orders", "--events-topic", "orders.audit", "--events-on", "finished"},   // no such transition
	} {
		code, _, stderr := run(args...)
		require.NotEqual(t, exitOK, code, "%v", args)
		require.NotEmpty(t, stderr, "%v says why", args)
	}
	require.Equal(t, after, topic(), "refused changes change nothing")
}
