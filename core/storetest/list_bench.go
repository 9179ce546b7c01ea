package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// ListBench measures ListJobs over many pending jobs: it puts pending jobs
// of topic "list", due over the next hour, in batches of 1000, then lists
// b.N times the first page of 1000 scheduled jobs and the page after it,
// and reports the time per page ("ms/page").
func ListBench(b *testing.B, s core.Store, pending int) {
	ctx := context.Background()
	start := time.Now().Add(time.Hour)
	for i := 0; i < pending; i += 1000 {
		jobs := make([]*core.Job, min(1000, pending-i))
		for k := range jobs {
			jobs[k] = NewJob("list", start.Add(time.Duration((i+k)*7919%pending)*time.Hour/time.Duration(pending)))
		}
		Put(b, ctx, s, jobs...)
	}
	b.ResetTimer()
	began := time.Now()
	for range b.N {
		p := &core.ListJobsParams{Topic: "list", State: core.StateScheduled, Limit: 1000}
		for range 2 {
			page, err := s.ListJobs(ctx, p)
			require.NoError(b, err)
			require.Len(b, page.Jobs, min(1000, pending))
			p.After = page.Next
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(time.Since(began).Microseconds())/1e3/float64(2*b.N), "ms/page")
}
