// Command loadtest is delayq's load harness. For a chosen backend it
// starts the backend's server and `delayq serve` as separate processes (or
// measures one already running), then measures, in order:
//
//   - intake in jobs/s: one job per HTTP request, HTTP batches, and NATS
//     publishes to delayq.push.<topic> (NATS backends);
//   - memory: resident memory of delayq and of the backend's server per
//     pending job once -pending jobs wait (1 million by default), and the
//     backend's files on disk;
//   - burst: -burst jobs (100 000) due at one instant, delivered to
//     WebSocket subscribers that acknowledge each: the time from that
//     instant until the last is received and until the last is
//     acknowledged;
//   - lateness (receipt minus run_at) at a steady -rate of due jobs
//     (10 000/s) for -duration, p50/p99/max, over a store that still holds
//     the pending jobs;
//   - pull, only when -phases names it: -pull-jobs due jobs drained by
//     -pull-workers HTTP consumers, each claiming -pull-batch jobs at a
//     time (1 by default, acknowledged one by one; more, acknowledged
//     together with one POST /v1/acks), in jobs/s;
//   - retention, only when -phases names it: jobs due at once at
//     -retention-rate (1 000/s), each acknowledged, for
//     -retention-duration (15 min), with serve started with -retention
//     (5 min) and -retention-max-jobs, so that the store deletes finished
//     jobs as fast as they finish; every -retention-sample it reads the
//     store's files, delayq's CPU time and block-device I/O and the
//     finished jobs kept, and sums up the steady state;
//   - soak, only when -phases names it: -soak-rate (2 000) jobs/s, each
//     due -lead after its push and acknowledged, for -soak-duration (30
//     min), with serve started with -retention; every -soak-sample (10 s)
//     it reads delayq's resident memory, goroutines and open file
//     descriptors (and a separate backend server's memory), and it plots
//     them with the lateness p99 of each interval: a leak is a line that
//     climbs;
//   - rawredis, only when -phases names it: a baseline without delayq,
//     on its own redis-server (AOF, fsync every second) or -redis-url:
//     -burst jobs due at one instant in a sorted set, each body in a hash,
//     drained by 4 consumers that claim up to 100 with one Lua script
//     call and acknowledge them with one pipeline: seconds from the
//     instant to the last ack and redis-server's CPU per job. With no
//     other phase, no delayq is started;
//   - beanstalkd, only when -phases names it: a baseline without delayq,
//     on its own beanstalkd (which must be installed: Debian's package
//     beanstalkd) with a binlog fsynced at most every -beanstalkd-fsync
//     (2 ms): -burst jobs due at one instant, drained by 8 connections
//     that each reserve a job and delete it: seconds from the instant to
//     the last delete and beanstalkd's CPU per job. With no other phase
//     but rawredis, no delayq is started.
//
// It writes report.md, results.json and PNG plots (lateness over time,
// its histogram, the burst's deliveries over time, the retention phase's
// files over time, the soak's resources over time) to -out. A default run
// takes one to two and a half minutes on 2 cores; a backend that falls
// behind adds at most two minutes of waiting to the burst and to the
// lateness phase, and -timeout (10 min, plus -retention-duration or
// -soak-duration with those phases) bounds the whole run:
//
//	go run ./loadtest                     # the local default
//	go run ./loadtest -backend nats       # a separate nats-server
//	go run ./loadtest -backend redis      # redis-server, AOF everysec
//	go run ./loadtest -server http://127.0.0.1:8080 -pid 1234
//	go run ./loadtest -phases retention -retention 5m -retention-duration 15m
//	go run ./loadtest -phases soak        # 30 min at 2 000 jobs/s
//	go run ./loadtest -phases rawredis    # raw Redis, no delayq
//	go run ./loadtest -phases burst,beanstalkd   # the burst beside beanstalkd
//
// Everything runs on this machine, so the harness's own CPU competes with
// delayq and its backend: the figures are what one machine does end to
// end, client included.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// config is the harness's flags.
type config struct {
	Backend      string        `json:"backend"`
	Server       string        `json:"server,omitempty"`
	NATSURL      string        `json:"nats_url,omitempty"`
	PID          int           `json:"-"`
	BackendPID   int           `json:"-"`
	Delayq       string        `json:"-"`
	Out          string        `json:"-"`
	Phases       string        `json:"phases"`
	IntakeFor    time.Duration `json:"intake_duration"`
	Workers      int           `json:"workers"`
	Batch        int           `json:"batch"`
	BatchWorkers int           `json:"batch_workers"`
	NATSWindow   int           `json:"nats_window"`
	Pending      int           `json:"pending"`
	Burst        int           `json:"burst"`
	Rate         int           `json:"rate"`
	Duration     time.Duration `json:"duration"`
	Lead         time.Duration `json:"lead"`
	PullJobs     int           `json:"pull_jobs"`
	PullWorkers  int           `json:"pull_workers"`
	PullBatch    int           `json:"pull_batch"`
	Subscribers  int           `json:"subscribers"`
	Prefetch     int           `json:"prefetch"`
	Settle       time.Duration `json:"settle"`
	Priorities   bool          `json:"priorities,omitempty"`
	Pause        bool          `json:"pause,omitempty"`
	// Encrypt runs serve with encryption at rest (--encryption-keys).
	Encrypt bool          `json:"encrypt,omitempty"`
	Profile bool          `json:"profile"`
	Timeout time.Duration `json:"-"`
	// RedisURL is the rawredis phase's server, instead of its own.
	RedisURL string `json:"redis_url,omitempty"`
	// RedisArgs are more arguments of the redis-servers the harness
	// starts (the redis backend's and the rawredis phase's).
	RedisArgs []string `json:"redis_args,omitempty"`
	// BeanstalkdFsync is the beanstalkd phase's -f: the least time
	// between two fsyncs of its binlog, 0 for one after every write.
	BeanstalkdFsync time.Duration `json:"beanstalkd_fsync,omitempty"`
	// The retention phase's.
	Retention        time.Duration `json:"retention,omitempty"`
	RetentionMaxJobs int64         `json:"retention_max_jobs,omitempty"`
	RetentionRate    int           `json:"retention_rate,omitempty"`
	RetentionFor     time.Duration `json:"retention_duration,omitempty"`
	RetentionSample  time.Duration `json:"retention_sample,omitempty"`
	// The soak phase's.
	SoakRate   int           `json:"soak_rate,omitempty"`
	SoakFor    time.Duration `json:"soak_duration,omitempty"`
	SoakSample time.Duration `json:"soak_sample,omitempty"`
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.Backend, "backend", "local", "backend to start: local (the default), jetstream (NATS JetStream in process), nats (a separate nats-server), redis or memory")
	fs.StringVar(&c.Server, "server", "", "base URL of a running delayq to measure instead of starting one")
	fs.StringVar(&c.NATSURL, "nats-url", "", "with -server: NATS URL of its intake, with the client user's credentials (nats://delayq-client:PASSWORD@host:4222) for delayq's in-process server (none: no NATS intake figure)")
	fs.IntVar(&c.PID, "pid", 0, "with -server: process id of delayq, to read its memory")
	fs.IntVar(&c.BackendPID, "backend-pid", 0, "with -server: process id of the backend's server, to read its memory")
	fs.StringVar(&c.Delayq, "delayq", "", "delayq binary to run (default: go build ./cmd/delayq)")
	fs.StringVar(&c.Out, "out", "", "directory of the report and plots (default loadtest-report/<backend>)")
	fs.StringVar(&c.Phases, "phases", "intake,memory,burst,lateness", "comma-separated phases to run: intake, memory, burst, lateness, and pull, retention, soak, rawredis and beanstalkd (not by default)")
	fs.DurationVar(&c.IntakeFor, "intake-duration", 10*time.Second, "how long each intake measurement runs")
	fs.IntVar(&c.Workers, "workers", 32, "concurrent requests of one job each")
	fs.IntVar(&c.Batch, "batch", 1000, "jobs per batch request")
	fs.IntVar(&c.BatchWorkers, "batch-workers", 8, "concurrent batch requests")
	fs.IntVar(&c.NATSWindow, "nats-window", 2048, "NATS publishes awaiting their answer at once")
	fs.IntVar(&c.Pending, "pending", 1_000_000, "pending jobs to hold (topped up after intake) when memory is measured")
	fs.IntVar(&c.Burst, "burst", 100_000, "jobs due at one instant")
	fs.IntVar(&c.Rate, "rate", 10_000, "due jobs per second for lateness")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "how long jobs come due for lateness")
	fs.DurationVar(&c.Lead, "lead", 2*time.Second, "how long before its run_at each lateness job is pushed")
	fs.IntVar(&c.PullJobs, "pull-jobs", 20_000, "due jobs the pull consumers drain")
	fs.IntVar(&c.PullWorkers, "pull-workers", 32, "pull consumers, each claiming and acknowledging jobs over HTTP")
	fs.IntVar(&c.PullBatch, "pull-batch", 1, "jobs each pull consumer claims at once (1-1000): 1 acknowledges each with POST /v1/jobs/{id}/ack, more all of them with one POST /v1/acks")
	fs.IntVar(&c.Subscribers, "subscribers", 4, "WebSocket subscribers of the burst and lateness topics")
	fs.IntVar(&c.Prefetch, "prefetch", 1000, "prefetch of each subscriber")
	fs.DurationVar(&c.Settle, "settle", 5*time.Second, "pause between the last pending job pushed and the memory reading")
	fs.BoolVar(&c.Priorities, "priorities", false, "give the burst and lateness jobs priorities, every one from -10 to 10 in turn")
	fs.BoolVar(&c.Pause, "pause", false, "pause the burst and lateness topics while their jobs are pushed, and resume each when its first job is due")
	fs.BoolVar(&c.Encrypt, "encrypt", false, "start delayq with encryption at rest: --encryption-keys with a fresh key")
	fs.BoolVar(&c.Profile, "profile", false, "save a CPU profile of delayq for each phase (cpu-<phase>.pprof and its top functions)")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "bound on the whole run, to which the retention phase adds its -retention-duration")
	fs.DurationVar(&c.Retention, "retention", 5*time.Minute, "with the retention or soak phase: serve's --retention, for the whole run")
	fs.Int64Var(&c.RetentionMaxJobs, "retention-max-jobs", 0, "with the retention phase: serve's --retention-max-jobs (local backend), for the whole run; 0: none")
	fs.IntVar(&c.RetentionRate, "retention-rate", 1000, "jobs per second due at once and acknowledged in the retention phase")
	fs.DurationVar(&c.RetentionFor, "retention-duration", 15*time.Minute, "how long the retention phase pushes; at least twice what the store takes to fill (-retention, or -retention-max-jobs at -retention-rate)")
	fs.Func("redis-args", "more arguments of the redis-servers the harness starts, space-separated, such as the settings docs/backends.md recommends: '--auto-aof-rewrite-min-size 4gb'", func(v string) error {
		c.RedisArgs = strings.Fields(v)
		return nil
	})
	fs.StringVar(&c.RedisURL, "redis-url", "", "with the rawredis phase: a running Redis (redis://host:port) to measure instead of starting a redis-server (appendonly, appendfsync everysec); its CPU is read when it runs on this machine")
	fs.DurationVar(&c.BeanstalkdFsync, "beanstalkd-fsync", 2*time.Millisecond, "with the beanstalkd phase: beanstalkd's -f, the least time between two fsyncs of its binlog (whole ms; 0: after every write); 2 ms is the local store's least time between two fsyncs while few writes wait for one")
	fs.DurationVar(&c.RetentionSample, "retention-sample", 10*time.Second, "time between the retention phase's readings")
	fs.IntVar(&c.SoakRate, "soak-rate", 2000, "jobs per second pushed and acknowledged in the soak phase, each due -lead after its push")
	fs.DurationVar(&c.SoakFor, "soak-duration", 30*time.Minute, "how long the soak phase pushes")
	fs.DurationVar(&c.SoakSample, "soak-sample", 10*time.Second, "time between the soak phase's readings, and the window of its lateness series")
}

