package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// soakSample is one reading of the soak phase, T seconds after it began.
type soakSample struct {
	T float64 `json:"t_s"`
	// RSS, Goroutines and FDs are delayq's resident memory (bytes), its
	// goroutines (go_goroutines of /metrics) and open file descriptors.
	RSS        int64 `json:"rss_bytes"`
	Goroutines int   `json:"goroutines"`
	FDs        int   `json:"fds"`
	// BackendRSS is a separate backend server's resident memory (bytes).
	BackendRSS int64   `json:"backend_rss_bytes,omitempty"`
	CPUSeconds float64 `json:"cpu_s"`
	Pushed     int     `json:"pushed"`
	Received   int     `json:"received"`
	// SubscriberErrors counts the errors the subscribers met so far (a
	// subscriber whose connection ends does not come back).
	SubscriberErrors int `json:"subscriber_errors,omitempty"`
	// Unfinished is the topic's scheduled, ready and reserved jobs.
	Unfinished int64 `json:"unfinished"`
}

// soakResult is the soak phase's: a steady load in and out for a long
// time, and how delayq's resources and lateness moved meanwhile.
type soakResult struct {
	Rate      int     `json:"rate"`
	Seconds   float64 `json:"seconds"`
	Retention string  `json:"retention"`
	// Sample is the seconds between readings.
	Sample     float64      `json:"sample_s"`
	Pushed     int          `json:"pushed"`
	Received   int          `json:"received"`
	Duplicates int          `json:"duplicates"`
	PushErrors int64        `json:"push_errors"`
	Stats      latencyStats `json:"lateness"`
	// Windows is the lateness of the jobs due in each sample interval, T
	// in seconds after the phase began.
	Windows []seriesPoint `json:"windows"`
	Samples []soakSample  `json:"samples"`
	// Drift compares the first and the last quarter of the run.
	Drift  []soakDrift `json:"drift"`
	Errors []string    `json:"errors,omitempty"`
}

// soakDrift is a measure's mean over the first quarter of the run (after
// its first tenth, the warm-up) and over the last quarter.
type soakDrift struct {
	Measure string  `json:"measure"`
	First   float64 `json:"first"`
	Last    float64 `json:"last"`
}

// soak pushes cfg.SoakRate jobs/s, each due cfg.Lead after its push, to a
// topic whose WebSocket subscribers acknowledge each, for cfg.SoakFor, and
// reads delayq's memory, goroutines, file descriptors and CPU every
// cfg.SoakSample: a leak shows as a line that climbs.
func soak(ctx context.Context, c *client, cfg *config, t *target, logf func(string, ...any)) (*soakResult, error) {
	total := int(cfg.SoakFor.Seconds() * float64(cfg.SoakRate))
	sub, err := subscribeNew(ctx, c, cfg, "loadtest.soak", total)
	if err != nil {
		return nil, err
	}
	defer sub.end()
	topic, col := sub.topic, sub.col
	logf("soak: %d jobs/s in and out for %s, readings every %s, --retention %s", cfg.SoakRate, cfg.SoakFor, cfg.SoakSample, cfg.Retention)
	res := &soakResult{Rate: cfg.SoakRate, Seconds: cfg.SoakFor.Seconds(), Retention: cfg.Retention.String(), Sample: cfg.SoakSample.Seconds()}
	start := time.Now()
	p := newPusher(c, cfg.BatchWorkers)
	var (
		mu      sync.Mutex
		samples []soakSample
		swg     sync.WaitGroup
	)
	sample := func() {
		s := readSoakSample(ctx, c, t, topic, time.Since(start))
		s.Pushed, s.Received = p.pushedSoFar(), col.received()
		var first string
		s.SubscriberErrors, first = col.failed()
		mu.Lock()
		samples = append(samples, s)
		mu.Unlock()
		logf("  %5.0fs: delayq RSS %s, %d goroutines, %d fds, CPU %.0fs; pushed %d, received %d, unfinished %d",
			s.T, mib(s.RSS), s.Goroutines, s.FDs, s.CPUSeconds, s.Pushed, s.Received, s.Unfinished)
		if s.SubscriberErrors > 0 {
			logf("  %5.0fs: %d subscriber errors, the first: %s", s.T, s.SubscriberErrors, first)
		}
	}
	sample()
	swg.Go(func() { every(sub.ctx, cfg.SoakSample, sample) })
	first := start.Add(cfg.Lead).UTC()
	interval := time.Second / time.Duration(cfg.SoakRate)
	pushSteady(ctx, p, cfg, topic, first, interval, total)
	res.Pushed = p.wait()
	res.PushErrors = p.errs.n.Load()
	if res.PushErrors > 0 {
		res.Errors = append(res.Errors, "push: "+p.errs.first)
	}
	lastDue := first.Add(time.Duration(total) * interval)
	// A run cut short still reports what it read.
	awaitErr := col.await(ctx, lastDue, lastDue.Add(time.Minute), 10*time.Second)
	if awaitErr == nil {
		// The last reading after the last acknowledgement, not merely the
		// last receipt.
		settled(ctx, c, topic, 10*time.Second)
	}
	sub.stop()
	swg.Wait()
	sample()
	rs, dups, errs := col.result()
	res.Received, res.Duplicates = len(rs), dups
	res.Errors = append(res.Errors, errs...)
	res.Stats = summarize(lates(rs))
	res.Windows = series(rs, cfg.SoakSample)
	lead := first.Sub(start).Seconds()
	for i := range res.Windows {
		res.Windows[i].T += lead
	}
	res.Samples = samples
	res.Drift = soakDrifts(samples, res.Windows, res.Seconds)
	if awaitErr != nil {
		return res, awaitErr
	}
	if res.Received < res.Pushed {
		return res, fmt.Errorf("soak: received %d of %d jobs pushed", res.Received, res.Pushed)
	}
	return res, nil
}

