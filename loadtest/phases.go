package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// latencyStats summarise how late jobs came, in milliseconds.
type latencyStats struct {
	Jobs int     `json:"jobs"`
	Min  float64 `json:"min_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// summarize computes the stats of lates, which it sorts.
func summarize(lates []time.Duration) latencyStats {
	if len(lates) == 0 {
		return latencyStats{}
	}
	slices.Sort(lates)
	pct := func(p float64) float64 { return ms(lates[min(int(p*float64(len(lates))), len(lates)-1)]) }
	return latencyStats{
		Jobs: len(lates), Min: ms(lates[0]), P50: pct(0.50), P90: pct(0.90),
		P99: pct(0.99), P999: pct(0.999), Max: ms(lates[len(lates)-1]),
	}
}

// seriesPoint is the lateness of the jobs due within one window of a run.
type seriesPoint struct {
	T    float64 `json:"t_s"` // window start, seconds after the first run_at
	Jobs int     `json:"jobs"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

// series groups receipts by run_at into windows of step.
func series(rs []receipt, step time.Duration) []seriesPoint {
	if len(rs) == 0 {
		return nil
	}
	t0 := rs[0].RunAt
	for _, r := range rs {
		if r.RunAt.Before(t0) {
			t0 = r.RunAt
		}
	}
	buckets := map[int][]time.Duration{}
	for _, r := range rs {
		k := int(r.RunAt.Sub(t0) / step)
		buckets[k] = append(buckets[k], r.Late())
	}
	keys := make([]int, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]seriesPoint, 0, len(keys))
	for _, k := range keys {
		s := summarize(buckets[k])
		out = append(out, seriesPoint{T: (time.Duration(k) * step).Seconds(), Jobs: s.Jobs, P50: s.P50, P99: s.P99, Max: s.Max})
	}
	return out
}

func lates(rs []receipt) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.Late()
	}
	return out
}

// pusher sends batches of jobs with their own run_at to a topic, several
// requests at once, and records what failed.
type pusher struct {
	c     *client
	slots chan struct{}
	wg    sync.WaitGroup
	errs  errRecorder

	mu     sync.Mutex
	pushed int
}

func newPusher(c *client, concurrency int) *pusher {
	return &pusher{c: c, slots: make(chan struct{}, concurrency)}
}

// push sends jobs as one batch request; it blocks only while every slot
// is busy.
func (p *pusher) push(ctx context.Context, jobs []jobReq) {
	body, _ := json.Marshal(map[string]any{"jobs": jobs})
	p.slots <- struct{}{}
	p.wg.Go(func() {
		defer func() { <-p.slots }()
		var out struct {
			Results []struct {
				Error json.RawMessage `json:"error"`
			} `json:"results"`
		}
		if err := p.c.do(ctx, http.MethodPost, "/v1/jobs/batch", body, &out); err != nil {
			p.errs.add(err)
			return
		}
		ok := 0
		for _, r := range out.Results {
			if r.Error != nil {
				p.errs.add(fmt.Errorf("%s", r.Error))
			} else {
				ok++
			}
		}
		p.mu.Lock()
		p.pushed += ok
		p.mu.Unlock()
	})
}

// pushedSoFar returns how many jobs the requests that ended stored.
func (p *pusher) pushedSoFar() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pushed
}

// wait returns how many jobs were stored once every request has ended.
func (p *pusher) wait() int {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pushed
}

