//go:build unix

package pebblestore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// BenchmarkKeysAtLimit measures a claim of a topic whose 10 000 keys are
// all at their key_concurrency of 1, each with one job reserved and one
// due behind it: the claim that first meets the due ones and parks them
// (parking_claim_ms, once), and then each claim, which finds nothing to
// take (ns/op).
//
//	go test -run '^$' -bench KeysAtLimit ./backends/pebblestore/
func BenchmarkKeysAtLimit(b *testing.B) {
	const keys = 10_000
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			ctx := context.Background()
			claim := func(max int) []*core.Job {
				jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "keys", Max: max, KeyConcurrency: 1})
				require.NoError(b, err)
				return jobs
			}
			// Each key's first job due before every second one.
			start := time.Now().Add(-time.Minute)
			for i := 0; i < 2*keys; i += 1000 {
				jobs := make([]*core.Job, 1000)
				for k := range jobs {
					jobs[k] = storetest.NewJob("keys", start.Add(time.Duration(i+k)*time.Millisecond))
					jobs[k].Key = "key-" + strconv.Itoa((i+k)%keys)
					jobs[k].TTR = time.Hour
				}
				storetest.Put(b, ctx, s, jobs...)
			}
			for held := 0; held < keys; {
				got := claim(1000)
				require.NotEmpty(b, got)
				held += len(got)
			}
			parking := time.Now()
			require.Empty(b, claim(100), "every key at its limit")
			parked := time.Since(parking)
			for b.Loop() {
				if len(claim(100)) != 0 {
					b.Fatal("a job of a key at its limit was claimed")
				}
			}
			// After the loop, whose start drops the metrics reported before.
			b.ReportMetric(float64(parked)/1e6, "parking_claim_ms")
		})
	}
}

// BenchmarkKeyBurst is BenchmarkBurst over 1 000 keys (DELAYQ_BENCH_BURST
// jobs, default 100 000, the i-th of key i mod 1000), claimed with
// key_concurrency 0 (no bound), 1 and 10.
//
//	go test -run '^$' -bench KeyBurst -benchtime 1x ./backends/pebblestore/
func BenchmarkKeyBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_BURST", 100_000)
	for _, st := range benchStores {
		for _, kc := range []int{0, 1, 10} {
			b.Run(st.name+"/key_concurrency="+strconv.Itoa(kc), func(b *testing.B) {
				s := st.open(b)
				due := time.Now().Add(2*time.Second + time.Duration(n)*time.Second/50_000).UTC().Truncate(time.Millisecond)
				for i := 0; i < n; i += 1000 {
					jobs := make([]*core.Job, min(1000, n-i))
					for k := range jobs {
						jobs[k] = storetest.NewJob("burst", due)
						jobs[k].Key = "key-" + strconv.Itoa((i+k)%1000)
					}
					storetest.Put(b, context.Background(), s, jobs...)
				}
				require.True(b, time.Now().Before(due), "putting took too long")
				drainBurst(b, s, n, due, kc)
			})
		}
	}
}
