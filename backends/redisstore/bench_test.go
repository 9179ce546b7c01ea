package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// benchURL starts a server of the benchmark's own and returns its URL: a
// standalone server, or a 3-master cluster when DELAYQ_BENCH_CLUSTER=1.
func benchURL(b *testing.B, fsync string) string {
	b.Helper()
	if os.Getenv("DELAYQ_BENCH_CLUSTER") != "1" {
		return ownServer(b, fsync).URL()
	}
	redistest.Require(b)
	c, err := redistest.StartCluster(3, redistest.Options{Dir: b.TempDir(), AppendFsync: fsync})
	require.NoError(b, err)
	b.Cleanup(c.Stop)
	return c.URL()
}

// BenchmarkIntake measures PutJobs of jobs due in an hour, one job per call
// and in batches, from 8 goroutines, for each persistence setting of a
// standalone server of its own (a 3-master cluster with
// DELAYQ_BENCH_CLUSTER=1), and the server's CPU per job:
//
//	go test -run '^$' -bench Intake -benchtime 200000x ./backends/redisstore/
func BenchmarkIntake(b *testing.B) {
	for _, fsync := range []string{"always", "everysec", ""} {
		for _, batch := range []int{1, 100, 1000} {
			name := "aof=" + cmp.Or(fsync, "off") + "/batch=" + strconv.Itoa(batch)
			b.Run(name, func(b *testing.B) {
				url := benchURL(b, fsync)
				s := openStore(b, url, "bench", benchShards)
				b.ResetTimer()
				cpu0 := redisCPU(b, url)
				b.ReportMetric(storetest.Intake(b, s, 8, batch, b.N), "jobs/s")
				jobs := storetest.IntakeJobs(8, batch, b.N)
				b.ReportMetric(float64(redisCPU(b, url)-cpu0)/float64(time.Microsecond)/float64(jobs), "redis_cpu_us/job")
			})
		}
	}
}

// BenchmarkLateness schedules jobs at a steady rate (DELAYQ_BENCH_RATE jobs
// per second, default 1000, over DELAYQ_BENCH_SECONDS seconds, default 5),
// all put ahead of time so that each waits in its queue until due, and claims them
// with 8 waiting claims of up to 16, acknowledging each job off the claim
// loop from a goroutine of its own, as core's dispatcher does; it
// reports how late after run_at each claim returned its job. The server
// has AOF on with everysec (DELAYQ_BENCH_AOF: always, everysec or off); it
// is standalone, or a 3-master cluster with DELAYQ_BENCH_CLUSTER=1:
//
//	go test -run '^$' -bench Lateness -benchtime 1x ./backends/redisstore/
func BenchmarkLateness(b *testing.B) {
	rate := storetest.EnvInt("DELAYQ_BENCH_RATE", 1000)
	seconds := storetest.EnvInt("DELAYQ_BENCH_SECONDS", 5)
	fsync := cmp.Or(os.Getenv("DELAYQ_BENCH_AOF"), "everysec")
	if fsync == "off" {
		fsync = ""
	}
	url := benchURL(b, fsync)
	s := openStore(b, url, "bench", benchShards)
	ctx := context.Background()
	n := rate * seconds
	first := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	jobs := make([]*core.Job, n)
	for i := range jobs {
		jobs[i] = job("late", 0)
		jobs[i].RunAt = first.Add(time.Duration(i) * time.Second / time.Duration(rate)).UTC().Truncate(time.Millisecond)
	}
	for i := 0; i < n; i += 1000 {
		put(b, s, jobs[i:min(i+1000, n)]...)
	}
	require.True(b, time.Now().Before(first.Add(-500*time.Millisecond)), "putting took too long")
	redisStats(b, url)
	b.ResetTimer()
	cpu0 := redisCPU(b, url)
	var (
		late []time.Duration // claim returned after run_at
		resv []time.Duration // reserved (the claim script's now) after run_at
		slow = map[int]int{} // per 100 ms of run_at: jobs claimed over 5 ms late
	)
	cctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+10)*time.Second)
	defer cancel()
	storetest.Drain(cctx, s, storetest.DrainParams{
		Topic: "late", N: n, Claimers: 8, Max: 16, Wait: time.Second,
		Seen: func(at time.Time, got []*core.Job) {
			for _, j := range got {
				if d := at.Sub(j.RunAt); d > 5*time.Millisecond {
					slow[int(j.RunAt.Sub(first)/(100*time.Millisecond))]++
				}
				late = append(late, at.Sub(j.RunAt))
				resv = append(resv, j.UpdatedAt.Sub(j.RunAt))
			}
		},
	})
	b.StopTimer()
	b.ReportMetric(float64(redisCPU(b, url)-cpu0)/float64(time.Microsecond)/float64(n), "redis_cpu_us/job")
	redisStats(b, url)
	if len(late) < n {
		b.Fatalf("claimed %d of %d jobs in time", len(late), n)
	}
	if os.Getenv("DELAYQ_BENCH_REDISSTATS") != "" {
		for _, k := range slices.Sorted(maps.Keys(slow)) {
			fmt.Fprintf(os.Stderr, "run_at +%5dms: %d jobs over 5 ms late\n", k*100, slow[k])
		}
	}
	slices.Sort(late)
	pct := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / 1e6 }
	b.ReportMetric(pct(0.5), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(float64(late[len(late)-1])/1e6, "max_ms")
	b.ReportMetric(float64(late[0])/1e6, "min_ms")
	slices.Sort(resv)
	b.ReportMetric(float64(resv[len(resv)*99/100])/1e6, "reserved_p99_ms")
}

