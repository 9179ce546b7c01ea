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
// 10 times per op the first page of 1000 scheduled jobs and the page after
// it, and reports the time per page ("ms/page"): -benchtime 1x measures 20
// pages without putting the jobs twice. With cpu set (a CPU time that
// grows, of the process or of a server), it also reports the CPU per page
// ("cpu_ms/page"), which a busy machine inflates less than the time.
func ListBench(b *testing.B, s core.Store, pending int, cpu func() time.Duration) {
	ctx := context.Background()
	start := time.Now().Add(time.Hour)
	for i := 0; i < pending; i += 1000 {
		jobs := make([]*core.Job, min(1000, pending-i))
		for k := range jobs {
			jobs[k] = NewJob("list", start.Add(time.Duration((i+k)*7919%pending)*time.Hour/time.Duration(pending)))
		}
		// Replace: a put a loaded server answers late may be sent again,
		// and must not conflict with itself.
		res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: jobs, Replace: true})
		require.NoError(b, err)
		for _, r := range res {
			require.NoError(b, r.Err)
		}
	}
	b.ResetTimer()
	var cpu0 time.Duration
	if cpu != nil {
		cpu0 = cpu()
	}
	began := time.Now()
	for range 10 * b.N {
		p := &core.ListJobsParams{Topic: "list", State: core.StateScheduled, Limit: 1000}
		for range 2 {
			page, err := s.ListJobs(ctx, p)
			require.NoError(b, err)
			require.Len(b, page.Jobs, min(1000, pending))
			p.After = page.Next
		}
	}
	b.StopTimer()
	if cpu != nil {
		b.ReportMetric(float64((cpu()-cpu0).Microseconds())/1e3/float64(20*b.N), "cpu_ms/page")
	}
	b.ReportMetric(float64(time.Since(began).Microseconds())/1e3/float64(20*b.N), "ms/page")
}
