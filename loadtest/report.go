package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// results is everything a run measured; results.json holds it.
type results struct {
	Config   config          `json:"config"`
	Machine  machine         `json:"machine"`
	Started  time.Time       `json:"started"`
	Seconds  float64         `json:"seconds"`
	Intake   intakeResults   `json:"intake"`
	Memory   memoryResult    `json:"memory"`
	Burst    *burstResult    `json:"burst,omitempty"`
	Pull     *pullResult     `json:"pull,omitempty"`
	Lateness *latenessResult `json:"lateness,omitempty"`
	// Retention is the retention phase's, when it ran.
	Retention *retentionResult `json:"retention,omitempty"`
	// Soak is the soak phase's, when it ran.
	Soak *soakResult `json:"soak,omitempty"`
	// RawRedis is the raw Redis baseline's, when it ran.
	RawRedis *rawRedisResult `json:"rawredis,omitempty"`
	// Beanstalkd is the beanstalkd baseline's, when it ran.
	Beanstalkd *beanstalkdResult `json:"beanstalkd,omitempty"`
	// CPU is the cores each process used in each phase.
	CPU     []phaseCPU `json:"cpu"`
	Failure string     `json:"failure,omitempty"`
}

type intakeResults struct {
	HTTPSingle intakeResult  `json:"http_single"`
	HTTPBatch  intakeResult  `json:"http_batch"`
	NATS       *intakeResult `json:"nats,omitempty"`
}

type memoryResult struct {
	Pending   int64        `json:"pending"`
	Fill      intakeResult `json:"fill"`
	Baseline  memorySample `json:"baseline"`
	Loaded    memorySample `json:"loaded"`
	DiskBytes int64        `json:"disk_bytes"`
}

// perJob is the growth of b from a per pending job, in bytes.
func (m *memoryResult) perJob(a, b int64) float64 {
	if m.Pending == 0 {
		return 0
	}
	return float64(b-a) / float64(m.Pending)
}

// machine describes where the run took place.
type machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memory_gib"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	Revision  string `json:"revision"`
}

func machineInfo() machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			m.MemoryGiB = int((kb + 1<<19) >> 20)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m.Revision = strings.TrimSpace(string(b))
	}
	return m
}

// target figures for the backend measured (docs/benchmarks.md, Against the
// targets).
type targets struct {
	batch float64 // jobs/s of HTTP batch intake
	burst float64 // seconds until a burst is all acknowledged
}

func targetsFor(backend string) targets {
	if backend == "redis" {
		return targets{batch: 100_000, burst: 1}
	}
	return targets{batch: 50_000, burst: 2}
}