// burstResult is the burst measurement.
type burstResult struct {
	Jobs        int     `json:"jobs"`
	Pushed      int     `json:"pushed"`
	PushSeconds float64 `json:"push_seconds"`
	// DeliveredAll and AckedAll are seconds after the instant all jobs
	// were due: the last job's receipt, and the moment the topic's counts
	// showed no job left (every one acknowledged).
	DeliveredAll float64      `json:"delivered_all_s"`
	AckedAll     float64      `json:"acked_all_s"`
	Received     int          `json:"received"`
	Duplicates   int          `json:"duplicates"`
	Stats        latencyStats `json:"lateness"`
	Curve        []curvePoint `json:"curve"`
	Errors       []string     `json:"errors,omitempty"`
	PushErrors   int64        `json:"push_errors"`
	Counts       *counts      `json:"counts_at_end,omitempty"`
	// DelayqCPUMicrosPerJob is delayq's CPU time (user and system, with an
	// in-process store's) from the due instant until all were
	// acknowledged, per job: what the drain cost, which a busy machine
	// changes less than the elapsed time. 0 when delayq's process is not
	// known or could not be read.
	DelayqCPUMicrosPerJob float64 `json:"delayq_cpu_us_per_job,omitempty"`
	// BackendCPUMicrosPerJob is the same of the backend's own server
	// (redis-server, nats-server), 0 for an in-process store: with
	// delayq's, what a job cost in all.
	BackendCPUMicrosPerJob float64 `json:"backend_cpu_us_per_job,omitempty"`
	receipts               []receipt
}

// curvePoint is how many jobs had come by T seconds after they were due.
type curvePoint struct {
	T        float64 `json:"t_s"`
	Received int     `json:"received"`
}

// burstLead is how far ahead a burst of n jobs is due, for the pushes to
// finish by then at pushRate jobs/s (20 000 when not measured).
func burstLead(n int, pushRate float64) time.Duration {
	if pushRate <= 0 {
		pushRate = 20_000
	}
	return 2*time.Second + time.Duration(1.5*float64(n)/pushRate*float64(time.Second))
}