// BenchmarkMemoryPerPendingJob puts DELAYQ_BENCH_PENDING jobs (default
// 100 000) due in an hour, with the small body {"n":1} (or a JSON string of
// DELAYQ_BENCH_BODY bytes) and no key, into a server of its own without
// persistence, and reports Redis's used_memory (INFO memory) growth per job:
//
//	go test -run '^$' -bench MemoryPerPendingJob -benchtime 1x ./backends/redisstore/
func BenchmarkMemoryPerPendingJob(b *testing.B) {
	pending := storetest.EnvInt("DELAYQ_BENCH_PENDING", 100_000)
	body := []byte(`{"n":1}`)
	if n := storetest.EnvInt("DELAYQ_BENCH_BODY", 0); n >= 2 {
		body = []byte(`"` + strings.Repeat("x", n-2) + `"`)
	}
	srv := ownServer(b, "")
	s := openStore(b, srv.URL(), "delayq")
	before := usedMemory(b, srv)
	b.ResetTimer()
	for i := 0; i < pending; i += 1000 {
		jobs := make([]*core.Job, min(1000, pending-i))
		for k := range jobs {
			jobs[k] = job("orders.close", time.Hour)
			jobs[k].Body = body
		}
		put(b, s, jobs...)
	}
	b.StopTimer()
	after := usedMemory(b, srv)
	b.ReportMetric(float64(after-before)/float64(pending), "B/job")
	b.ReportMetric(float64(after-before)/(1<<20), "MiB")
}

// usedMemory returns the used_memory of INFO memory.
func usedMemory(b *testing.B, srv *redistest.Server) int64 {
	b.Helper()
	info, err := srv.Do("INFO", "memory")
	require.NoError(b, err)
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(b, err)
			return n
		}
	}
	b.Fatalf("no used_memory in INFO memory: %s", info)
	return 0
}

// redisStats logs the server's INFO commandstats and cpu, and resets them,
// when DELAYQ_BENCH_REDISSTATS=1: where the server's time went. With
// DELAYQ_BENCH_REDISSTATS=slowlog the slow log records every command, which
// gives the time per script (and slows the server down).
func redisStats(b *testing.B, url string) {
	b.Helper()
	mode := os.Getenv("DELAYQ_BENCH_REDISSTATS")
	if mode != "1" && mode != "slowlog" {
		return
	}
	u, err := ParseURL(url)
	require.NoError(b, err)
	defer u.Close()
	ctx := context.Background()
	nodes := []redis.Cmdable{u}
	if cc, ok := u.(*redis.ClusterClient); ok {
		// Each master's, in turn.
		nodes = nil
		var mu sync.Mutex
		require.NoError(b, cc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, m)
			return nil
		}))
	}
	for _, c := range nodes {
		nodeStats(b, ctx, c, mode)
	}
}

