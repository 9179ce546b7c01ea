package history

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckFile checks again a history a run wrote (cmd/delayq's
// DELAYQ_HISTORY_DUMP), named by DELAYQ_HISTORY_FILE, with the allowances
// of DELAYQ_HISTORY_ALLOW (local, the default, redis, nats or sentinel), and logs its
// anomalies. Without DELAYQ_HISTORY_FILE it checks that a history survives
// the JSON round trip with the same verdict.
func TestCheckFile(t *testing.T) {
	t.Parallel()
	allow := LocalAllowances()
	switch os.Getenv("DELAYQ_HISTORY_ALLOW") {
	case "redis":
		allow = RedisAllowances()
	case "nats":
		allow = NATSAllowances()
	case "sentinel":
		allow = SentinelAllowances()
	}
	path := os.Getenv("DELAYQ_HISTORY_FILE")
	if path == "" {
		b := newBuilder()
		b.push("j", 3, 0, 5, 0)
		b.claim("j", 1, "L1", 10, 20, 0)
		b.settle(OpAck, "j", "L1", 30, 35, 204)
		b.kill(200)
		b.claim("j", 2, "L2", 1030, 1040, 0)
		path = t.TempDir() + "/h.json"
		f, err := os.Create(path)
		require.NoError(t, err)
		require.NoError(t, b.h.WriteJSON(f))
		require.NoError(t, f.Close())
		want := Check(b.h, RedisAllowances())
		require.NotEmpty(t, want.Anomalies)
		allow = RedisAllowances()
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, err := ReadJSON(f)
	require.NoError(t, err)
	r := Check(h, allow)
	t.Log(r.Summary())
	for _, a := range r.Anomalies {
		t.Logf("%s", a)
	}
	if os.Getenv("DELAYQ_HISTORY_FILE") == "" {
		require.Len(t, r.Anomalies, 1, "the same verdict after the round trip")
	}
}
