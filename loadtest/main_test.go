package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
)

// TestHarness runs the whole harness, scaled down, against delayq on the
// local default backend (so NATS intake and files on disk are measured too),
// and checks that the report, its figures and the plots are there.
func TestHarness(t *testing.T) {
	out := t.TempDir()
	cfg := config{}
	cfg.flags(flagSet())
	cfg.Backend = "local"
	cfg.Out = out
	cfg.IntakeFor = time.Second
	cfg.Pending = 30_000
	cfg.Burst = 2_000
	cfg.Rate = 500
	cfg.Duration = 2 * time.Second
	cfg.Lead = time.Second
	cfg.Subscribers = 2
	cfg.Phases += ",pull"
	cfg.PullJobs = 500
	cfg.Settle = 100 * time.Millisecond
	cfg.Profile = true
	res, report, _ := runHarness(t, &cfg, 3*time.Minute)
	for name, in := range map[string]intakeResult{"single": res.Intake.HTTPSingle, "batch": res.Intake.HTTPBatch, "nats": *res.Intake.NATS} {
		require.Positive(t, in.Jobs, name)
		require.Positive(t, in.PerSecond, name)
		require.Zero(t, in.Errors, name)
	}
	require.GreaterOrEqual(t, res.Memory.Pending, int64(30_000))
	require.Greater(t, res.Memory.Loaded.Delayq, res.Memory.Baseline.Delayq, "RSS grows with pending jobs")
	require.Positive(t, res.Memory.DiskBytes)
	require.Equal(t, 2_000, res.Burst.Received)
	require.Positive(t, res.Burst.AckedAll)
	require.GreaterOrEqual(t, res.Burst.AckedAll, res.Burst.DeliveredAll-0.001)
	require.Positive(t, res.Burst.DelayqCPUMicrosPerJob)
	require.Zero(t, res.Burst.BackendCPUMicrosPerJob, "the local store has no server of its own")
	require.Equal(t, 1_000, res.Lateness.Received)
	require.Positive(t, res.Lateness.Stats.Max)
	require.NotEmpty(t, res.Lateness.Series)

	require.Equal(t, int64(500), res.Pull.Acked)
	require.Positive(t, res.Pull.PerSecond)
	require.Equal(t, 1, res.Pull.Batch)

	require.Len(t, res.CPU, 6, "a CPU reading per phase but memory")
	for _, p := range res.CPU {
		require.Positive(t, p.Cores["delayq"]+p.Cores["harness"], p.Phase)
	}

	for _, want := range []string{"## Against the targets", "## Intake", "## Memory", "## Burst", "## Pull consumers", "## Lateness", "## CPU", "delayq's CPU per job, from the instant to the last ack", "(lateness-over-time.png)", "(lateness-histogram.png)", "(burst.png)"} {
		require.Contains(t, report, want)
	}
	for _, name := range []string{"lateness-over-time.png", "lateness-histogram.png", "burst.png"} {
		f, err := os.Open(filepath.Join(out, name))
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, name)
		require.Greater(t, img.Bounds().Dx(), 100, name)
	}
	for _, phase := range []string{"intake-http-batch", "lateness"} {
		top, err := os.ReadFile(filepath.Join(out, "cpu-"+phase+".txt"))
		require.NoError(t, err)
		require.Contains(t, string(top), "flat%", phase)
	}
}

// TestHarnessPrioritiesPause runs the burst and lateness phases on the
// memory backend with jobs of every priority and topics paused while
// their jobs are pushed: every job comes once, and the report says how the
// phases ran.
func TestHarnessPrioritiesPause(t *testing.T) {
	out := t.TempDir()
	cfg := config{}
	cfg.flags(flagSet())
	cfg.Backend = "memory"
	cfg.Out = out
	cfg.Phases = "burst,lateness"
	cfg.Burst = 2_000
	cfg.Rate = 500
	cfg.Duration = 2 * time.Second
	cfg.Lead = time.Second
	cfg.Subscribers = 2
	cfg.Priorities, cfg.Pause = true, true
	res, report, _ := runHarness(t, &cfg, 2*time.Minute)
	require.Equal(t, 2_000, res.Burst.Received)
	require.Zero(t, res.Burst.Duplicates)
	require.Empty(t, res.Burst.Errors)
	require.Equal(t, 1_000, res.Lateness.Received)
	require.Empty(t, res.Lateness.Errors)
	require.Contains(t, report, "every one from -10 to 10 in turn")
	require.Contains(t, report, "paused while the jobs are pushed")
}

