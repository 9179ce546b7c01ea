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
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			storetest.KeysBlocked(b, st.open(b), core.ClaimJobsParams{Topic: "keys", KeyConcurrency: 1}, false)
		})
	}
}

// BenchmarkKeysAtRate measures a claim of a topic whose 10 000 keys are
// all at their rate per key (one an hour), each with its one token taken
// and one job due behind it: the claim that first meets the due ones and
// parks them (parking_claim_ms, once), and then each claim, which finds
// nothing to take (ns/op).
//
//	go test -run '^$' -bench KeysAtRate ./backends/pebblestore/
func BenchmarkKeysAtRate(b *testing.B) {
	rate := core.Rate{Limit: 1, Period: time.Hour, Burst: 1, PerKey: true}
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			storetest.KeysBlocked(b, st.open(b), core.ClaimJobsParams{Topic: "keys", KeyRate: rate}, true)
		})
	}
}

// BenchmarkKeyBurst is BenchmarkBurst over 1 000 keys (DELAYQ_BENCH_BURST
// jobs, default 100 000, the i-th of key i mod 1000), claimed with
// key_concurrency 0 (no bound), 1 and 10, fair without a bound, and a rate
// per key that never binds (1 000 a second, a burst of 1 000, for 100 jobs
// a key): what per_key costs by itself.
//
//	go test -run '^$' -bench KeyBurst -benchtime 1x ./backends/pebblestore/
func BenchmarkKeyBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_BURST", 100_000)
	claims := []struct {
		name  string
		claim storetest.DrainParams
	}{
		{"key_concurrency=0", storetest.DrainParams{}},
		{"key_concurrency=1", storetest.DrainParams{KeyConcurrency: 1}},
		{"key_concurrency=10", storetest.DrainParams{KeyConcurrency: 10}},
		{"fair", storetest.DrainParams{Fair: true}},
		{"rate_per_key", storetest.DrainParams{KeyRate: core.Rate{Limit: 1000, Period: time.Second, Burst: 1000, PerKey: true}}},
	}
	for _, st := range benchStores {
		for _, c := range claims {
			b.Run(st.name+"/"+c.name, func(b *testing.B) {
				s := st.open(b)
				due := time.Now().Add(2*time.Second + time.Duration(n)*time.Second/20_000).UTC().Truncate(time.Millisecond)
				for i := 0; i < n; i += 1000 {
					jobs := make([]*core.Job, min(1000, n-i))
					for k := range jobs {
						jobs[k] = storetest.NewJob("burst", due)
						jobs[k].Key = "key-" + strconv.Itoa((i+k)%1000)
					}
					storetest.Put(b, context.Background(), s, jobs...)
				}
				require.True(b, time.Now().Before(due), "putting took too long")
				drainBurst(b, s, n, due, c.claim)
			})
		}
	}
}

// BenchmarkFairBurst measures fair's point: 100 000 jobs of one key put
// before 100 of another, all due at the same instant, drained by 8
// claimers of up to 100 with fair on and off; small_all_ms is how long
// after due the last job of the second key was claimed.
//
//	go test -run '^$' -bench FairBurst -benchtime 1x ./backends/pebblestore/
func BenchmarkFairBurst(b *testing.B) {
	const big, small = 100_000, 100
	for _, st := range benchStores {
		for _, fair := range []bool{true, false} {
			b.Run(st.name+"/fair="+strconv.FormatBool(fair), func(b *testing.B) {
				s := st.open(b)
				due := time.Now().Add(2*time.Second + big*time.Second/50_000).UTC().Truncate(time.Millisecond)
				for i := 0; i < big+small; i += 1000 {
					jobs := make([]*core.Job, min(1000, big+small-i))
					for k := range jobs {
						jobs[k] = storetest.NewJob("burst", due)
						jobs[k].Key = "big"
						if i+k >= big {
							jobs[k].Key = "small"
						}
					}
					storetest.Put(b, context.Background(), s, jobs...)
				}
				require.True(b, time.Now().Before(due), "putting took too long")
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				var smallSeen int
				var smallAll time.Time
				res := storetest.Drain(ctx, s, storetest.DrainParams{Topic: "burst", N: big + small, Claimers: 8, Max: 100, Wait: 10 * time.Second, Fair: fair,
					Seen: func(at time.Time, jobs []*core.Job) {
						for _, j := range jobs {
							if j.Key == "small" {
								if smallSeen++; smallSeen == small {
									smallAll = at
								}
							}
						}
					}})
				require.Equal(b, big+small, res.Claimed)
				require.Equal(b, small, smallSeen)
				b.ReportMetric(float64(smallAll.Sub(due))/1e6, "small_all_ms")
				b.ReportMetric(float64(res.LastClaim.Sub(due))/1e6, "claimed_all_ms")
			})
		}
	}
}
