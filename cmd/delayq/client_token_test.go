package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClientCommandsSendToken runs every client command against a server
// with tokens: without a token each is refused (exit 1, unauthenticated),
// and with --token or DELAYQ_TOKEN each works, subscribe and export and
// import included.
func TestClientCommandsSendToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "cli-test-secret-0123456789"
	tokens := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte("- name: ops\n  token: "+secret+"\n  scopes: [admin]\n"), 0o600))
	p := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off", "--tokens-file", tokens)
	server := []string{"--server", p.HTTPURL}
	withToken := []string{"DELAYQ_TOKEN=" + secret}

	run := func(env []string, stdin string, args ...string) (int, string, string) {
		t.Helper()
		return runCLIWith(t, env, stdin, append(args, server...)...)
	}

	code, _, stderr := run(nil, "", "push", "mail", `{"n": 1}`, "--id", "m1", "--delay", "1h")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "unauthenticated")

	code, out, stderr := run(nil, "", "push", "mail", `{"n": 1}`, "--id", "m1", "--delay", "1h", "--token", secret)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"id":"m1"`)

	for _, c := range []struct {
		args []string
		want string
	}{{[]string{"get", "m1"}, `"id":"m1"`}, {[]string{"topics"}, `"name":"mail"`}, {[]string{"export"}, `"id":"m1"`}} {
		code, _, stderr := run(nil, "", c.args...)
		require.Equal(t, exitError, code, c.args)
		require.Contains(t, stderr, "unauthenticated", c.args)
		code, out, stderr = run(withToken, "", c.args...)
		require.Equal(t, 0, code, "%v: %s", c.args, stderr)
		require.Contains(t, out, c.want, c.args)
	}

	_, exported, _ := run(withToken, "", "export")
	code, _, stderr = run(nil, exported, "import", "-")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "unauthenticated")
	code, _, stderr = run(withToken, exported, "import", "-")
	require.Equal(t, 0, code, stderr)

	code, _, stderr = run(nil, "", "cancel", "m1")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "unauthenticated")
	code, _, stderr = run(withToken, "", "cancel", "m1")
	require.Equal(t, 0, code, stderr)

	// subscribe: refused for good without a token, delivers with one.
	code, _, stderr = run(nil, "", "subscribe", "mail")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "unauthenticated")
	_, _, stderr = run(withToken, "", "push", "mail", `{"n": 2}`, "--id", "m2")
	require.Empty(t, stderr)
	sub := startSubscribe(t, map[string]string{"DELAYQ_TOKEN": secret}, append([]string{"subscribe", "mail"}, server...)...)
	line := sub.stdout.next(t, `"id":"m2"`, 15*time.Second)
	require.True(t, strings.Contains(line, `"attempt":1`), line)
	require.Equal(t, 0, sub.interrupt(t))
}
