package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// The benchmarks of key_concurrency and fair (Key limits in lua/lib.lua),
// each on a standalone server of its own (AOF everysec), as the local
// store's in backends/pebblestore/keys_bench_test.go.

// putKeyed puts n jobs of topic due at due, the i-th with key keyOf(i),
// 1000 to a call; with fair, naming the topic fair as the engine's puts of
// a fair topic do (core.PutJobsParams.Fair).
func putKeyed(b *testing.B, s *Store, topic string, n int, due time.Time, fair bool, keyOf func(i int) string) {
	p := &core.PutJobsParams{}
	if fair {
		p.Fair = []string{topic}
	}
	for i := 0; i < n; i += 1000 {
		p.Jobs = make([]*core.Job, min(1000, n-i))
		for k := range p.Jobs {
			p.Jobs[k] = job(topic, 0)
			p.Jobs[k].RunAt = due
			p.Jobs[k].Key = keyOf(i + k)
		}
		res, err := s.PutJobs(context.Background(), p)
		require.NoError(b, err)
		for _, r := range res {
			require.NoError(b, r.Err)
		}
	}
}

// BenchmarkKeysAtLimit measures a claim of a topic whose 10 000 keys are
// all at their key_concurrency of 1, each with one job reserved and one
// due behind it: the claim that first meets the due ones and parks them
// (parking_claim_ms, once), and then each claim, which finds nothing to
// take (ns/op).
//
//	go test -run '^$' -bench KeysAtLimit ./backends/redisstore/
func BenchmarkKeysAtLimit(b *testing.B) {
	s := openStore(b, benchURL(b, "everysec"), "keys")
	storetest.KeysBlocked(b, s, core.ClaimJobsParams{Topic: "keys", KeyConcurrency: 1}, false)
}

// BenchmarkKeysAtRate measures a claim of a topic whose 10 000 keys are
// all at their rate per key (one an hour), each with its one token taken
// and one job due behind it: the claim that first meets the due ones and
// parks them (parking_claim_ms, once), and then each claim, which finds
// nothing to take (ns/op).
//
//	go test -run '^$' -bench KeysAtRate ./backends/redisstore/
func BenchmarkKeysAtRate(b *testing.B) {
	s := openStore(b, benchURL(b, "everysec"), "keys")
	rate := core.Rate{Limit: 1, Period: time.Hour, Burst: 1, PerKey: true}
	storetest.KeysBlocked(b, s, core.ClaimJobsParams{Topic: "keys", KeyRate: rate}, true)
}

// BenchmarkKeyBurst is BenchmarkBurst over 1 000 keys (DELAYQ_BENCH_BURST
// jobs, default 100 000, the i-th of key i mod 1000), claimed with
// key_concurrency 0 (no bound), 1 and 10, fair without a bound, and a
// rate per key that never binds (1 000 a second, a burst of 1 000, for
// 100 jobs a key): what per_key costs by itself; it reports
// redis-server's CPU per job too. The fair case's puts name the topic
// fair, as the engine's do.
//
//	go test -run '^$' -bench KeyBurst -benchtime 1x ./backends/redisstore/
func BenchmarkKeyBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_BURST", 100_000)
	for _, c := range []struct {
		name  string
		claim storetest.DrainParams
	}{
		{"key_concurrency=0", storetest.DrainParams{}},
		{"key_concurrency=1", storetest.DrainParams{KeyConcurrency: 1}},
		{"key_concurrency=10", storetest.DrainParams{KeyConcurrency: 10}},
		{"fair", storetest.DrainParams{Fair: true}},
		{"rate_per_key", storetest.DrainParams{KeyRate: core.Rate{Limit: 1000, Period: time.Second, Burst: 1000, PerKey: true}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			url := benchURL(b, "everysec")
			s := openStore(b, url, "keyburst")
			due := time.Now().Add(5*time.Second + time.Duration(n)*time.Second/4_000).UTC().Truncate(time.Millisecond)
			putKeyed(b, s, "burst", n, due, c.claim.Fair, func(i int) string { return "key-" + strconv.Itoa(i%1000) })
			require.True(b, time.Now().Before(due), "putting took too long")
			c.claim.Topic, c.claim.N, c.claim.Claimers, c.claim.Max, c.claim.Wait = "burst", n, 8, 100, 10*time.Second
			drainKeyed(b, url, s, n, due, c.claim)
		})
	}
}

// drainKeyed drains the n jobs due at due with claim, acknowledging each,
// and reports when the last was claimed and acknowledged after due, and
// redis-server's CPU per job.
func drainKeyed(b *testing.B, url string, s *Store, n int, due time.Time, claim storetest.DrainParams) storetest.DrainResult {
	cpu0 := redisCPU(b, url)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := storetest.Drain(ctx, s, claim)
	require.Equal(b, n, res.Claimed)
	b.ReportMetric(float64(redisCPU(b, url)-cpu0)/float64(time.Microsecond)/float64(n), "redis_cpu_us/job")
	b.ReportMetric(float64(res.LastClaim.Sub(due))/1e6, "claimed_all_ms")
	b.ReportMetric(float64(res.LastAck.Sub(due))/1e6, "acked_all_ms")
	return res
}

// BenchmarkFairBurst measures fair's point: 100 000 jobs of one key put
// before 100 of another, all due at the same instant, drained by 8
// claimers of up to 100 with fair on and off; small_all_ms is how long
// after due the last job of the second key was claimed. With fair the
// puts name the topic fair, as the engine's do, so that they park its
// jobs by key (Key limits in lua/lib.lua): in the puts_first case before
// the topic's first claim, in the claims_first case after one, as on a
// topic being served.
//
//	go test -run '^$' -bench FairBurst -benchtime 1x ./backends/redisstore/
func BenchmarkFairBurst(b *testing.B) {
	const big, small = 100_000, 100
	for _, c := range []struct {
		name          string
		fair, serving bool
	}{{"fair=true/puts_first", true, false}, {"fair=true/claims_first", true, true}, {"fair=false", false, false}} {
		b.Run(c.name, func(b *testing.B) {
			url := benchURL(b, "everysec")
			s := openStore(b, url, "fairburst")
			if c.serving {
				jobs, err := s.ClaimJobs(context.Background(), &core.ClaimJobsParams{Topic: "burst", Max: 1, Fair: true})
				require.NoError(b, err)
				require.Empty(b, jobs)
			}
			due := time.Now().Add(5*time.Second + big*time.Second/4_000).UTC().Truncate(time.Millisecond)
			putKeyed(b, s, "burst", big+small, due, c.fair, func(i int) string {
				if i < big {
					return "big"
				}
				return "small"
			})
			require.True(b, time.Now().Before(due), "putting took too long")
			var (
				smallSeen int
				smallAll  time.Time
			)
			drainKeyed(b, url, s, big+small, due, storetest.DrainParams{Topic: "burst", N: big + small, Claimers: 8, Max: 100, Wait: 10 * time.Second, Fair: c.fair,
				Seen: func(at time.Time, jobs []*core.Job) {
					for _, j := range jobs {
						if j.Key == "small" {
							if smallSeen++; smallSeen == small {
								smallAll = at
							}
						}
					}
				}})
			require.Equal(b, small, smallSeen)
			b.ReportMetric(float64(smallAll.Sub(due))/1e6, "small_all_ms")
		})
	}
}