func main() {
	var cfg config
	cfg.flags(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, &cfg, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func (c *config) has(phase string) bool {
	for p := range strings.SplitSeq(c.Phases, ",") {
		if strings.TrimSpace(p) == phase {
			return true
		}
	}
	return false
}

// onlyBaselines reports whether the phases are baselines without delayq
// (rawredis, beanstalkd) alone: no delayq is started then.
func (c *config) onlyBaselines() bool {
	for p := range strings.SplitSeq(c.Phases, ",") {
		if p = strings.TrimSpace(p); p != "rawredis" && p != "beanstalkd" {
			return false
		}
	}
	return true
}

func (c *config) check() error {
	for p := range strings.SplitSeq(c.Phases, ",") {
		switch strings.TrimSpace(p) {
		case "intake", "memory", "burst", "pull", "lateness", "retention", "soak", "rawredis", "beanstalkd":
		default:
			return fmt.Errorf("-phases: unknown phase %q (intake, memory, burst, pull, lateness, retention, soak, rawredis, beanstalkd)", p)
		}
	}
	if c.has("retention") {
		switch {
		case c.Retention <= 0 || c.RetentionMaxJobs < 0 || c.RetentionRate < 1 || c.RetentionSample <= 0:
			return fmt.Errorf("-retention, -retention-rate and -retention-sample must be positive, -retention-max-jobs 0 or more")
		case c.Server != "":
			return fmt.Errorf("the retention phase starts delayq with -retention: it cannot measure a running one (-server)")
		case c.RetentionFor < 2*retentionFill(c):
			return fmt.Errorf("-retention-duration %s: at least twice the %s the store takes to fill, so that it reaches a steady state", c.RetentionFor, retentionFill(c))
		}
	}
	if c.has("soak") && (c.SoakRate < 1 || c.SoakFor <= 0 || c.SoakSample <= 0 || c.Retention <= 0) {
		return fmt.Errorf("-soak-rate, -soak-duration, -soak-sample and -retention must be positive")
	}
	switch {
	case c.Batch < 1 || c.Batch > 1000:
		return fmt.Errorf("-batch %d: 1 to 1000", c.Batch)
	case c.Rate < 1 || c.Duration <= 0 || c.Lead <= 0:
		return fmt.Errorf("-rate, -duration and -lead must be positive")
	case c.Subscribers < 1 || c.Prefetch < 1 || c.Prefetch > 1000:
		return fmt.Errorf("-subscribers must be positive, -prefetch 1 to 1000")
	case c.Workers < 1 || c.BatchWorkers < 1 || c.NATSWindow < 1:
		return fmt.Errorf("-workers, -batch-workers and -nats-window must be positive")
	case c.has("pull") && (c.PullJobs < 1 || c.PullWorkers < 1):
		return fmt.Errorf("-pull-jobs and -pull-workers must be positive")
	case (c.has("rawredis") || c.has("beanstalkd")) && c.Burst < 1:
		return fmt.Errorf("-burst must be positive")
	case c.has("beanstalkd") && (c.BeanstalkdFsync < 0 || c.BeanstalkdFsync%time.Millisecond != 0):
		return fmt.Errorf("-beanstalkd-fsync %s: whole milliseconds, 0 or more", c.BeanstalkdFsync)
	case c.has("pull") && (c.PullBatch < 1 || c.PullBatch > 1000):
		return fmt.Errorf("-pull-batch %d: 1 to 1000", c.PullBatch)
	}
	return nil
}

// run measures what cfg asks for and writes the report; it returns an
// error when a phase failed, after writing what was measured.
func run(ctx context.Context, cfg *config, logw io.Writer) error {
	if err := cfg.check(); err != nil {
		return err
	}
	timeout := cfg.Timeout
	if cfg.has("retention") {
		timeout += cfg.RetentionFor
	}
	if cfg.has("soak") {
		timeout += cfg.SoakFor
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var logMu sync.Mutex // the retention phase logs its readings from a goroutine
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(logw, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	baselinesOnly := cfg.onlyBaselines()
	if baselinesOnly {
		cfg.Backend = "none"
	}
	if cfg.Out == "" {
		name := cfg.Backend
		switch {
		case baselinesOnly:
			name = strings.ReplaceAll(strings.ReplaceAll(cfg.Phases, " ", ""), ",", "-")
		case cfg.Server != "":
			name = "server"
		}
		cfg.Out = filepath.Join("loadtest-report", name)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	began := time.Now()
	var (
		t *target
		e *env
	)
	switch {
	case baselinesOnly:
		// The baselines need no delayq.
		t = &target{}
	case cfg.Server != "":
		t = &target{HTTPURL: strings.TrimSuffix(cfg.Server, "/"), NATSURL: cfg.NATSURL, DelayqPID: cfg.PID, BackendPID: cfg.BackendPID}
		cfg.Backend = "as running"
	default:
		var err error
		if t, e, err = startEnv(ctx, cfg, logf); err != nil {
			return err
		}
		defer e.close()
	}
	res := &results{Config: *cfg, Machine: machineInfo(), Started: began.UTC()}
	res.Config.NATSURL = redactURLs(cfg.NATSURL) // the report keeps no password
	res.Config.RedisURL = redactURLs(cfg.RedisURL)
	err := measure(ctx, cfg, t, res, logf)
	if rt := res.Retention; rt != nil && e != nil && cfg.Backend == "local" {
		// What the store keeps, read once delayq let go of it.
		e.stop()
		logf("retention: reading the store and compacting it whole")
		var ierr error
		if rt.Store, ierr = inspectStore(ctx, t.StoreDir); ierr != nil {
			ierr = fmt.Errorf("retention: inspect the store: %w", ierr)
			logf("  failed: %v", ierr)
			err = errors.Join(err, ierr)
		}
	}
	res.Seconds = time.Since(began).Seconds()
	if err != nil {
		res.Failure = err.Error()
	}
	if werr := writeReport(cfg.Out, res); werr != nil {
		return werr
	}
	logf("report: %s (%.0fs in all)", filepath.Join(cfg.Out, "report.md"), res.Seconds)
	return err
}

// measure runs the phases in order, filling res as it goes. A phase that
// fails does not stop the next: each measures something of its own, and
// a report with the rest is worth more than none. It returns the phases'
// errors joined.
func measure(ctx context.Context, cfg *config, t *target, res *results, logf func(string, ...any)) error {
	c := newClient(t.HTTPURL)
	prof := &profiler{url: t.PprofURL, out: cfg.Out, on: cfg.Profile, logf: logf}
	defer prof.wait()
	var errs []error
	fail := func(err error) {
		logf("  failed: %v", err)
		errs = append(errs, err)
	}
	meter := newCPUMeter(t)
	// phase runs f and records the cores each process used meanwhile.
	phase := func(name string, f func()) { res.CPU = append(res.CPU, meter.measure(name, f)) }
	var err error
	if res.Memory.Baseline, err = readMemory(t); err != nil {
		return err
	}
	var pending int64
	if cfg.has("intake") {
		in := &res.Intake
		prof.start(ctx, "intake-http-single", cfg.IntakeFor)
		logf("intake: one job per request, %d workers, %s", cfg.Workers, cfg.IntakeFor)
		phase("intake, one job per request", func() {
			in.HTTPSingle = c.intakeHTTP(ctx, uniqueTopic("loadtest.intake.single"), cfg.Workers, 1, cfg.IntakeFor, 0)
		})
		logf("  %.0f jobs/s", in.HTTPSingle.PerSecond)
		prof.wait()
		prof.start(ctx, "intake-http-batch", cfg.IntakeFor)
		logf("intake: batches of %d, %d workers, %s", cfg.Batch, cfg.BatchWorkers, cfg.IntakeFor)
		phase("intake, batches", func() {
			in.HTTPBatch = c.intakeHTTP(ctx, uniqueTopic("loadtest.intake.batch"), cfg.BatchWorkers, cfg.Batch, cfg.IntakeFor, 0)
		})
		logf("  %.0f jobs/s", in.HTTPBatch.PerSecond)
		prof.wait()
		pending = in.HTTPSingle.Jobs + in.HTTPBatch.Jobs
		if t.NATSURL != "" {
			prof.start(ctx, "intake-nats", cfg.IntakeFor)
			logf("intake: NATS publishes with replies, %d in flight, %s", cfg.NATSWindow, cfg.IntakeFor)
			var r intakeResult
			var err error
			phase("intake, NATS", func() {
				r, err = intakeNATS(ctx, t, uniqueTopic("loadtest.intake.nats"), cfg.NATSWindow, cfg.IntakeFor)
			})
			prof.wait()
			if err != nil {
				fail(fmt.Errorf("nats intake: %w", err))
			} else {
				in.NATS = &r
				pending += r.Jobs
				logf("  %.0f jobs/s", r.PerSecond)
			}
		}
	}
	if cfg.has("memory") {
		m := &res.Memory
		if rest := int64(cfg.Pending) - pending; rest > 0 {
			logf("memory: pushing %d more jobs to hold %d pending", rest, cfg.Pending)
			m.Fill = c.intakeHTTP(ctx, uniqueTopic("loadtest.fill"), cfg.BatchWorkers, cfg.Batch, time.Hour, rest)
			pending += m.Fill.Jobs
			logf("  %.0f jobs/s", m.Fill.PerSecond)
		}
		m.Pending = pending
		// Let the backend settle (flushes, compactions) before reading.
		time.Sleep(cfg.Settle)
		if m.Loaded, err = readMemory(t); err != nil {
			fail(err)
		}
		m.DiskBytes = diskUsage(t.DataDirs)
		logf("  delayq RSS %s, backend RSS %s, disk %s at %d pending", mib(m.Loaded.Delayq), mib(m.Loaded.Backend), mib(m.DiskBytes), pending)
	}
	if cfg.has("burst") {
		lead := burstLead(cfg.Burst, res.Intake.HTTPBatch.PerSecond)
		prof.start(ctx, "burst", lead+3*time.Second)
		var b *burstResult
		var err error
		phase("burst", func() { b, err = burst(ctx, c, cfg, t, lead, logf) })
		prof.wait()
		res.Burst = b
		if err != nil {
			fail(err)
		} else {
			logf("  all delivered %.2fs after the due instant, all acknowledged %.2fs after; CPU per job: delayq %.1f µs, backend server %.1f µs", b.DeliveredAll, b.AckedAll, b.DelayqCPUMicrosPerJob, b.BackendCPUMicrosPerJob)
		}
	}
	if cfg.has("pull") {
		prof.start(ctx, "pull", 10*time.Second)
		var pr *pullResult
		var err error
		phase("pull", func() { pr, err = pull(ctx, c, cfg, logf) })
		prof.wait()
		res.Pull = pr
		if err != nil {
			fail(err)
		} else {
			logf("  %.0f jobs/s claimed and acknowledged", pr.PerSecond)
		}
	}
	if cfg.has("lateness") {
		prof.start(ctx, "lateness", cfg.Lead+cfg.Duration)
		var l *latenessResult
		var err error
		phase("lateness", func() { l, err = lateness(ctx, c, cfg, logf) })
		prof.wait()
		res.Lateness = l
		if err != nil {
			fail(err)
		} else {
			logf("  p50 %.2f ms, p99 %.2f ms, max %.2f ms", l.Stats.P50, l.Stats.P99, l.Stats.Max)
		}
	}
	if cfg.has("retention") {
		var rt *retentionResult
		var err error
		prof.start(ctx, "retention", cfg.RetentionFor)
		phase("retention", func() { rt, err = retention(ctx, c, cfg, t, logf) })
		prof.wait()
		res.Retention = rt
		if err != nil {
			fail(err)
		} else if st := rt.Steady; st != nil {
			logf("  steady: %s finished kept, store %s (%.0f B per kept job in tables), delayq %.2f cores, %s/s written",
				num(st.Kept), mib(int64(st.StoreMean)), st.SSTPerKept, st.Cores, mib(int64(st.WritePerSecond)))
		}
	}
	if cfg.has("soak") {
		var s *soakResult
		var err error
		phase("soak", func() { s, err = soak(ctx, c, cfg, t, logf) })
		res.Soak = s
		if err != nil {
			fail(err)
		} else {
			for _, d := range s.Drift {
				logf("  %s: %.1f in the first quarter, %.1f in the last", d.Measure, d.First, d.Last)
			}
		}
	}
	if cfg.has("rawredis") {
		var rr *rawRedisResult
		var err error
		phase("rawredis", func() { rr, err = rawRedis(ctx, cfg, logf) })
		res.RawRedis = rr
		if err != nil {
			fail(err)
		} else {
			logf("  %d jobs all acknowledged %.3fs after the due instant: %.0f jobs/s, redis-server %.2f cores, %.2f µs CPU per job",
				rr.Acked, rr.AckedAll, rr.PerSecond, rr.Cores, rr.CPUMicrosPerJob)
		}
	}
	if cfg.has("beanstalkd") {
		var br *beanstalkdResult
		var err error
		phase("beanstalkd", func() { br, err = beanstalkd(ctx, cfg, logf) })
		res.Beanstalkd = br
		if err != nil {
			fail(err)
		} else {
			logf("  %d jobs all deleted %.3fs after the due instant: %.0f jobs/s, beanstalkd %.2f cores, %.2f µs CPU per job",
				br.Deleted, br.AckedAll, br.PerSecond, br.Cores, br.CPUMicrosPerJob)
		}
	}
	return errors.Join(errs...)
}

// memorySample is the resident memory of the processes, in bytes.
type memorySample struct {
	Delayq  int64 `json:"delayq_rss"`
	Backend int64 `json:"backend_rss"`
}

func readMemory(t *target) (memorySample, error) {
	var m memorySample
	var err error
	if t.DelayqPID != 0 {
		if m.Delayq, err = rss(t.DelayqPID); err != nil {
			return m, err
		}
	}
	if t.BackendPID != 0 && t.BackendPID != t.DelayqPID {
		if m.Backend, err = rss(t.BackendPID); err != nil {
			return m, err
		}
	}
	return m, nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// redactURLs hides the passwords of comma-separated URLs.
func redactURLs(list string) string {
	urls := strings.Split(list, ",")
	for i, raw := range urls {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil {
			urls[i] = u.Redacted()
		}
	}
	return strings.Join(urls, ",")
}
