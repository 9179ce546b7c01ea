package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// pullResult is the drain of due jobs by HTTP pull consumers.
type pullResult struct {
	Jobs    int `json:"jobs"`
	Workers int `json:"workers"`
	// Batch is the most jobs a consumer claims at once; above 1 it
	// acknowledges them together with one POST /v1/acks.
	Batch   int     `json:"batch"`
	Acked   int64   `json:"acked"`
	Seconds float64 `json:"seconds"`
	// PerSecond is jobs claimed and acknowledged per second.
	PerSecond float64 `json:"per_second"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
}

// pull pushes cfg.PullJobs jobs due now to a topic nobody subscribes to,
// then drains it with cfg.PullWorkers consumers over HTTP; it measures jobs
// per second from the first claim to the last ack. With cfg.PullBatch 1
// each consumer claims one job at a time and acknowledges it before the
// next claim, as a simple worker does; with more, it claims up to
// cfg.PullBatch jobs and acknowledges them together with one POST /v1/acks.
func pull(ctx context.Context, c *client, cfg *config, logf func(string, ...any)) (*pullResult, error) {
	topic := uniqueTopic("loadtest.pull")
	logf("pull: pushing %d due jobs, then %d consumers %s", cfg.PullJobs, cfg.PullWorkers, pullHow(cfg.PullBatch))
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
	res := &pullResult{Jobs: cfg.PullJobs, Workers: cfg.PullWorkers, Batch: cfg.PullBatch}
	var (
		acked    atomic.Int64
		errs     errRecorder
		wg       sync.WaitGroup
		claimURL = "/v1/topics/" + url.PathEscape(topic) + "/claim"
	)
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// The last ack ends the drain: it stops the claims still waiting for a
	// job, so that their wait is not counted.
	var (
		end     time.Time
		endOnce sync.Once
	)
	ack := func(n int64) {
		if acked.Add(n) >= int64(cfg.PullJobs) {
			endOnce.Do(func() { end = time.Now(); cancel() })
		}
	}
	fail := func(err error) {
		if dctx.Err() == nil {
			errs.add(err)
		}
	}
	start := time.Now()
	for range cfg.PullWorkers {
		wg.Go(func() {
			for dctx.Err() == nil {
				var out struct {
					Jobs []ackReq `json:"jobs"`
				}
				if err := c.do(dctx, "POST", claimURL, map[string]any{"max": cfg.PullBatch, "wait": "1s"}, &out); err != nil {
					fail(err)
					continue
				}
				if cfg.PullBatch > 1 {
					if len(out.Jobs) > 0 {
						ack(c.ackBatch(dctx, out.Jobs, fail))
					}
					continue
				}
				for _, j := range out.Jobs {
					if err := c.do(dctx, "POST", "/v1/jobs/"+url.PathEscape(j.ID)+"/ack", map[string]string{"lease": j.Lease}, nil); err != nil {
						fail(err)
						continue
					}
					ack(1)
				}
			}
		})
	}
	wg.Wait()
	if end.IsZero() {
		end = time.Now()
	}
	res.Seconds = end.Sub(start).Seconds()
	res.Acked = acked.Load()
	res.PerSecond = float64(res.Acked) / res.Seconds
	res.Errors, res.FirstErr = errs.n.Load(), errs.first
	if res.Acked < int64(res.Jobs) {
		return res, fmt.Errorf("pull: acknowledged %d of %d jobs in 2 min", res.Acked, res.Jobs)
	}
	return res, nil
}

// ackReq is a delivery as the claim answers it, and an item of POST /v1/acks.
type ackReq struct {
	ID    string `json:"id"`
	Lease string `json:"lease"`
}

// ackBatch acknowledges jobs with one POST /v1/acks and returns how many
// were acknowledged; the request's error, or each item's, goes to fail.
func (c *client) ackBatch(ctx context.Context, jobs []ackReq, fail func(error)) int64 {
	var out struct {
		Results []struct {
			ID    string          `json:"id"`
			Error json.RawMessage `json:"error"`
		} `json:"results"`
	}
	if err := c.do(ctx, "POST", "/v1/acks", map[string]any{"acks": jobs}, &out); err != nil {
		fail(err)
		return 0
	}
	var n int64
	for _, r := range out.Results {
		if r.Error != nil {
			fail(fmt.Errorf("POST /v1/acks: job %s: %s", r.ID, r.Error))
			continue
		}
		n++
	}
	return n
}

// pullHow says how the pull consumers claim and acknowledge, for the log
// and the report.
func pullHow(batch int) string {
	if batch == 1 {
		return "claim and ack one at a time"
	}
	return fmt.Sprintf("claim up to %d and ack them with one request", batch)
}
