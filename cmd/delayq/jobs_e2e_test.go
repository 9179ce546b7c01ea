package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/client"
)

// TestJobsListE2E: the Go client's ListJobs and `delayq jobs list` page
// through a topic's jobs in one state on the local store, by run_at, and
// search their bodies; bad flags exit non-zero with a message; the topic
// is the argument, as for every command, and --topic a deprecated alias.
func TestJobsListE2E(t *testing.T) {
	t.Parallel()
	srv := startServer(t, defaultArgs(t.TempDir())...)
	dq := newClient(t, client.Config{URL: srv.HTTPURL})
	ctx := t.Context()
	var ids []string
	for i, d := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
		p, err := dq.Push(ctx, &client.PushParams{Topic: "c.list", Delay: d, Body: map[string]int{"n": i}})
		require.NoError(t, err)
		ids = append(ids, p.ID)
	}
	byRunAt := []string{ids[1], ids[2], ids[0]}

	page, err := dq.ListJobs(ctx, &client.ListJobsParams{Topic: "c.list", State: client.StateScheduled, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, byRunAt[:2], jobIDs(page.Jobs))
	require.NotEmpty(t, page.NextAfter)
	page, err = dq.ListJobs(ctx, &client.ListJobsParams{Topic: "c.list", State: client.StateScheduled, Limit: 2, After: page.NextAfter})
	require.NoError(t, err)
	require.Equal(t, byRunAt[2:], jobIDs(page.Jobs))
	require.Empty(t, page.NextAfter)
	page, err = dq.ListJobs(ctx, &client.ListJobsParams{Topic: "c.list", State: client.StateScheduled, Contains: `"n":2`})
	require.NoError(t, err)
	require.Equal(t, []string{ids[2]}, jobIDs(page.Jobs))
	require.Equal(t, 3, page.Scanned)
	_, err = dq.ListJobs(ctx, &client.ListJobsParams{Topic: "c.list", State: "waiting"})
	require.Equal(t, "state", requireAPIError(t, err, client.ErrInvalidArgument, 400).Field)

	code, stdout, stderr := runCLI(t, "jobs", "list", "c.list", "--state", "scheduled", "--limit", "1", "--server", srv.HTTPURL)
	require.Equal(t, 0, code, stderr)
	var p struct {
		Jobs      []*client.Job `json:"jobs"`
		NextAfter string        `json:"next_after"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &p))
	require.Equal(t, byRunAt[:1], jobIDs(p.Jobs))
	code, stdout, stderr = runCLI(t, "jobs", "list", "c.list", "--state", "scheduled", "--after", p.NextAfter,
		"--contains", `"n":0`, "--output", "table", "--server", srv.HTTPURL)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, ids[0])
	require.NotContains(t, stdout, ids[2])
	require.Contains(t, stdout, "scanned: 2")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "ready"}, "the topic is missing: delayq jobs list TOPIC"},
		{[]string{"c.list", "--state", "waiting"}, `invalid --state "waiting"`},
		{[]string{"c.list", "--state", "ready", "--limit", "0"}, "invalid --limit 0"},
		{[]string{"c.list", "--state", "ready", "--scan", "10"}, "--scan needs --contains"},
		{[]string{"c.list", "--state", "ready", "--contains", "x", "--scan", "100001"}, "invalid --scan 100001"},
		{[]string{"c.list", "--state", "ready", "--after", "not-a-cursor!"}, "after"},
		{[]string{"c.list", "--topic", "other", "--state", "ready"}, `the topic is "c.list" and --topic "other"`},
	} {
		code, _, stderr := runCLI(t, append(append([]string{"jobs", "list"}, c.args...), "--server", srv.HTTPURL)...)
		require.NotEqual(t, 0, code, "%v", c.args)
		require.Contains(t, stderr, c.want, "%v", c.args)
	}

	// The documented --topic of earlier releases still works, with a
	// warning on standard error that leaves standard output JSON.
	code, stdout, stderr = runCLI(t, "jobs", "list", "--topic", "c.list", "--state", "scheduled", "--server", srv.HTTPURL)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "--topic is deprecated: give the topic as the first argument")
	require.NoError(t, json.Unmarshal([]byte(stdout), &p))
	require.ElementsMatch(t, ids, jobIDs(p.Jobs))
}
