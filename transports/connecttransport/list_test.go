package connecttransport_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

func withDelay(d time.Duration) func(*core.PushParams) {
	return func(p *core.PushParams) { p.Delay = &d }
}

func listIDs(res *delayqv1.ListJobsResponse) []string {
	ids := make([]string, len(res.Jobs))
	for i, j := range res.Jobs {
		ids[i] = j.Id
	}
	return ids
}

// TestListJobs: ListJobs lists a topic's jobs in a state by pages in
// run_at order, next_after walking to the end, and with contains only
// those whose body holds the text among at most scan jobs read, as
// GET /v1/topics/{topic}/jobs?state= does.
func TestListJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []string
	for i, body := range []string{`{"item": "hay"}`, `{"item": "needle"}`, `{"item": "hay"}`, `{"item": "needle"}`, `{"item": "hay"}`} {
		want = append(want, b.push(t, "orders", body, withDelay(time.Duration(i+1)*time.Hour)))
	}
	b.push(t, "other", `1`, withDelay(time.Hour))
	ready := b.push(t, "orders", `"now"`)

	// Pages of 2 walk the five scheduled jobs by run_at, and end.
	var got []string
	req := &delayqv1.ListJobsRequest{Topic: "orders", State: "scheduled", Limit: 2}
	for pages := 1; ; pages++ {
		require.LessOrEqual(t, pages, 3, "the walk ends")
		var res delayqv1.ListJobsResponse
		b.must(t, "ListJobs", req, &res)
		require.LessOrEqual(t, len(res.Jobs), 2)
		require.Nil(t, res.Scanned, "scanned only with contains")
		got = append(got, listIDs(&res)...)
		if res.NextAfter == "" {
			break
		}
		req.After = res.NextAfter
	}
	require.Equal(t, want, got, "by run_at, each once")

	var res delayqv1.ListJobsResponse
	b.must(t, "ListJobs", &delayqv1.ListJobsRequest{Topic: "orders", State: "ready"}, &res)
	require.Equal(t, []string{ready}, listIDs(&res), "limit 0 is the default")
	require.Equal(t, "ready", res.Jobs[0].State)
	require.Equal(t, `"now"`, res.Jobs[0].Body, "each job as GetJob shows it")
	require.Empty(t, res.NextAfter)

	// A search reads the whole state by default and says how many it read.
	res.Reset()
	b.must(t, "ListJobs", &delayqv1.ListJobsRequest{Topic: "orders", State: "scheduled", Contains: "needle"}, &res)
	require.Equal(t, []string{want[1], want[3]}, listIDs(&res))
	require.NotNil(t, res.Scanned)
	require.EqualValues(t, 5, *res.Scanned)
	require.Empty(t, res.NextAfter)
	// A scan that stops early says where to go on.
	res.Reset()
	b.must(t, "ListJobs", &delayqv1.ListJobsRequest{Topic: "orders", State: "scheduled", Contains: "needle", Scan: 3}, &res)
	require.Equal(t, []string{want[1]}, listIDs(&res))
	require.EqualValues(t, 3, res.GetScanned())
	require.NotEmpty(t, res.NextAfter)
	after := res.NextAfter
	res.Reset()
	b.must(t, "ListJobs", &delayqv1.ListJobsRequest{Topic: "orders", State: "scheduled", Contains: "needle", Scan: 3, After: after}, &res)
	require.Equal(t, []string{want[3]}, listIDs(&res))
	require.EqualValues(t, 2, res.GetScanned())
	require.Empty(t, res.NextAfter)
	res.Reset()
	b.must(t, "ListJobs", &delayqv1.ListJobsRequest{Topic: "orders", State: "done", Contains: "needle"}, &res)
	require.Empty(t, res.Jobs)
	require.NotNil(t, res.Scanned, "a search that read nothing says so")
	require.EqualValues(t, 0, *res.Scanned)
}

// TestListJobsInvalid checks that each bad argument of ListJobs is
// InvalidArgument naming the field, as over HTTP.
func TestListJobsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name  string
		req   *delayqv1.ListJobsRequest
		field string
	}{
		{"no state", &delayqv1.ListJobsRequest{Topic: "orders"}, "state"},
		{"bad state", &delayqv1.ListJobsRequest{Topic: "orders", State: "waiting"}, "state"},
		{"bad topic", &delayqv1.ListJobsRequest{Topic: "or..ders", State: "ready"}, "topic"},
		{"negative limit", &delayqv1.ListJobsRequest{Topic: "orders", State: "ready", Limit: -1}, "limit"},
		{"limit over", &delayqv1.ListJobsRequest{Topic: "orders", State: "ready", Limit: 1001}, "limit"},
		{"search limit over", &delayqv1.ListJobsRequest{Topic: "orders", State: "ready", Limit: 1001, Contains: "a"}, "limit"},
		{"bad cursor", &delayqv1.ListJobsRequest{Topic: "orders", State: "ready", After: "not-a-cursor!"}, "after"},
		{"scan without contains", &delayqv1.ListJobsRequest{Topic: "orders", State: "ready", Scan: 10}, "scan"},
		{"negative scan", &delayqv1.ListJobsRequest{Topic: "orders", State: "ready", Contains: "a", Scan: -1}, "scan"},
		{"scan over", &delayqv1.ListJobsRequest{Topic: "orders", State: "ready", Contains: "a", Scan: 100001}, "scan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.call(t, "", "ListJobs", tc.req, &delayqv1.ListJobsResponse{})
			requireStatus(t, err, codes.InvalidArgument, "invalid_argument", tc.field)
		})
	}
}

// TestListJobsAccess checks ListJobs's scopes, push or consume as for
// GET /v1/topics/{topic}/jobs, and topic restrictions.
func TestListJobsAccess(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	id := b.push(t, "mail", `"x"`)
	b.push(t, "secret", `"y"`)
	req := &delayqv1.ListJobsRequest{Topic: "mail", State: "ready"}

	err := b.call(t, "", "ListJobs", req, &delayqv1.ListJobsResponse{})
	requireStatus(t, err, codes.Unauthenticated, "unauthenticated", "")
	for _, token := range []string{pushToken, consumeToken, adminToken, mailOnlyToken} {
		var res delayqv1.ListJobsResponse
		require.NoError(t, b.call(t, token, "ListJobs", req, &res), token)
		require.Equal(t, []string{id}, listIDs(&res), token)
	}
	// A token restricted to mail may not list another topic, nor search it.
	err = b.call(t, mailOnlyToken, "ListJobs", &delayqv1.ListJobsRequest{Topic: "secret", State: "ready"}, &delayqv1.ListJobsResponse{})
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	err = b.call(t, mailOnlyToken, "ListJobs", &delayqv1.ListJobsRequest{Topic: "secret", State: "ready", Contains: "y"}, &delayqv1.ListJobsResponse{})
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
}
