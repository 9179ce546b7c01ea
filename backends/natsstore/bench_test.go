package natsstore

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// benchStore opens a store on an embedded server of its own, with the given
// sync setting, in a temporary directory.
func benchStore(b *testing.B, sync string) *Store {
	b.Helper()
	srv, err := StartEmbedded(EmbeddedConfig{DataDir: b.TempDir(), Listen: "127.0.0.1:-1", Sync: sync})
	require.NoError(b, err)
	b.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	require.NoError(b, err)
	b.Cleanup(nc.Close)
	s, err := New(context.Background(), Config{Conn: nc, Prefix: "bench"})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkIntake measures PutJobs of jobs due in an hour, one job per call
// and in batches, for each sync setting, from 8 goroutines:
//
//	go test -run '^$' -bench Intake -benchtime 20000x ./backends/natsstore/
func BenchmarkIntake(b *testing.B) {
	for _, syncMode := range []string{"always", "1s", "2m"} {
		for _, batch := range []int{1, 100, 1000} {
			b.Run("sync="+syncMode+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
				s := benchStore(b, syncMode)
				b.ResetTimer()
				b.ReportMetric(storetest.Intake(b, s, 8, batch, b.N), "jobs/s")
			})
		}
	}
}

// BenchmarkLateness schedules jobs at a steady rate (DELAYQ_BENCH_RATE jobs
// per second, default 1000, over DELAYQ_BENCH_SECONDS seconds, default 5),
// all put ahead of time so that each goes through a real schedule, and
// claims them with 8 waiting claims; it reports how late after run_at each
// claim returned its job:
//
//	go test -run '^$' -bench Lateness -benchtime 1x ./backends/natsstore/
func BenchmarkLateness(b *testing.B) {
	rate := storetest.EnvInt("DELAYQ_BENCH_RATE", 1000)
	seconds := storetest.EnvInt("DELAYQ_BENCH_SECONDS", 5)
	s := benchStore(b, SyncDefault)
	ctx := context.Background()
	n := rate * seconds
	// Putting takes a while at high rates (about 60 000 jobs/s): the first
	// job is due 3 s after the last put is expected to finish.
	first := time.Now().Add(3*time.Second + time.Duration(n)*time.Second/40000).Truncate(time.Millisecond)
	jobs := make([]*core.Job, n)
	for i := range jobs {
		jobs[i] = job("late", 0)
		jobs[i].RunAt = first.Add(time.Duration(i) * time.Second / time.Duration(rate)).UTC().Truncate(time.Millisecond)
	}
	for i := 0; i < n; i += 1000 {
		put(b, s, jobs[i:min(i+1000, n)]...)
	}
	require.True(b, time.Now().Before(first.Add(-time.Second)), "putting took too long")
	b.ResetTimer()
	cpu0 := cpuTime()
	var late, resv []time.Duration // claim returned, and reserved (the claim's now), after run_at
	cctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+10)*time.Second)
	defer cancel()
	storetest.Drain(cctx, s, storetest.DrainParams{
		Topic: "late", N: n, Claimers: 8, Max: 16, Wait: time.Second,
		Seen: func(at time.Time, got []*core.Job) {
			for _, j := range got {
				late = append(late, at.Sub(j.RunAt))
				resv = append(resv, j.UpdatedAt.Sub(j.RunAt))
			}
		},
	})
	b.StopTimer()
	cpu := cpuTime() - cpu0
	if len(late) < n {
		// What the claims managed tells by how much they fell behind.
		slices.Sort(late)
		if len(late) > 0 {
			b.Logf("p50 %s, max %s of those claimed; %.0f cpu_us/job", late[len(late)/2], late[len(late)-1], float64(cpu)/1e3/float64(len(late)))
		}
		b.Fatalf("claimed %d of %d jobs in time", len(late), n)
	}
	slices.Sort(late)
	pct := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / 1e6 }
	b.ReportMetric(pct(0.5), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(float64(late[len(late)-1])/1e6, "max_ms")
	b.ReportMetric(float64(late[0])/1e6, "min_ms")
	slices.Sort(resv)
	b.ReportMetric(float64(resv[len(resv)*99/100])/1e6, "reserved_p99_ms")
	// The process's CPU (store and embedded server) per job from the end
	// of the puts: what the due path costs, whatever else runs on the
	// machine.
	b.ReportMetric(float64(cpu)/1e3/float64(n), "cpu_us/job")
}

// BenchmarkBurst puts DELAYQ_BENCH_BURST jobs (default 100 000) due at one
// instant, each through a real schedule, then claims them with 8 claims of
// up to 100 and acknowledges each from 64 goroutines; it reports how long
// after that instant the last job was claimed and the last acknowledged:
//
//	go test -run '^$' -bench Burst -benchtime 1x ./backends/natsstore/
func BenchmarkBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_BURST", 100_000)
	s := benchStore(b, SyncDefault)
	ctx := context.Background()
	due := time.Now().Add(3*time.Second + time.Duration(n)*time.Second/40000).UTC().Truncate(time.Millisecond)
	for i := 0; i < n; i += 1000 {
		jobs := make([]*core.Job, min(1000, n-i))
		for k := range jobs {
			jobs[k] = job("burst", 0)
			jobs[k].RunAt = due
		}
		put(b, s, jobs...)
	}
	require.True(b, time.Now().Before(due.Add(-s.cfg.Lead)), "putting took too long")
	b.ResetTimer()
	cpu0 := cpuTime()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res := storetest.Drain(cctx, s, storetest.DrainParams{Topic: "burst", N: n, Claimers: 8, Max: 100, Wait: 10 * time.Second})
	claimed, lastClaim, lastAck := res.Claimed, res.LastClaim, res.LastAck
	b.StopTimer()
	cpu := cpuTime() - cpu0
	if claimed < n {
		b.Fatalf("claimed %d of %d jobs", claimed, n)
	}
	b.ReportMetric(float64(lastClaim.Sub(due))/1e6, "claimed_all_ms")
	b.ReportMetric(float64(lastAck.Sub(due))/1e6, "acked_all_ms")
	b.ReportMetric(float64(cpu)/1e3/float64(n), "cpu_us/job")
}
