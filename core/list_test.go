package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
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

// listCounter counts the store's listings and, with each, moves the clock
// by tick, so that a test sees how many reads a listing made and how long
// it took on the engine's clock.
type listCounter struct {
	core.Store
	clock *coretest.FakeClock
	tick  time.Duration
	reads atomic.Int64
}

func (s *listCounter) ListJobs(ctx context.Context, p *core.ListJobsParams) (core.JobPage, error) {
	s.reads.Add(1)
	s.clock.Advance(s.tick)
	return s.Store.ListJobs(ctx, p)
}

// setupListing returns an engine over a listCounter of memstore, with n
// scheduled jobs of topic "t" of bodies of size bytes each, the last one
// holding "needle", in listing order.
func setupListing(t *testing.T, n, size int, tick time.Duration) (*core.Engine, *listCounter) {
	t.Helper()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = mem.Close() })
	store := &listCounter{Store: mem, clock: clock, tick: tick}
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock, Limits: core.Limits{MaxBodyBytes: 1 << 20}})
	require.NoError(t, err)
	for i := range n {
		text := "hay"
		if i == n-1 {
			text = "needle"
		}
		body := fmt.Sprintf(`"%s%s"`, text, strings.Repeat(".", size-len(text)-2))
		delay := time.Duration(i+1) * time.Minute
		_, err := e.Push(context.Background(), &core.PushParams{Topic: "t", Body: json.RawMessage(body), Delay: &delay})
		require.NoError(t, err)
	}
	return e, store
}

// TestSearchReadsFixedPages: a search for one match reads the store by
// pages of a fixed size (16 MiB of the largest bodies), not one job at a
// time, which made a search with limit 1 cost a read per job.
func TestSearchReadsFixedPages(t *testing.T) {
	t.Parallel()
	e, store := setupListing(t, 100, 16, 0)
	p, err := e.SearchJobs(context.Background(), &core.SearchJobsParams{
		ListJobsParams: core.ListJobsParams{Topic: "t", State: core.StateScheduled, Limit: 1}, Contains: "needle"})
	require.NoError(t, err)
	require.Len(t, p.Jobs, 1)
	require.Equal(t, 100, p.Scanned)
	require.Empty(t, p.Next)
	require.EqualValues(t, 7, store.reads.Load(), "pages of 16 jobs, at most 1 MiB each")
}

// TestSearchTimeBound: a search ends its page after SearchTimeMax on the
// engine's clock, between two reads, and Next goes on from there; a search
// whose context ended stops before its next read.
func TestSearchTimeBound(t *testing.T) {
	t.Parallel()
	e, store := setupListing(t, 200, 16, time.Second)
	search := func(ctx context.Context, after string) (core.SearchPage, error) {
		return e.SearchJobs(ctx, &core.SearchJobsParams{
			ListJobsParams: core.ListJobsParams{Topic: "t", State: core.StateScheduled, After: after, Limit: 1}, Contains: "needle"})
	}
	p, err := search(context.Background(), "")
	require.NoError(t, err)
	require.Empty(t, p.Jobs)
	require.Equal(t, 5*16, p.Scanned, "five reads of a second each")
	require.NotEmpty(t, p.Next)
	p, err = search(context.Background(), p.Next)
	require.NoError(t, err)
	require.Empty(t, p.Jobs)
	p, err = search(context.Background(), p.Next)
	require.NoError(t, err)
	require.Len(t, p.Jobs, 1, "the walk goes on to the match")
	require.Equal(t, 200-2*5*16, p.Scanned)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := store.reads.Load()
	_, err = search(ctx, "")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, before, store.reads.Load(), "no read once the caller left")
}

// TestListPageBytes: a page of a listing ends before the job that would
// take its bodies past ListPageBytes, holds at least one job however
// large, and its Next goes on with the job it left out; ListDead too.
func TestListPageBytes(t *testing.T) {
	t.Parallel()
	const size = 900 << 10 // 9 fit in ListPageBytes (8 MiB)
	e, _ := setupListing(t, 20, size, 0)
	ctx := context.Background()
	var all []string
	for after := ""; ; {
		page, err := e.ListJobs(ctx, &core.ListJobsParams{Topic: "t", State: core.StateScheduled, After: after, Limit: 100})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Jobs)*size, core.ListPageBytes)
		require.NotEmpty(t, page.Jobs)
		all = append(all, ids(page.Jobs)...)
		if page.Next == "" {
			break
		}
		require.Len(t, page.Jobs, core.ListPageBytes/size, "as many as fit")
		after = page.Next
	}
	require.Len(t, all, 20)
	require.Len(t, slices.Compact(slices.Clone(all)), 20, "every job once")
}