// nodeStats logs and resets one server's statistics for redisStats.
func nodeStats(b *testing.B, ctx context.Context, c redis.Cmdable, mode string) {
	b.Helper()
	for _, sec := range []string{"commandstats", "cpu"} {
		info, err := c.Info(ctx, sec).Result()
		require.NoError(b, err)
		fmt.Fprintln(os.Stderr, info)
	}
	// The slow log, logging every command, gives each script's own cost.
	logs, err := c.SlowLogGet(ctx, -1).Result()
	require.NoError(b, err)
	names := map[string]string{}
	for _, sc := range shardScripts {
		for v, script := range sc.scripts {
			names[script.Hash()] = sc.name + "_" + variants[v].suffix
		}
	}
	type agg struct {
		n    int
		took time.Duration
	}
	per := map[string]*agg{}
	for _, l := range logs {
		name := ""
		if len(l.Args) > 0 {
			name = strings.ToLower(l.Args[0])
		}
		switch {
		case name == "evalsha" && len(l.Args) > 1:
			name = "evalsha " + cmp.Or(names[l.Args[1]], l.Args[1])
		case name == "fcall" && len(l.Args) > 1:
			name = "fcall " + strings.TrimPrefix(l.Args[1], library.name+"_")
		}
		a := per[name]
		if a == nil {
			a = &agg{}
			per[name] = a
		}
		a.n++
		a.took += l.Duration
	}
	for name, a := range per {
		fmt.Fprintf(os.Stderr, "slowlog %-20s calls=%d total=%s per_call=%s\n", name, a.n, a.took, a.took/time.Duration(a.n))
	}
	require.NoError(b, c.ConfigResetStat(ctx).Err())
	require.NoError(b, c.SlowLogReset(ctx).Err())
	if mode == "slowlog" {
		require.NoError(b, c.ConfigSet(ctx, "slowlog-max-len", "1000000").Err())
		require.NoError(b, c.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err())
	}
}

// redisCPU returns the CPU time the server has used (INFO cpu, user and
// system, every thread), summed over the masters of a cluster, to report
// the server's cost per job: the measure least disturbed by other
// processes on the machine.
func redisCPU(b *testing.B, url string) time.Duration {
	return redisCPUOf(b, url, "used_cpu_user:", "used_cpu_sys:")
}

// redisSysCPU returns the part of redisCPU spent in the kernel: the
// server's system calls, and its switches in and out of the CPU.
func redisSysCPU(b *testing.B, url string) time.Duration {
	return redisCPUOf(b, url, "used_cpu_sys:")
}

// redisCPUOf returns the sum of the CPU times of INFO cpu named by fields,
// summed over the masters of a cluster.
func redisCPUOf(b *testing.B, url string, fields ...string) time.Duration {
	b.Helper()
	c, err := ParseURL(url)
	require.NoError(b, err)
	defer c.Close()
	ctx := context.Background()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		cpu, err := serverCPU(ctx, c, fields)
		require.NoError(b, err)
		return cpu
	}
	var mu sync.Mutex
	var total time.Duration
	require.NoError(b, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		cpu, err := serverCPU(ctx, m, fields)
		mu.Lock()
		defer mu.Unlock()
		total += cpu
		return err
	}))
	return total
}

// serverCPU returns the CPU times of INFO cpu named by fields of one
// server, summed.
func serverCPU(ctx context.Context, c redis.Cmdable, fields []string) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		for _, f := range fields {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), f); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, err
				}
				total += x
			}
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// benchShards sets the shard count from DELAYQ_BENCH_SHARDS (default: the
// store's own default), to measure what shards cost on one server, and the
// form of the jobs from DELAYQ_BENCH_JOBS (packed, the default of a new
// prefix, or hash), to compare the two.
func benchShards(c *Config) {
	c.Shards = storetest.EnvInt("DELAYQ_BENCH_SHARDS", 0)
	c.JobForm = os.Getenv("DELAYQ_BENCH_JOBS")
}