// TestHarnessSoak runs the soak phase, scaled down, on the local default
// backend: every job comes, a reading is taken every interval with
// delayq's memory, goroutines and descriptors, and the report has its
// drift table and the stacked plot.
func TestHarnessSoak(t *testing.T) {
	out := t.TempDir()
	cfg := config{}
	cfg.flags(flagSet())
	cfg.Backend = "local"
	cfg.Out = out
	cfg.Phases = "soak"
	cfg.SoakRate = 300
	cfg.SoakFor = 6 * time.Second
	cfg.SoakSample = time.Second
	cfg.Lead = 500 * time.Millisecond
	cfg.Subscribers = 2
	res, report, _ := runHarness(t, &cfg, 2*time.Minute)
	s := res.Soak
	require.NotNil(t, s)
	require.Equal(t, 1_800, s.Pushed)
	require.Equal(t, 1_800, s.Received)
	require.Empty(t, s.Errors)
	// A reading at the start, one a second, one at the end.
	require.GreaterOrEqual(t, len(s.Samples), 7)
	for _, x := range s.Samples {
		require.Positive(t, x.RSS, "at %.1fs", x.T)
		require.Positive(t, x.Goroutines, "at %.1fs", x.T)
		require.Positive(t, x.FDs, "at %.1fs", x.T)
	}
	last := s.Samples[len(s.Samples)-1]
	require.Equal(t, 1_800, last.Received)
	require.Zero(t, last.Unfinished)
	require.GreaterOrEqual(t, len(s.Windows), 5)
	require.Equal(t, 1_800, func() int {
		n := 0
		for _, w := range s.Windows {
			n += w.Jobs
		}
		return n
	}())
	measures := map[string]bool{}
	for _, d := range s.Drift {
		measures[d.Measure] = true
		require.Positive(t, d.First, d.Measure)
		require.Positive(t, d.Last, d.Measure)
	}
	require.True(t, measures["goroutines"] && measures["open file descriptors"] && measures["lateness p99 of each window, ms"], s.Drift)
	require.Contains(t, report, "## Soak")
	require.Contains(t, report, "(soak.png)")
	f, err := os.Open(filepath.Join(out, "soak.png"))
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Greater(t, img.Bounds().Dy(), img.Bounds().Dx(), "four plots one above the other")
}

// TestHarnessPullBatch runs the pull phase alone on the memory backend with
// consumers that claim many jobs and acknowledge them with one request.
func TestHarnessPullBatch(t *testing.T) {
	out := t.TempDir()
	cfg := config{}
	cfg.flags(flagSet())
	cfg.Backend = "memory"
	cfg.Out = out
	cfg.Phases = "pull"
	cfg.PullJobs = 2_000
	cfg.PullWorkers = 4
	cfg.PullBatch = 100
	res, report, _ := runHarness(t, &cfg, 2*time.Minute)
	require.Equal(t, int64(2_000), res.Pull.Acked)
	require.Zero(t, res.Pull.Errors, res.Pull.FirstErr)
	require.Equal(t, 100, res.Pull.Batch)
	require.Positive(t, res.Pull.PerSecond)

	require.Contains(t, report, "claim up to 100 and ack them with one request")
	require.Contains(t, report, "one `POST /v1/acks`")
}

