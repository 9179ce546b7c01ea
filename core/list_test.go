package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestSearchJobs: the engine's search reads a listing by pages no longer
// than the matches it still needs, so that a walk by its Next finds every
// match once; it stops at scan jobs read and says where to go on.
func TestSearchJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	var needles []string
	for i := range 10 {
		delay := time.Duration(i+1) * time.Minute
		body := fmt.Sprintf(`{"n":%d,"tag":"hay"}`, i)
		if i%2 == 0 {
			body = fmt.Sprintf(`{"n":%d,"tag":"needle"}`, i)
		}
		j, err := b.engine.Push(ctx, &core.PushParams{Topic: "orders", Body: json.RawMessage(body), Delay: &delay})
		require.NoError(t, err)
		if i%2 == 0 {
			needles = append(needles, j.ID)
		}
	}
	search := func(after string, limit, scan int) core.SearchPage {
		t.Helper()
		p, err := b.engine.SearchJobs(ctx, &core.SearchJobsParams{
			ListJobsParams: core.ListJobsParams{Topic: "orders", State: core.StateScheduled, After: after, Limit: limit},
			Contains:       "needle", Scan: scan})
		require.NoError(t, err)
		return p
	}

	p := search("", 2, 0)
	require.Equal(t, needles[:2], ids(p.Jobs))
	require.Equal(t, 3, p.Scanned, "read up to the second match, no further")
	require.NotEmpty(t, p.Next)
	var walked []string
	for after := ""; ; {
		p := search(after, 2, 0)
		walked = append(walked, ids(p.Jobs)...)
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	require.Equal(t, needles, walked, "every match once")

	p = search("", 10, 4)
	require.Equal(t, needles[:2], ids(p.Jobs))
	require.Equal(t, 4, p.Scanned)
	require.NotEmpty(t, p.Next, "the scan stopped before the end")
	p = search(p.Next, 10, 0)
	require.Equal(t, needles[2:], ids(p.Jobs))
	require.Equal(t, 6, p.Scanned)
	require.Empty(t, p.Next)

	page, err := b.engine.ListJobs(ctx, &core.ListJobsParams{Topic: "orders", State: core.StateScheduled, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 10)
	require.Empty(t, page.Next)

	for _, p := range []core.SearchJobsParams{
		{ListJobsParams: core.ListJobsParams{Topic: "orders", State: core.StateReady, Limit: 10}},
		{ListJobsParams: core.ListJobsParams{Topic: "orders", State: core.StateReady, Limit: 10}, Contains: "x", Scan: core.ListScanMax + 1},
		{ListJobsParams: core.ListJobsParams{Topic: "orders", State: core.StateReady, Limit: 10}, Contains: "x", Scan: -1},
		{ListJobsParams: core.ListJobsParams{Topic: "orders", State: core.StateReady, Limit: core.ListLimitMax + 1}, Contains: "x"},
		{ListJobsParams: core.ListJobsParams{Topic: "orders", State: "waiting", Limit: 10}, Contains: "x"},
		{ListJobsParams: core.ListJobsParams{Topic: "a..b", State: core.StateReady, Limit: 10}, Contains: "x"},
		{ListJobsParams: core.ListJobsParams{Topic: "orders", State: core.StateReady, Limit: 10, After: "%%"}, Contains: "x"},
	} {
		_, err := b.engine.SearchJobs(ctx, &p)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "%+v", p)
	}
	_, err = b.engine.ListJobs(ctx, &core.ListJobsParams{Topic: "orders", State: core.StateReady, Limit: 0})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
}

func ids(jobs []*core.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}
