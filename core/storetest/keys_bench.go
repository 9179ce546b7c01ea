package storetest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// KeysBlocked benchmarks the claims of a topic whose 10 000 keys are all
// blocked by what params sets (params.Topic, Max and the per-key settings:
// KeyConcurrency 1, or a KeyRate of one job a long period), each with its
// first job taken and its second due behind it. The first jobs are
// acknowledged when ack is set, so that only a rate holds the second
// ones. It reports the claim that first meets the due ones and parks them
// (parking_claim_ms, once) and each claim after, which finds nothing to
// take (ns/op); a job claimed fails b.
func KeysBlocked(b *testing.B, s core.Store, params core.ClaimJobsParams, ack bool) {
	const keys = 10_000
	ctx := context.Background()
	claim := func(max int) []*core.Job {
		p := params
		p.Max = max
		jobs, err := s.ClaimJobs(ctx, &p)
		require.NoError(b, err)
		return jobs
	}
	// Each key's first job due before every second one.
	start := time.Now().Add(-time.Minute)
	for i := 0; i < 2*keys; i += 1000 {
		jobs := make([]*core.Job, 1000)
		for k := range jobs {
			jobs[k] = NewJob(params.Topic, start.Add(time.Duration(i+k)*time.Millisecond))
			jobs[k].Key = "key-" + strconv.Itoa((i+k)%keys)
			jobs[k].TTR = time.Hour
		}
		Put(b, ctx, s, jobs...)
	}
	for taken := 0; taken < keys; {
		got := claim(1000)
		require.NotEmpty(b, got)
		for _, j := range got {
			if ack {
				_, err := s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})
				require.NoError(b, err)
			}
		}
		taken += len(got)
	}
	parking := time.Now()
	require.Empty(b, claim(100), "every key blocked")
	parked := time.Since(parking)
	for b.Loop() {
		if len(claim(100)) != 0 {
			b.Fatal("a job of a blocked key was claimed")
		}
	}
	// After the loop, whose start drops the metrics reported before.
	b.ReportMetric(float64(parked)/1e6, "parking_claim_ms")
}
