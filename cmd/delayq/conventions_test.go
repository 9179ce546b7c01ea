package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestCLIUnknownSubcommand: a word that names no command is a usage error
// at every level, not the parent's help with exit 0.
func TestCLIUnknownSubcommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"work"}, {"jobs", "work"}, {"topic", "show", "t"}, {"schedule", "fire"}} {
		res := runApp(t, nil, "", args...)
		require.Equal(t, exitUsage, res.code, "%v: %s", args, res.stderr)
		require.Contains(t, res.stderr, `unknown command "`+args[min(1, len(args)-1)]+`"`, "%v", args)
		require.Empty(t, res.stdout, "%v", args)
	}
	// A group alone shows its subcommands.
	res := runApp(t, nil, "", "jobs")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "list")
}

// TestCLIDurationsNeedAUnit: every duration of the command line, flag or
// environment twin, refuses a bare number with the unit it lacks, before
// any request; 0 needs none.
func TestCLIDurationsNeedAUnit(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1: a request would fail with exit 1, not 2.
	const server = "--server=http://127.0.0.1:1"
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"claim", "t", "--wait", "5", server}, `invalid argument "5" for "--wait" flag: add a unit, e.g. 5s or 5ms`},
		{nil, []string{"push", "t", "--delay", "5", server}, `invalid --delay "5": add a unit, e.g. 5s or 5ms`},
		{nil, []string{"push", "t", "--ttr", "30", server}, `invalid --ttr "30": add a unit`},
		{nil, []string{"push", "t", "--backoff-delays", "1m,300", server}, `invalid --backoff-delays "300": add a unit`},
		{nil, []string{"push", "t", "--expires-in", "600", server}, `invalid --expires-in "600": add a unit`},
		{nil, []string{"push", "t", "--expires-in", "0s", server}, `invalid --expires-in "0s": want a positive duration`},
		{nil, []string{"nack", "id", "lease", "--delay", "10", server}, `invalid --delay "10": add a unit`},
		{nil, []string{"serve", "--drain-timeout", "5"}, `invalid argument "5" for "--drain-timeout" flag: add a unit`},
		{nil, []string{"serve", "--sync", "2"}, `add a unit, e.g. 2s`},
		{map[string]string{"DELAYQ_SHUTDOWN_TIMEOUT": "30"}, []string{"serve"}, `invalid value "30" for DELAYQ_SHUTDOWN_TIMEOUT: add a unit, e.g. 30s`},
	} {
		res := runApp(t, c.env, "", c.args...)
		require.Equal(t, exitUsage, res.code, "%v: %s", c.args, res.stderr)
		require.Contains(t, res.stderr, c.want, "%v", c.args)
		require.Nil(t, res.cfg, "%v: serve did not start", c.args)
	}
	res := runApp(t, nil, "", "serve", "--drain-timeout", "0", "--sync", "1500ms")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Zero(t, res.cfg.DrainTimeout)
	require.Equal(t, "1500ms", res.cfg.Sync)
}

// TestCLIHelpDefaultsOnce: cobra prints each flag's default; no flag's
// help says a default of its own on top.
func TestCLIHelpDefaultsOnce(t *testing.T) {
	t.Parallel()
	var walk func(cmd *cobra.Command)
	seen := 0
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		args := append(strings.Fields(cmd.CommandPath())[1:], "--help")
		res := runApp(t, nil, "", args...)
		require.Equal(t, exitOK, res.code, "%v: %s", args, res.stderr)
		for _, line := range strings.Split(res.stdout, "\n") {
			require.LessOrEqual(t, strings.Count(line, "default"), 1, "%v: %q", args, line)
		}
		seen++
	}
	walk((&app{lookupEnv: func(string) (string, bool) { return "", false }}).rootCommand())
	require.Greater(t, seen, 20, "every command's help was read")
}

// TestSubscribeTableAligned: the rows subscribe writes as they come have
// their columns where the header has them, for a ULID and for an id delayq
// derives (a unique key's, longer).
func TestSubscribeTableAligned(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	s := &subscriber{table: true, out: &out}
	for _, id := range []string{"01JD6Y3TQ9V9ZK0M4XJ3R2B7QF", core.KeyID("orders", "order-42")} {
		require.NoError(t, s.print(&subscribeFrame{ID: id, Attempt: 1, RunAt: "2026-11-21T10:00:15.250Z",
			LeaseExpiresAt: "2026-11-21T10:00:45.250Z", Lease: "01JD6Y3TQ9V9ZK0M4XJ3R2B7QG", Body: []byte(`{"n": 1}`)}))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	for _, col := range []string{"ATTEMPT", "RUN_AT", "LEASE_EXPIRES_AT", "LEASE ", "BODY"} {
		at := strings.Index(lines[0], col)
		require.Positive(t, at, col)
		for _, row := range lines[1:] {
			require.Equal(t, byte(' '), row[at-1], "%s: %q", col, row)
			require.NotEqual(t, byte(' '), row[at+len(strings.TrimSpace(col))-1], "%s: %q", col, row)
		}
	}
}