// settled waits, at most for d, until topic holds no unfinished job.
func settled(ctx context.Context, c *client, topic string, d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		if n, err := c.topicCounts(ctx, topic); err == nil && n.Scheduled+n.Ready+n.Reserved == 0 {
			return
		}
	}
}

// readSoakSample reads delayq's resources at elapsed; readings that fail
// are left zero.
func readSoakSample(ctx context.Context, c *client, t *target, topic string, elapsed time.Duration) soakSample {
	s := soakSample{T: elapsed.Seconds()}
	if t.DelayqPID != 0 {
		s.RSS, _ = rss(t.DelayqPID)
		if cpu, err := cpuTime(t.DelayqPID); err == nil {
			s.CPUSeconds = cpu.Seconds()
		}
		if fds, err := os.ReadDir("/proc/" + strconv.Itoa(t.DelayqPID) + "/fd"); err == nil {
			s.FDs = len(fds)
		}
	}
	if t.BackendPID != 0 && t.BackendPID != t.DelayqPID {
		s.BackendRSS, _ = rss(t.BackendPID)
	}
	s.Goroutines, _ = c.goroutines(ctx)
	if n, err := c.topicCounts(ctx, topic); err == nil {
		s.Unfinished = n.Scheduled + n.Ready + n.Reserved
	}
	return s
}

// goroutines reads go_goroutines from delayq's /metrics.
func (c *client) goroutines(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("GET /metrics: no go_goroutines")
}

// soakDrifts compares the first quarter of the run, after its first tenth,
// with the last quarter, for each measure the soak phase plots.
func soakDrifts(samples []soakSample, windows []seriesPoint, seconds float64) []soakDrift {
	firstFrom, firstTo, lastFrom := seconds/10, seconds/10+seconds/4, seconds*3/4
	mean := func(from, to float64, pts int, at func(int) (float64, float64)) float64 {
		var sum float64
		n := 0
		for i := range pts {
			if t, v := at(i); t >= from && t < to {
				sum += v
				n++
			}
		}
		if n == 0 {
			return 0
		}
		return sum / float64(n)
	}
	var out []soakDrift
	add := func(name string, pts int, at func(int) (float64, float64)) {
		out = append(out, soakDrift{Measure: name, First: mean(firstFrom, firstTo, pts, at), Last: mean(lastFrom, seconds+1, pts, at)})
	}
	add("delayq RSS, MiB", len(samples), func(i int) (float64, float64) { return samples[i].T, float64(samples[i].RSS) / (1 << 20) })
	add("goroutines", len(samples), func(i int) (float64, float64) { return samples[i].T, float64(samples[i].Goroutines) })
	add("open file descriptors", len(samples), func(i int) (float64, float64) { return samples[i].T, float64(samples[i].FDs) })
	if len(samples) > 0 && samples[0].BackendRSS > 0 {
		add("backend server RSS, MiB", len(samples), func(i int) (float64, float64) { return samples[i].T, float64(samples[i].BackendRSS) / (1 << 20) })
	}
	add("lateness p99 of each window, ms", len(windows), func(i int) (float64, float64) { return windows[i].T, windows[i].P99 })
	add("lateness p50 of each window, ms", len(windows), func(i int) (float64, float64) { return windows[i].T, windows[i].P50 })
	return out
}

// writeSoak writes the soak phase's section of the report.
func writeSoak(b *strings.Builder, r *results, plots map[string]string) {
	s := r.Soak
	if s == nil {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Soak\n\n%s jobs/s, each due %s after its push, for %.0f s, each acknowledged by one of %d WebSocket subscribers as it comes; `--retention %s`, so that the store deletes finished jobs as fast as they finish once it is full.\n\n",
		num(float64(s.Rate)), r.Config.Lead, s.Seconds, r.Config.Subscribers, s.Retention)
	w("| pushed | received | lateness p50 / p99 / max | push errors |\n| --- | --- | --- | --- |\n")
	w("| %s | %s (%d twice) | %.1f / %.1f / %.1f ms | %d |\n\n", num(float64(s.Pushed)), num(float64(s.Received)), s.Duplicates, s.Stats.P50, s.Stats.P99, s.Stats.Max, s.PushErrors)
	w("Means over the first quarter of the run (after its first tenth, the warm-up) and over its last quarter:\n\n| measure | first quarter | last quarter |\n| --- | --- | --- |\n")
	for _, d := range s.Drift {
		w("| %s | %.1f | %.1f |\n", d.Measure, d.First, d.Last)
	}
	w("\n")
	if p, ok := plots["soak"]; ok {
		w("![delayq's memory, goroutines, file descriptors and lateness over the soak](%s)\n\n", p)
	}
	w("Readings:\n\n| s | delayq RSS | goroutines | fds | backend RSS | delayq CPU s | pushed | received | unfinished |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, x := range s.Samples {
		w("| %.0f | %s | %d | %d | %s | %.1f | %s | %s | %s |\n", x.T, mib(x.RSS), x.Goroutines, x.FDs, mib(x.BackendRSS), x.CPUSeconds,
			num(float64(x.Pushed)), num(float64(x.Received)), num(float64(x.Unfinished)))
	}
	w("\n")
	writeErrors(b, s.Errors)
}
