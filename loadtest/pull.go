package main

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// pullResult is the drain of due jobs by HTTP pull consumers.
type pullResult struct {
	Jobs    int     `json:"jobs"`
	Workers int     `json:"workers"`
	Acked   int64   `json:"acked"`
	Seconds float64 `json:"seconds"`
	// PerSecond is jobs claimed and acknowledged per second.
	PerSecond float64 `json:"per_second"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
}

// pull pushes cfg.PullJobs jobs due now to a topic nobody subscribes to,
// then drains it with cfg.PullWorkers consumers, each claiming one job at
// a time over HTTP and acknowledging it before the next claim, as a
// simple worker does; it measures jobs per second from the first claim to
// the last ack.
func pull(ctx context.Context, c *client, cfg *config, logf func(string, ...any)) (*pullResult, error) {
	topic := uniqueTopic("loadtest.pull")
	logf("pull: pushing %d due jobs, then %d consumers claim and ack one at a time", cfg.PullJobs, cfg.PullWorkers)
	p := newPusher(c, cfg.BatchWorkers)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for i := 0; i < cfg.PullJobs; i += cfg.Batch {
		jobs := make([]jobReq, min(cfg.Batch, cfg.PullJobs-i))
		for k := range jobs {
			jobs[k] = jobReq{Topic: topic, Body: sampleBody, RunAt: now}
		}
		p.push(ctx, jobs)
	}
	if pushed := p.wait(); pushed < cfg.PullJobs {
		return nil, fmt.Errorf("pull: pushed %d of %d jobs: %s", pushed, cfg.PullJobs, p.errs.first)
	}
	res := &pullResult{Jobs: cfg.PullJobs, Workers: cfg.PullWorkers}
	var (
		acked    atomic.Int64
		errs     errRecorder
		wg       sync.WaitGroup
		claimURL = "/v1/topics/" + url.PathEscape(topic) + "/claim"
	)
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	for range cfg.PullWorkers {
		wg.Go(func() {
			for dctx.Err() == nil && acked.Load() < int64(cfg.PullJobs) {
				var out struct {
					Jobs []struct {
						ID    string `json:"id"`
						Lease string `json:"lease"`
					} `json:"jobs"`
				}
				if err := c.do(dctx, "POST", claimURL, map[string]any{"max": 1, "wait": "1s"}, &out); err != nil {
					errs.add(err)
					continue
				}
				for _, j := range out.Jobs {
					if err := c.do(dctx, "POST", "/v1/jobs/"+url.PathEscape(j.ID)+"/ack", map[string]string{"lease": j.Lease}, nil); err != nil {
						errs.add(err)
						continue
					}
					acked.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Acked = acked.Load()
	res.PerSecond = float64(res.Acked) / res.Seconds
	res.Errors, res.FirstErr = errs.n.Load(), errs.first
	if res.Acked < int64(res.Jobs) {
		return res, fmt.Errorf("pull: acknowledged %d of %d jobs in 2 min", res.Acked, res.Jobs)
	}
	return res, nil
}
