//go:build unix

package pebblestore_test

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// The benchmarks run the local store beside the memory store, the figure
// it is held to, in one run:
//
//	go test -run '^$' -bench . -benchtime 1x ./backends/pebblestore/

// benchStores opens each store measured.
var benchStores = []struct {
	name string
	open func(b *testing.B) core.Store
}{
	{"local", func(b *testing.B) core.Store {
		s, err := pebblestore.Open(pebblestore.Config{Dir: b.TempDir()})
		require.NoError(b, err)
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"memory", func(b *testing.B) core.Store {
		s := memstore.New(memstore.Config{})
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// BenchmarkIntake measures PutJobs of jobs due in an hour from 8
// goroutines, one job per call and in batches (DELAYQ_BENCH_INTAKE jobs,
// default 200 000).
func BenchmarkIntake(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_INTAKE", 200_000)
	for _, st := range benchStores {
		for _, batch := range []int{1, 100, 1000} {
			b.Run(st.name+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
				s := st.open(b)
				cpu0 := cpuTime()
				b.ReportMetric(storetest.Intake(b, s, 8, batch, n), "jobs/s")
				b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(n), "cpu_us/job")
			})
		}
	}
}

// BenchmarkBurst puts DELAYQ_BENCH_BURST jobs (default 100 000) due at one
// instant, then claims and acknowledges them all with 8 claimers of up to
// 100 jobs, and reports how long after the instant the last was claimed
// and acknowledged, and the CPU per job.
func BenchmarkBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_BURST", 100_000)
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			due := time.Now().Add(2*time.Second + time.Duration(n)*time.Second/50_000).UTC().Truncate(time.Millisecond)
			putBurst(b, s, n, due)
			require.True(b, time.Now().Before(due), "putting took too long")
			drainBurst(b, s, n, due, storetest.DrainParams{})
		})
	}
}

// BenchmarkClaimAck measures the store's own work in a burst's drain, from
// one goroutine: an op claims 100 due jobs and acknowledges them with one
// AckJobs, as delayq's WebSocket acks reach the store: ns/job is the
// time per job claimed and acknowledged, cpu_ns/job the process's CPU
// time per job (Pebble's flushes and the collector included), which a
// busy machine disturbs less than the burst's elapsed time.
func BenchmarkClaimAck(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			ctx := context.Background()
			putBurst(b, s, b.N*100, time.Now())
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "burst", Max: 100, Via: core.ViaPull})
				require.NoError(b, err)
				require.Len(b, jobs, 100)
				acks := make([]core.AckJobParams, len(jobs))
				for k, j := range jobs {
					acks[k] = core.AckJobParams{ID: j.ID, Lease: j.Lease}
				}
				res, err := s.AckJobs(ctx, &core.AckJobsParams{Acks: acks})
				require.NoError(b, err)
				for _, r := range res {
					require.NoError(b, r.Err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/job")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*100), "cpu_ns/job")
		})
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkColdBurst is BenchmarkBurst across a restart: the jobs are put,
// the store is closed and opened again, and only then do they come due,
// so that their bodies are read from the tables rather than from memory.
func BenchmarkColdBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_BURST", 100_000)
	dir := b.TempDir()
	s, err := pebblestore.Open(pebblestore.Config{Dir: dir})
	require.NoError(b, err)
	due := time.Now().Add(5*time.Second + time.Duration(n)*time.Second/50_000).UTC().Truncate(time.Millisecond)
	putBurst(b, s, n, due)
	require.NoError(b, s.Close())
	opened := time.Now()
	s, err = pebblestore.Open(pebblestore.Config{Dir: dir})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	b.ReportMetric(float64(time.Since(opened))/1e6, "open_ms")
	require.True(b, time.Now().Before(due), "putting and opening took too long")
	drainBurst(b, s, n, due, storetest.DrainParams{})
}

// putBurst puts n jobs of topic burst due at due, in batches of 1000; with
// DELAYQ_BENCH_PRIORITIES set, of every priority from -10 to 10: in turn,
// or with DELAYQ_BENCH_PRIORITIES=blocks in blocks of n/21 jobs of one
// priority, so that claims by priority take the jobs in the order they
// were put, as claims of plain jobs do.
func putBurst(b *testing.B, s core.Store, n int, due time.Time) {
	priorities := os.Getenv("DELAYQ_BENCH_PRIORITIES")
	for i := 0; i < n; i += 1000 {
		jobs := make([]*core.Job, min(1000, n-i))
		for k := range jobs {
			jobs[k] = storetest.NewJob("burst", due)
			jobs[k].Key = storetest.BenchKey(i + k)
			switch priorities {
			case "":
			case "blocks":
				jobs[k].Priority = (i+k)*21/n - 10
			default:
				jobs[k].Priority = (i+k)%21 - 10
			}
		}
		storetest.Put(b, context.Background(), s, jobs...)
	}
}

// drainBurst claims and acknowledges the n jobs of topic burst with 8
// claimers of up to 100 (with claim's KeyConcurrency and Fair), and
// reports how long after due the last was claimed and acknowledged, and
// the CPU per job.
func drainBurst(b *testing.B, s core.Store, n int, due time.Time, claim storetest.DrainParams) {
	cpu0 := cpuTime()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := storetest.Drain(ctx, s, storetest.DrainParams{Topic: "burst", N: n, Claimers: 8, Max: 100, Wait: 10 * time.Second,
		KeyConcurrency: claim.KeyConcurrency, Fair: claim.Fair, KeyRate: claim.KeyRate})
	cpu := cpuTime() - cpu0
	require.Equal(b, n, res.Claimed)
	b.ReportMetric(float64(res.LastClaim.Sub(due))/1e6, "claimed_all_ms")
	b.ReportMetric(float64(res.LastAck.Sub(due))/1e6, "acked_all_ms")
	b.ReportMetric(float64(cpu)/1e3/float64(n), "cpu_us/job")
}

// BenchmarkGetJob measures GetJob of 10 000 scheduled jobs, read at random
// from 8 goroutines, one op per read.
func BenchmarkGetJob(b *testing.B) {
	const n = 10_000
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			ids := make([]string, n)
			jobs := make([]*core.Job, n)
			for k := range jobs {
				jobs[k] = storetest.NewJob("bench.get", time.Now().Add(time.Hour))
				ids[k] = jobs[k].ID
			}
			storetest.Put(b, context.Background(), s, jobs...)
			b.SetParallelism(4) // 8 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for k := 0; pb.Next(); k += 7919 {
					if _, err := s.GetJob(context.Background(), ids[k%n]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