// BenchmarkBurst puts DELAYQ_BENCH_BURST jobs (default 100 000) due at one
// instant, then claims them with 8 claims of up to 100 and acknowledges each
// from 64 goroutines; it reports how long after that instant the last job
// was claimed and the last acknowledged. AOF is on with everysec;
// DELAYQ_BENCH_CLUSTER=1 runs it on a 3-master cluster:
//
//	go test -run '^$' -bench Burst -benchtime 1x ./backends/redisstore/
func BenchmarkBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_BURST", 100_000)
	url := benchURL(b, "everysec")
	s := openStore(b, url, "bench", benchShards)
	ctx := context.Background()
	due := time.Now().Add(5 * time.Second).UTC().Truncate(time.Millisecond)
	for i := 0; i < n; i += 1000 {
		jobs := make([]*core.Job, min(1000, n-i))
		for k := range jobs {
			jobs[k] = job("burst", 0)
			jobs[k].RunAt = due
			jobs[k].Key = storetest.BenchKey(i + k)
		}
		put(b, s, jobs...)
	}
	require.True(b, time.Now().Before(due), "putting took too long")
	redisStats(b, url)
	b.ResetTimer()
	cpu0, sys0 := redisCPU(b, url), redisSysCPU(b, url)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res := storetest.Drain(cctx, s, storetest.DrainParams{Topic: "burst", N: n, Claimers: 8, Max: 100, Wait: 10 * time.Second})
	claimed, lastClaim, lastAck := res.Claimed, res.LastClaim, res.LastAck
	b.StopTimer()
	b.ReportMetric(float64(redisCPU(b, url)-cpu0)/float64(time.Microsecond)/float64(n), "redis_cpu_us/job")
	// The kernel's part apart: on a Cluster whose masters share this
	// machine's cores it grows with the servers' switches, not with
	// the work per job (docs/benchmarks.md).
	b.ReportMetric(float64(redisSysCPU(b, url)-sys0)/float64(time.Microsecond)/float64(n), "redis_sys_us/job")
	redisStats(b, url)
	if claimed < n {
		b.Fatalf("claimed %d of %d jobs", claimed, n)
	}
	b.ReportMetric(float64(lastClaim.Sub(due))/1e6, "claimed_all_ms")
	b.ReportMetric(float64(lastAck.Sub(due))/1e6, "acked_all_ms")
}

// BenchmarkChainBurst runs storetest.ChainBurst of DELAYQ_BENCH_CHAIN jobs
// (default 20 000), without and with a next step, side by side, each on a
// prefix of its own of one server (AOF everysec), and reports
// redis-server's CPU per job of the whole:
//
//	DELAYQ_BENCH_CHAIN=20000 go test -run '^$' -bench '^BenchmarkChainBurst$' -benchtime 1x -count 3 ./backends/redisstore/
func BenchmarkChainBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_CHAIN", 20_000)
	url := benchURL(b, "everysec")
	for _, then := range []bool{false, true} {
		b.Run(fmt.Sprintf("then=%t", then), func(b *testing.B) {
			// A prefix of its own: -count runs each case again on the same server.
			s := openStore(b, url, fmt.Sprintf("chain-%t-%d", then, time.Now().UnixNano()))
			cpu0 := redisCPU(b, url)
			burst, steps := storetest.ChainBurst(b, s, n, then)
			b.ReportMetric(burst.Seconds(), "burst_s")
			if then {
				b.ReportMetric(steps.Seconds(), "steps_after_s")
			}
			b.ReportMetric(float64(redisCPU(b, url)-cpu0)/float64(time.Microsecond)/float64(n), "redis_cpu_us/job")
		})
	}
}