const (
	targetSingle   = 15_000
	targetNATS     = 50_000
	targetP99MS    = 5
	targetMaxMS    = 50
	targetLateRate = 10_000
)

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// num formats n with thin groups of thousands, as the docs write them.
func num(n float64) string {
	s := strconv.FormatInt(int64(n+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

// writeReport writes results.json, the plots and report.md into dir.
func writeReport(dir string, r *results) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644); err != nil {
		return err
	}
	plots, err := writePlots(dir, r)
	if err != nil {
		return err
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Machine
	shared := "The harness, delayq and the backend share the machine."
	if r.Config.Backend == "none" {
		var names, servers []string
		if r.Config.has("rawredis") {
			names, servers = append(names, "raw Redis"), append(servers, "redis-server")
		}
		if r.Config.has("beanstalkd") {
			names, servers = append(names, "beanstalkd"), append(servers, "beanstalkd")
		}
		shared = fmt.Sprintf("The harness and %s share the machine.", strings.Join(servers, " and "))
		w("# delayq load report: %s baseline, no delayq\n\n", strings.Join(names, " and "))
	} else {
		w("# delayq load report: %s backend\n\n", r.Config.Backend)
	}
	w("%s, delayq %s, %s, %d cores, %d GiB, Linux %s, %s. %s The run took %.0f s:\n\n",
		r.Started.Format("2006-01-02 15:04 MST"), m.Revision, m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.Go, shared, r.Seconds)
	w("    go run ./loadtest %s\n\n", strings.Join(os.Args[1:], " "))
	if r.Config.Backend == "memory" {
		w("The memory backend keeps nothing on disk: its figures are a bound for the others, not a durable result.\n\n")
	}
	if r.Failure != "" {
		w("**The run failed:** %s\n\n", r.Failure)
	}

	tg := targetsFor(r.Config.Backend)
	// The targets' rows, of the phases that ran: none for the retention
	// phase alone.
	var rows strings.Builder
	tw := func(format string, args ...any) { fmt.Fprintf(&rows, format, args...) }
	in := r.Intake
	if r.Config.has("intake") {
		tw("| intake, HTTP batches of %d, durable | %s jobs/s | %s jobs/s | %s |\n", r.Config.Batch, num(in.HTTPBatch.PerSecond), num(tg.batch), verdict(in.HTTPBatch.PerSecond >= tg.batch))
		if in.NATS != nil {
			tw("| intake, NATS publish | %s jobs/s | %s jobs/s | %s |\n", num(in.NATS.PerSecond), num(targetNATS), verdict(in.NATS.PerSecond >= targetNATS))
		} else {
			tw("| intake, NATS publish | no NATS intake on this backend | %s jobs/s | |\n", num(targetNATS))
		}
		tw("| intake, one job per HTTP request | %s jobs/s | %s jobs/s | %s |\n", num(in.HTTPSingle.PerSecond), num(targetSingle), verdict(in.HTTPSingle.PerSecond >= targetSingle))
	}
	if bu := r.Burst; bu != nil {
		tw("| burst: %s jobs due at one instant | all delivered %.2f s and acknowledged %.2f s after it | %s s | %s |\n",
			num(float64(bu.Jobs)), bu.DeliveredAll, bu.AckedAll, strconv.FormatFloat(tg.burst, 'f', -1, 64),
			verdict(bu.Received == bu.Jobs && bu.AckedAll > 0 && bu.AckedAll <= tg.burst))
	}
	if l := r.Lateness; l != nil {
		s := l.Stats
		v := verdict(l.Received == l.Jobs && s.P99 < targetP99MS && s.Max < targetMaxMS)
		if l.Rate < targetLateRate {
			v = "below the target's rate"
		}
		tw("| lateness at a steady %s due jobs/s | p50 %.2f ms, p99 %.2f ms, max %.1f ms | p99 < %d ms, max < %d ms at %s/s | %s |\n",
			num(float64(l.Rate)), s.P50, s.P99, s.Max, targetP99MS, targetMaxMS, num(targetLateRate), v)
	}
	if pr := r.Pull; pr != nil {
		w("| pull consumers: %s due jobs, %s | %s jobs/s | | |\n", num(float64(pr.Jobs)), pullHow(pr.Batch), num(pr.PerSecond))
	}
	mem := r.Memory
	if mem.Pending > 0 {
		tw("| memory per pending job, at %s pending | delayq %s B, backend %s, disk %s B | 10 million held on one node | %s |\n",
			num(float64(mem.Pending)), num(mem.perJob(mem.Baseline.Delayq, mem.Loaded.Delayq)), backendPerJob(r),
			num(float64(mem.DiskBytes)/float64(mem.Pending)), tenMillion(r))
	}
	if rows.Len() > 0 {
		w("## Against the targets\n\n| what | measured | target | |\n| --- | --- | --- | --- |\n%s\n", rows.String())
	}

	if r.Config.has("intake") {
		w("## Intake\n\nJobs due in an hour, a %d-byte body each; a job counts once delayq answered it stored.\n\n", len(sampleBody))
		w("| how | jobs | seconds | jobs/s | errors |\n| --- | --- | --- | --- | --- |\n")
		row := func(name string, x intakeResult) {
			w("| %s | %s | %.1f | %s | %d |\n", name, num(float64(x.Jobs)), x.Seconds, num(x.PerSecond), x.Errors)
		}
		row(fmt.Sprintf("HTTP, one job per request, %d at once", r.Config.Workers), in.HTTPSingle)
		row(fmt.Sprintf("HTTP, batches of %d, %d at once", r.Config.Batch, r.Config.BatchWorkers), in.HTTPBatch)
		if in.NATS != nil {
			row(fmt.Sprintf("NATS publish with reply, %d awaiting answers", r.Config.NATSWindow), *in.NATS)
		}
		if mem.Fill.Jobs > 0 {
			row("HTTP batches, topping up to the pending count", mem.Fill)
		}
		for _, x := range []*intakeResult{&in.HTTPSingle, &in.HTTPBatch, in.NATS, &mem.Fill} {
			if x != nil && x.FirstErr != "" {
				w("\nFirst error: `%s`\n", x.FirstErr)
			}
		}
		w("\n")
	}
	if mem.Pending > 0 {
		w("## Memory\n\nResident memory (VmRSS) before the first job and with %s jobs pending, 5 s after the last was pushed.\n\n", num(float64(mem.Pending)))
		w("| process | before | loaded | per pending job |\n| --- | --- | --- | --- |\n")
		w("| delayq%s | %s | %s | %s B |\n", embeddedNote(r), mib(mem.Baseline.Delayq), mib(mem.Loaded.Delayq), num(mem.perJob(mem.Baseline.Delayq, mem.Loaded.Delayq)))
		if mem.Loaded.Backend > 0 {
			w("| backend server | %s | %s | %s B |\n", mib(mem.Baseline.Backend), mib(mem.Loaded.Backend), num(mem.perJob(mem.Baseline.Backend, mem.Loaded.Backend)))
		}
		w("| files on disk | | %s | %s B |\n\n", mib(mem.DiskBytes), num(float64(mem.DiskBytes)/float64(mem.Pending)))
	}
	if bu := r.Burst; bu != nil {
		w("## Burst\n\n%s jobs, all due at one instant, pushed in %.1f s before it; %d WebSocket subscribers with prefetch %d acknowledge each job as it comes.%s\n\n",
			num(float64(bu.Jobs)), bu.PushSeconds, r.Config.Subscribers, r.Config.Prefetch, variantNote(r.Config))
		w("| | value |\n| --- | --- |\n| received | %s (%d twice) |\n| last received | %.3f s after the instant |\n| all acknowledged (topic empty) | %.3f s after |\n| receipt p50 / p99 | %.0f / %.0f ms after |\n| delayq's CPU per job, from the instant to the last ack | %s |\n",
			num(float64(bu.Received)), bu.Duplicates, bu.DeliveredAll, bu.AckedAll, bu.Stats.P50, bu.Stats.P99, measured(bu.DelayqCPUMicrosPerJob > 0, "%.1f µs", bu.DelayqCPUMicrosPerJob))
		if bu.BackendCPUMicrosPerJob > 0 {
			w("| the backend server's CPU per job, the same | %.1f µs |\n", bu.BackendCPUMicrosPerJob)
		}
		w("\n")
		if p, ok := plots["burst"]; ok {
			w("![deliveries of the burst over time](%s)\n\n", p)
		}
		writeErrors(&b, bu.Errors)
	}
	if pr := r.Pull; pr != nil {
		if pr.Batch == 1 {
			w("## Pull consumers\n\n%s jobs due at once, drained by %d consumers that each claim one job over HTTP (`POST /v1/topics/{topic}/claim`, max 1) and acknowledge it (`POST /v1/jobs/{id}/ack`) before the next claim.\n\n",
				num(float64(pr.Jobs)), pr.Workers)
		} else {
			w("## Pull consumers\n\n%s jobs due at once, drained by %d consumers that each claim up to %d jobs over HTTP (`POST /v1/topics/{topic}/claim`, max %d) and acknowledge them together with one `POST /v1/acks` before the next claim.\n\n",
				num(float64(pr.Jobs)), pr.Workers, pr.Batch, pr.Batch)
		}
		w("| acknowledged | seconds | jobs/s | errors |\n| --- | --- | --- | --- |\n| %s | %.2f | %s | %d |\n\n", num(float64(pr.Acked)), pr.Seconds, num(pr.PerSecond), pr.Errors)
		if pr.FirstErr != "" {
			w("First error: `%s`\n\n", pr.FirstErr)
		}
	}
	if l := r.Lateness; l != nil {
		s := l.Stats
		w("## Lateness\n\n%s jobs due at a steady %s/s over %.0f s, evenly spaced, each pushed %.0f ms before its run_at in batches; %d WebSocket subscribers with prefetch %d acknowledge each. Lateness is the subscriber's receipt minus run_at.%s\n\n",
			num(float64(l.Jobs)), num(float64(l.Rate)), l.Seconds, l.LeadMS, r.Config.Subscribers, r.Config.Prefetch, variantNote(r.Config))
		w("| received | min | p50 | p90 | p99 | p99.9 | max |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		w("| %s (%d twice) | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f ms |\n\n", num(float64(l.Received)), l.Duplicates, s.Min, s.P50, s.P90, s.P99, s.P999, s.Max)
		for _, k := range []string{"lateness-over-time", "lateness-histogram"} {
			if p, ok := plots[k]; ok {
				w("![%s](%s)\n\n", strings.ReplaceAll(k, "-", " "), p)
			}
		}
		writeErrors(&b, l.Errors)
	}
	writeRetention(&b, r, plots)
	writeSoak(&b, r, plots)
	writeRawRedis(&b, r)
	writeBeanstalkd(&b, r)
	writeCPU(&b, r)
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644)
}

// measured formats v, or says "not measured" when it was not.
func measured(ok bool, format string, v float64) string {
	if !ok {
		return "not measured"
	}
	return fmt.Sprintf(format, v)
}

// writeCPU tells which process each phase kept busy, in cores of the
// machine's: the one near 1 (a single-threaded server) or the sum near
// the core count is what limits the phase.
func writeCPU(b *strings.Builder, r *results) {
	if len(r.CPU) == 0 {
		return
	}
	names := []string{"delayq", "backend server", "harness"}
	fmt.Fprintf(b, "## CPU\n\nCores each process used during each phase (of %d; burst, lateness, rawredis and beanstalkd include the pushes ahead and the wait for the last job).\n\n| phase |", r.Machine.Cores)
	for _, n := range names {
		fmt.Fprintf(b, " %s |", n)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(names)) + "\n")
	for _, p := range r.CPU {
		fmt.Fprintf(b, "| %s |", p.Phase)
		for _, n := range names {
			if v, ok := p.Cores[n]; ok {
				fmt.Fprintf(b, " %.2f |", v)
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// variantNote says what -priorities and -pause changed of the burst and
// lateness phases, "" when neither was set.
func variantNote(c config) string {
	var s string
	if c.Priorities {
		s += " The jobs have priorities, every one from -10 to 10 in turn."
	}
	if c.Pause {
		s += " The topic is paused while the jobs are pushed and resumed when the first is due."
	}
	return s
}

func writeErrors(b *strings.Builder, errs []string) {
	if len(errs) == 0 {
		return
	}
	b.WriteString("Errors seen:\n\n")
	for _, e := range errs {
		fmt.Fprintf(b, "- `%s`\n", e)
	}
	b.WriteString("\n")
}

func embeddedNote(r *results) string {
	if inProcess(r.Config.Backend) {
		return " (with its store and NATS server in process)"
	}
	return ""
}

func backendPerJob(r *results) string {
	m := r.Memory
	switch {
	case inProcess(r.Config.Backend):
		return "in delayq"
	case m.Loaded.Backend == 0:
		return "none"
	}
	return num(m.perJob(m.Baseline.Backend, m.Loaded.Backend)) + " B"
}

// tenMillion extrapolates the memory per pending job to 10 million jobs.
func tenMillion(r *results) string {
	m := r.Memory
	per := m.perJob(m.Baseline.Delayq, m.Loaded.Delayq) + m.perJob(m.Baseline.Backend, m.Loaded.Backend)
	return fmt.Sprintf("%.1f GiB for 10 million", per*1e7/(1<<30))
}

// writeRawRedis writes the raw Redis baseline: what Redis itself allows
// for the burst, to set delayq on Redis against.
func writeRawRedis(b *strings.Builder, r *results) {
	rr := r.RawRedis
	if rr == nil {
		return
	}
	fmt.Fprintf(b, "## Raw Redis baseline\n\nNo delayq: %s on this machine. %s jobs due at one instant, each a hash holding its %d-byte body and a member of a sorted set scored by its due time in ms, pushed in pipelines of %d in %.2f s before it. From that instant %d consumers each loop: one Lua script call claims up to %d due jobs (ZRANGEBYSCORE ... LIMIT, ZREM, ZADD to a lease sorted set scored by the lease's expiry, HGET of the bodies, HSET of a lease token in each hash) and returns ids, bodies and leases, then one call of another script acknowledges the claim's jobs as delayq's ack must (for each, HGET of its lease token, checked; ZREM from the lease set; HSET of state done; PEXPIRE of its hash by the retention; then one INCRBY of the done count and one XADD to a stream of finishes). redis-server's CPU is read from /proc/<pid>/stat, in 10 ms ticks.\n\n",
		rr.Server, num(float64(rr.Jobs)), len(sampleBody), rawPushBatch, rr.PushSeconds, rr.Consumers, rr.ClaimMax)
	fmt.Fprintf(b, "| jobs | all acknowledged | jobs/s | redis-server cores | Redis CPU per job | harness cores | claims | left | errors |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	fmt.Fprintf(b, "| %s | %.3f s after the instant | %s | %s | %s | %.2f | %d | %d | %d |\n\n",
		num(float64(rr.Acked)), rr.AckedAll, num(rr.PerSecond), measured(rr.CPUMeasured, "%.2f", rr.Cores), measured(rr.CPUMeasured, "%.2f µs", rr.CPUMicrosPerJob), rr.HarnessCores, rr.Claims, rr.Left, rr.Errors)
	if rr.FirstErr != "" {
		fmt.Fprintf(b, "First error: `%s`\n\n", rr.FirstErr)
	}
	fmt.Fprintf(b, "    %s\n\n", rr.Command)
}

// writeBeanstalkd writes the beanstalkd baseline, and the burst's time
// against it when the burst ran too.
func writeBeanstalkd(b *strings.Builder, r *results) {
	br := r.Beanstalkd
	if br == nil {
		return
	}
	fmt.Fprintf(b, "## beanstalkd baseline\n\nNo delayq: %s, on this machine. %s jobs with a %d-byte body put from %d connections in pipelines of %d in %.2f s, each delayed a second, into a paused tube; once none was delayed any more, the pause was set to end a second later, the instant (beanstalkd counts delays and pauses in whole seconds). From that instant %d connections each loop: `reserve-with-timeout`, then `delete` of the job, each waiting for its answer. beanstalkd's CPU is read from /proc/<pid>/stat, in 10 ms ticks.\n\n",
		br.Server, num(float64(br.Jobs)), len(sampleBody), bsPushConns, bsPushBatch, br.PushSeconds, br.Consumers)
	fmt.Fprintf(b, "| jobs | all deleted | jobs/s | beanstalkd cores | beanstalkd CPU per job | harness cores | left | errors |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	fmt.Fprintf(b, "| %s | %.3f s after the instant | %s | %s | %s | %.2f | %d | %d |\n\n",
		num(float64(br.Deleted)), br.AckedAll, num(br.PerSecond), measured(br.CPUMeasured, "%.2f", br.Cores), measured(br.CPUMeasured, "%.2f µs", br.CPUMicrosPerJob), br.HarnessCores, br.Left, br.Errors)
	if bu := r.Burst; bu != nil && bu.AckedAll > 0 && br.AckedAll > 0 {
		fmt.Fprintf(b, "delayq's burst in this run (%s backend): all acknowledged %.3f s after its instant, %.2f× beanstalkd's.\n\n", r.Config.Backend, bu.AckedAll, bu.AckedAll/br.AckedAll)
	}
	if br.FirstErr != "" {
		fmt.Fprintf(b, "First error: `%s`\n\n", br.FirstErr)
	}
	fmt.Fprintf(b, "    %s\n\n", br.Command)
}