// TestHarnessRetention runs the retention phase, scaled down, against
// delayq on the local backend with --retention-max-jobs: the store stops
// keeping every finished job once the bound's prune has run (every 10 s),
// and the readings of the store's files, CPU and I/O are there.
func TestHarnessRetention(t *testing.T) {
	out := t.TempDir()
	cfg := config{}
	cfg.flags(flagSet())
	cfg.Backend = "local"
	cfg.Out = out
	cfg.Phases = "retention"
	cfg.Retention = time.Hour
	cfg.RetentionMaxJobs = 600
	cfg.RetentionRate = 300
	cfg.RetentionFor = 24 * time.Second
	cfg.RetentionSample = time.Second
	cfg.Subscribers = 2
	res, report, _ := runHarness(t, &cfg, 3*time.Minute)
	rt := res.Retention
	require.NotNil(t, rt)
	require.Equal(t, 300*24, rt.Pushed)
	require.Equal(t, rt.Pushed, rt.Received)
	require.Zero(t, rt.PushErrors)
	require.Greater(t, len(rt.Samples), 20)
	last := rt.Samples[len(rt.Samples)-1]
	require.Positive(t, last.StoreBytes)
	require.Positive(t, last.CPUSeconds)
	// The bound plus at most the jobs of one prune interval (10 s), well
	// under all that finished.
	require.LessOrEqual(t, last.Finished, int64(600+300*10), "finished jobs kept")
	require.Less(t, last.Finished, int64(rt.Received))
	require.NotNil(t, rt.Steady)
	require.Positive(t, rt.Steady.Kept)
	require.Positive(t, rt.Steady.Cores)
	if _, _, err := procIO(os.Getpid()); err == nil {
		require.Positive(t, last.WriteBytes, "block-device writes")
	}

	// The store as delayq left it (acks in flight at the last reading may
	// have landed since, and a prune may have run, down to the bound): its
	// finished jobs, each with its state, record and finish order, and
	// those whose ack the shutdown cut off, unfinished with their records,
	// in compacted tables.
	require.NotNil(t, rt.Store)
	require.LessOrEqual(t, rt.Store.FinishedJobs, int64(rt.Received))
	require.GreaterOrEqual(t, rt.Store.FinishedJobs, int64(600))
	require.Equal(t, rt.Store.FinishedJobs+rt.Store.Keys[keyKinds['m']], rt.Store.Keys[keyKinds['j']])
	require.Equal(t, rt.Store.FinishedJobs, rt.Store.Keys[keyKinds['f']])
	require.Positive(t, rt.Store.CompactedBytes)

	for _, want := range []string{"## Retention at steady state", "B per finished job kept**", "--retention-max-jobs 600", "bytes per finished job kept", "(retention.png)", "## CPU"} {
		require.Contains(t, report, want)
	}
	f, err := os.Open(filepath.Join(out, "retention.png"))
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err)
}

// TestHarnessRawRedis runs the raw Redis baseline alone, scaled down, on
// a redis-server of its own: no delayq starts, every job is acknowledged
// and nothing is left, and redis-server's CPU is read. It fails without
// redis-server, which the harness needs for it.
func TestHarnessRawRedis(t *testing.T) {
	require.NoError(t, redistest.Available(), redistest.Install)
	// Enough jobs for redis-server's CPU to span several 10 ms ticks.
	res, report := runBaseline(t, "rawredis", 20_000)
	rr := res.RawRedis
	require.NotNil(t, rr)
	require.Equal(t, 20_000, rr.Jobs)
	require.Equal(t, int64(20_000), rr.Acked)
	require.Zero(t, rr.Left)
	require.Zero(t, rr.Errors, rr.FirstErr)
	require.GreaterOrEqual(t, rr.Claims, int64(20_000/rawClaimMax))
	require.Positive(t, rr.AckedAll)
	require.Positive(t, rr.PerSecond)
	require.Contains(t, rr.Server, "appendonly yes, appendfsync everysec")
	requireServerFigures(t, rr.serverFigures)
	require.Contains(t, rr.Command, "go run ./loadtest")
	for _, want := range []string{"raw Redis baseline, no delayq", "## Raw Redis baseline", "Redis CPU per job", " µs |"} {
		require.Contains(t, report, want)
	}
}

// runBaseline runs phase, a baseline alone (no delayq starts), with a
// burst of burst jobs, and returns its results and report, which holds
// that phase's CPU and no targets.
func runBaseline(t *testing.T, phase string, burst int) (results, string) {
	t.Helper()
	cfg := config{}
	cfg.flags(flagSet())
	cfg.Out = t.TempDir()
	cfg.Phases = phase
	cfg.Burst = burst
	res, report, log := runHarness(t, &cfg, 2*time.Minute)
	require.NotContains(t, log, "starting delayq")
	require.Equal(t, "none", res.Config.Backend)
	require.Len(t, res.CPU, 1)
	require.Equal(t, phase, res.CPU[0].Phase)
	require.Contains(t, report, "## CPU")
	require.NotContains(t, report, "## Against the targets")
	return res, report
}

// requireServerFigures checks that a baseline's server CPU was read.
func requireServerFigures(t *testing.T, f serverFigures) {
	t.Helper()
	require.True(t, f.CPUMeasured)
	require.Positive(t, f.CPUSeconds)
	require.Positive(t, f.Cores)
	require.Positive(t, f.CPUMicrosPerJob)
}