// burst pushes cfg.Burst jobs all due at one instant, lead from now, to a
// topic with subscribers waiting, and measures when the last came and
// when the last was acknowledged.
func burst(ctx context.Context, c *client, cfg *config, t *target, lead time.Duration, logf func(string, ...any)) (*burstResult, error) {
	sub, err := subscribeNew(ctx, c, cfg, "loadtest.burst", cfg.Burst)
	if err != nil {
		return nil, err
	}
	defer sub.end()
	topic, col := sub.topic, sub.col
	due := time.Now().Add(lead).UTC().Truncate(time.Millisecond)
	logf("burst: pushing %d jobs due at %s (in %s)", cfg.Burst, due.Format("15:04:05.000"), lead.Round(time.Millisecond))
	resumed, err := pauseUntil(ctx, c, cfg, topic, due)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	p := newPusher(c, cfg.BatchWorkers)
	for i := 0; i < cfg.Burst; i += cfg.Batch {
		jobs := make([]jobReq, min(cfg.Batch, cfg.Burst-i))
		for k := range jobs {
			jobs[k] = jobReq{Topic: topic, Body: sampleBody, RunAt: due.Format(time.RFC3339Nano), Priority: priority(cfg, i+k)}
		}
		p.push(ctx, jobs)
	}
	res := &burstResult{Jobs: cfg.Burst, Pushed: p.wait(), PushSeconds: time.Since(start).Seconds(), PushErrors: p.errs.n.Load()}
	if res.PushErrors > 0 {
		res.Errors = append(res.Errors, "push: "+p.errs.first)
	}
	if time.Now().After(due) {
		return res, fmt.Errorf("burst: pushing took %.1fs, past the due instant: lower -burst", res.PushSeconds)
	}
	if err := resumed(); err != nil {
		return res, err
	}
	// The CPU times of delayq and of the backend's server at the due
	// instant, read then.
	delayqCPU := cpuFrom(due, t.DelayqPID)
	backendCPU := cpuFrom(due, 0)
	if t.BackendPID != t.DelayqPID {
		backendCPU = cpuFrom(due, t.BackendPID)
	}
	defer delayqCPU.stop()
	defer backendCPU.stop()
	if err := col.await(ctx, due, due.Add(2*time.Minute), 10*time.Second); err != nil {
		return nil, err
	}
	rs, dups, errs := col.result()
	res.Received, res.Duplicates, res.receipts = len(rs), dups, rs
	res.Errors = append(res.Errors, errs...)
	var last time.Time
	for _, r := range rs {
		if r.At.After(last) {
			last = r.At
		}
	}
	res.DeliveredAll = last.Sub(due).Seconds()
	res.Stats = summarize(lates(rs))
	res.Curve = curve(rs, due, 50*time.Millisecond)
	if res.Received < res.Jobs {
		return res, fmt.Errorf("burst: received %d of %d jobs: none came for 10s, or 2 min passed", res.Received, res.Jobs)
	}
	// Acknowledged: the topic holds no unfinished job any more (done ones
	// count until their retention ends). Counts are read every 20 ms,
	// which bounds the figure's resolution.
	for ctx.Err() == nil {
		n, err := c.topicCounts(ctx, topic)
		if err == nil && n.Scheduled+n.Ready+n.Reserved == 0 {
			res.AckedAll = time.Since(due).Seconds()
			res.DelayqCPUMicrosPerJob = delayqCPU.perJob(res.Jobs)
			res.BackendCPUMicrosPerJob = backendCPU.perJob(res.Jobs)
			break
		}
		if time.Since(last) > 30*time.Second {
			res.Counts = &n
			return res, fmt.Errorf("burst: the topic still counts jobs 30s after the last was received: %+v", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return res, nil
}

// cpuSince is a process's CPU time read at an instant, for what it spends
// from then on.
type cpuSince struct {
	pid   int
	at    chan time.Duration // the CPU time read at the instant; closed unread when it could not be
	timer *time.Timer
}

// cpuFrom reads the CPU time of process pid (none when 0) at instant at.
func cpuFrom(at time.Time, pid int) *cpuSince {
	c := &cpuSince{pid: pid, at: make(chan time.Duration, 1)}
	if pid == 0 {
		close(c.at)
		return c
	}
	c.timer = time.AfterFunc(time.Until(at), func() {
		if cpu, err := cpuTime(pid); err == nil {
			c.at <- cpu
		}
		close(c.at)
	})
	return c
}

// perJob returns the process's CPU time since the instant, now, per job of
// n, in µs: 0 when it could not be read.
func (c *cpuSince) perJob(n int) float64 {
	cpu0, ok := <-c.at
	if !ok {
		return 0
	}
	cpu1, err := cpuTime(c.pid)
	if err != nil {
		return 0
	}
	return float64((cpu1 - cpu0).Microseconds()) / float64(n)
}

// stop gives up the read at the instant if it is still to come.
func (c *cpuSince) stop() {
	if c.timer != nil && c.timer.Stop() {
		close(c.at)
	}
}

// curve counts the receipts by step after due.
func curve(rs []receipt, due time.Time, step time.Duration) []curvePoint {
	ats := make([]time.Duration, len(rs))
	for i, r := range rs {
		ats[i] = r.At.Sub(due)
	}
	slices.Sort(ats)
	var out []curvePoint
	for i, t := 0, time.Duration(0); i < len(ats); t += step {
		for i < len(ats) && ats[i] <= t {
			i++
		}
		out = append(out, curvePoint{T: t.Seconds(), Received: i})
	}
	return out
}

// latenessResult is the measurement at a steady rate of due jobs.
type latenessResult struct {
	Rate       int           `json:"rate"`
	Seconds    float64       `json:"seconds"`
	LeadMS     float64       `json:"lead_ms"`
	Jobs       int           `json:"jobs"`
	Pushed     int           `json:"pushed"`
	Received   int           `json:"received"`
	Duplicates int           `json:"duplicates"`
	Stats      latencyStats  `json:"lateness"`
	Series     []seriesPoint `json:"series"`
	PushErrors int64         `json:"push_errors"`
	Errors     []string      `json:"errors,omitempty"`
	receipts   []receipt
}

// lateness makes cfg.Rate jobs/s come due, evenly spaced, for
// cfg.Duration, each pushed cfg.Lead before it is due, to a topic whose
// subscribers acknowledge each, and measures receipt minus run_at.
func lateness(ctx context.Context, c *client, cfg *config, logf func(string, ...any)) (*latenessResult, error) {
	total := int(cfg.Duration.Seconds() * float64(cfg.Rate))
	sub, err := subscribeNew(ctx, c, cfg, "loadtest.lateness", total)
	if err != nil {
		return nil, err
	}
	defer sub.end()
	topic, col := sub.topic, sub.col
	logf("lateness: %d jobs due at %d/s over %s, each pushed %s ahead", total, cfg.Rate, cfg.Duration, cfg.Lead)
	interval := time.Second / time.Duration(cfg.Rate)
	first := time.Now().Add(cfg.Lead).UTC()
	resumed, err := pauseUntil(ctx, c, cfg, topic, first)
	if err != nil {
		return nil, err
	}
	p := newPusher(c, cfg.BatchWorkers)
	pushSteady(ctx, p, cfg, topic, first, interval, total)
	res := &latenessResult{Rate: cfg.Rate, Seconds: cfg.Duration.Seconds(), LeadMS: ms(cfg.Lead), Jobs: total}
	res.Pushed = p.wait()
	if err := resumed(); err != nil {
		return res, err
	}
	res.PushErrors = p.errs.n.Load()
	if res.PushErrors > 0 {
		res.Errors = append(res.Errors, "push: "+p.errs.first)
	}
	if res.Pushed == total {
		lastDue := first.Add(time.Duration(total) * interval)
		if err := col.await(ctx, lastDue, lastDue.Add(2*time.Minute), 10*time.Second); err != nil {
			return nil, err
		}
	}
	rs, dups, errs := col.result()
	res.Received, res.Duplicates, res.receipts = len(rs), dups, rs
	res.Errors = append(res.Errors, errs...)
	res.Stats = summarize(lates(rs))
	res.Series = series(rs, 100*time.Millisecond)
	if res.Received < total {
		return res, fmt.Errorf("lateness: received %d of %d jobs (%d pushed): none came for 10s, or 2 min passed after the last was due", res.Received, total, res.Pushed)
	}
	return res, nil
}

// pushSteady pushes total jobs to topic, the n-th due at first + n ×
// interval, each cfg.Lead before it is due, in batches of up to cfg.Batch;
// it returns once the last is handed to p, or ctx ends.
func pushSteady(ctx context.Context, p *pusher, cfg *config, topic string, first time.Time, interval time.Duration, total int) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	// Every tick pushes the jobs that are due within lead from now, so
	// each is pushed lead ahead whatever the ticks' own lateness.
	for next := 0; next < total && ctx.Err() == nil; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		horizon := time.Now().Add(cfg.Lead)
		var jobs []jobReq
		for ; next < total; next++ {
			at := first.Add(time.Duration(next) * interval)
			if at.After(horizon) {
				break
			}
			jobs = append(jobs, jobReq{Topic: topic, Body: sampleBody, RunAt: at.Format(time.RFC3339Nano), Priority: priority(cfg, next)})
			if len(jobs) == cfg.Batch {
				p.push(ctx, jobs)
				jobs = nil
			}
		}
		if len(jobs) > 0 {
			p.push(ctx, jobs)
		}
	}
}

// priority is the priority of a phase's n-th job: with -priorities every
// one from -10 to 10 in turn, else 0.
func priority(cfg *config, n int) int {
	if !cfg.Priorities {
		return 0
	}
	return n%21 - 10
}

// pauseUntil, with -pause, pauses topic and resumes it at the instant at;
// the returned function waits for the resume and says how it went. Without
// -pause it does nothing.
func pauseUntil(ctx context.Context, c *client, cfg *config, topic string, at time.Time) (func() error, error) {
	if !cfg.Pause {
		return func() error { return nil }, nil
	}
	if err := c.setPaused(ctx, topic, true); err != nil {
		return nil, fmt.Errorf("pause %s: %w", topic, err)
	}
	done := make(chan error, 1)
	go func() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
			done <- c.setPaused(ctx, topic, false)
		case <-ctx.Done():
			done <- ctx.Err()
		}
	}()
	return func() error {
		if err := <-done; err != nil {
			return fmt.Errorf("resume %s: %w", topic, err)
		}
		return nil
	}, nil
}

// uniqueTopic names a fresh topic under prefix, so runs on one server do
// not mix.
func uniqueTopic(prefix string) string {
	return fmt.Sprintf("%s.%x", prefix, time.Now().UnixNano())
}