// runHarness runs the harness with cfg, bounded by timeout, and returns
// the results it wrote, its report and its log.
func runHarness(t *testing.T, cfg *config, timeout time.Duration) (res results, report, log string) {
	t.Helper()
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	require.NoError(t, run(ctx, cfg, &buf), buf.String())
	data, err := os.ReadFile(filepath.Join(cfg.Out, "results.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &res))
	md, err := os.ReadFile(filepath.Join(cfg.Out, "report.md"))
	require.NoError(t, err)
	return res, string(md), buf.String()
}

// TestConfigCheck refuses what cannot be run.
func TestConfigCheck(t *testing.T) {
	for _, bad := range []func(*config){
		func(c *config) { c.Phases = "intake,nope" },
		func(c *config) { c.Batch = 1001 },
		func(c *config) { c.Rate = 0 },
		func(c *config) { c.Prefetch = 0 },
		func(c *config) { c.Workers = 0 },
		func(c *config) { c.Phases = "pull"; c.PullWorkers = 0 },
		func(c *config) { c.Phases = "pull"; c.PullBatch = 0 },
		func(c *config) { c.Phases = "pull"; c.PullBatch = 1001 },
		func(c *config) { c.Phases = "retention"; c.RetentionRate = 0 },
		func(c *config) { c.Phases = "retention"; c.RetentionMaxJobs = -1 },
		func(c *config) { c.Phases = "retention"; c.RetentionFor = c.Retention }, // no steady window
		func(c *config) { c.Phases = "retention"; c.Server = "http://127.0.0.1:8080" },
		func(c *config) { c.Phases = "rawredis"; c.Burst = 0 },
		func(c *config) { c.Phases = "beanstalkd"; c.Burst = 0 },
		func(c *config) { c.Phases = "beanstalkd"; c.BeanstalkdFsync = -time.Millisecond },
		func(c *config) { c.Phases = "beanstalkd"; c.BeanstalkdFsync = 1500 * time.Microsecond },
		func(c *config) { c.Phases = "soak"; c.SoakRate = 0 },
		func(c *config) { c.Phases = "soak"; c.SoakSample = 0 },
	} {
		cfg := config{}
		cfg.flags(flagSet())
		require.NoError(t, cfg.check())
		bad(&cfg)
		require.Error(t, cfg.check())
	}
}

func flagSet() *flag.FlagSet { return flag.NewFlagSet("loadtest", flag.ContinueOnError) }

// TestHarnessBeanstalkd runs the beanstalkd baseline alone, scaled down, on
// a beanstalkd of its own: no delayq starts, every job is deleted and
// none is left, and beanstalkd's CPU is read. It fails without beanstalkd,
// which the harness needs for it.
func TestHarnessBeanstalkd(t *testing.T) {
	_, err := exec.LookPath("beanstalkd")
	require.NoError(t, err, "beanstalkd is not installed (Debian: apt-get install beanstalkd)")
	// Enough jobs for beanstalkd's CPU to span several 10 ms ticks.
	res, report := runBaseline(t, "beanstalkd", 5_000)
	br := res.Beanstalkd
	require.NotNil(t, br)
	require.Equal(t, 5_000, br.Jobs)
	require.Equal(t, int64(5_000), br.Deleted)
	require.Zero(t, br.Left)
	require.Zero(t, br.Errors, br.FirstErr)
	require.Positive(t, br.AckedAll)
	require.Positive(t, br.PerSecond)
	require.Contains(t, br.Server, "binlog, fsync at most every 2 ms (-f 2)")
	requireServerFigures(t, br.serverFigures)
	for _, want := range []string{"beanstalkd baseline, no delayq", "## beanstalkd baseline", "beanstalkd CPU per job"} {
		require.Contains(t, report, want)
	}
}

// TestReportBeanstalkdBesideBurst sets delayq's burst against beanstalkd's
// when both ran.
func TestReportBeanstalkdBesideBurst(t *testing.T) {
	r := &results{Config: config{Backend: "local"}, Burst: &burstResult{AckedAll: 3}, Beanstalkd: &beanstalkdResult{baseline: baseline{AckedAll: 2}, Deleted: 10}}
	var b strings.Builder
	writeBeanstalkd(&b, r)
	require.Contains(t, b.String(), "delayq's burst in this run (local backend): all acknowledged 3.000 s after its instant, 1.50× beanstalkd's.")
	r.Burst = nil
	b.Reset()
	writeBeanstalkd(&b, r)
	require.NotContains(t, b.String(), "delayq's burst")
}
