// Command loadtest measures a running delayq over its HTTP API: intake in
// jobs/s (one job per request, and batches) and delivery lateness (when a
// pull consumer receives a job minus its run_at) at a steady rate of due
// jobs. It prints a Markdown summary.
//
//	go run ./loadtest -mode intake -server http://127.0.0.1:8080
//	go run ./loadtest -mode lateness -rate 1000 -duration 20s
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	var (
		server   = flag.String("server", "http://127.0.0.1:8080", "delayq base URL")
		mode     = flag.String("mode", "all", "intake, lateness or all")
		workers  = flag.Int("workers", 32, "concurrent requests for intake")
		duration = flag.Duration("duration", 10*time.Second, "how long each measurement runs")
		batch    = flag.Int("batch", 1000, "jobs per batch request")
		rate     = flag.Int("rate", 1000, "due jobs per second for lateness")
		lead     = flag.Duration("lead", 2*time.Second, "how far ahead lateness jobs are scheduled")
	)
	flag.Parse()
	c := &client{base: *server, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}}
	ctx := context.Background()
	if *mode == "intake" || *mode == "all" {
		single := c.intake(ctx, *workers, *duration, 1)
		batched := c.intake(ctx, max(*workers/4, 2), *duration, *batch)
		fmt.Printf("| intake | jobs/s |\n| --- | --- |\n| one job per request, %d workers | %.0f |\n| batches of %d | %.0f |\n\n",
			*workers, single, *batch, batched)
	}
	if *mode == "lateness" || *mode == "all" {
		if err := c.lateness(ctx, *rate, *duration, *lead); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(1)
		}
	}
}

type client struct {
	base string
	http *http.Client
}

func (c *client) post(ctx context.Context, path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

type jobReq struct {
	Topic string          `json:"topic"`
	Body  json.RawMessage `json:"body"`
	Delay string          `json:"delay,omitempty"`
	RunAt string          `json:"run_at,omitempty"`
}

// intake pushes far-future jobs for d and returns jobs/s.
func (c *client) intake(ctx context.Context, workers int, d time.Duration, batch int) float64 {
	topic := "loadtest.intake." + strconv.FormatInt(time.Now().UnixNano(), 36)
	body := json.RawMessage(`{"order":42,"note":"a small body of a typical size"}`)
	job := jobReq{Topic: topic, Body: body, Delay: "24h"}
	jobs := make([]jobReq, batch)
	for i := range jobs {
		jobs[i] = job
	}
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				var err error
				if batch == 1 {
					err = c.post(ctx, "/v1/jobs", job, nil)
				} else {
					err = c.post(ctx, "/v1/jobs/batch", map[string]any{"jobs": jobs}, nil)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "intake:", err)
					return
				}
				n.Add(int64(batch))
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

type delivery struct {
	ID    string    `json:"id"`
	RunAt time.Time `json:"run_at"`
	Lease string    `json:"lease"`
}

// lateness pushes rate jobs/s, each due lead after its push, for d, while
// pull consumers claim and ack them; it prints lateness percentiles.
func (c *client) lateness(ctx context.Context, rate int, d, lead time.Duration) error {
	topic := "loadtest.lateness." + strconv.FormatInt(time.Now().UnixNano(), 36)
	const tick = 10 * time.Millisecond
	perTick := max(rate/int(time.Second/tick), 1)
	total := int(d/tick) * perTick

	var mu sync.Mutex
	lates := make([]time.Duration, 0, total)
	done := make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var consumers, ackers sync.WaitGroup
	var errs atomic.Int64
	// Acks go through their own workers, so that a claim loop is back to
	// claiming at once, as a real consumer working in parallel would be.
	acks := make(chan delivery, 4096)
	for range 16 {
		ackers.Go(func() {
			for j := range acks {
				if err := c.post(ctx, "/v1/jobs/"+j.ID+"/ack", map[string]string{"lease": j.Lease}, nil); err != nil {
					errs.Add(1)
				}
			}
		})
	}
	for range 8 {
		consumers.Go(func() {
			for cctx.Err() == nil {
				var out struct{ Jobs []delivery }
				err := c.post(cctx, "/v1/topics/"+topic+"/claim", map[string]any{"max": 100, "wait": "2s"}, &out)
				now := time.Now()
				if err != nil {
					if cctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				mu.Lock()
				for _, j := range out.Jobs {
					lates = append(lates, now.Sub(j.RunAt))
				}
				got := len(lates)
				mu.Unlock()
				for _, j := range out.Jobs {
					acks <- j
				}
				if got >= total {
					select {
					case <-done:
					default:
						close(done)
					}
				}
			}
		})
	}
	t := time.NewTicker(tick)
	for i := 0; i < total; i += perTick {
		<-t.C
		runAt := time.Now().Add(lead).UTC().Format(time.RFC3339Nano)
		jobs := make([]jobReq, perTick)
		for k := range jobs {
			jobs[k] = jobReq{Topic: topic, Body: json.RawMessage(`{"n":1}`), RunAt: runAt}
		}
		go func() {
			if err := c.post(ctx, "/v1/jobs/batch", map[string]any{"jobs": jobs}, nil); err != nil {
				errs.Add(1)
				fmt.Fprintln(os.Stderr, "push:", err)
			}
		}()
	}
	t.Stop()
	select {
	case <-done:
	case <-time.After(lead + 30*time.Second):
	}
	cancel()
	consumers.Wait()
	close(acks)
	ackers.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(lates) < total {
		return fmt.Errorf("received %d of %d jobs (%d request errors)", len(lates), total, errs.Load())
	}
	slices.Sort(lates)
	pct := func(p float64) time.Duration { return lates[min(int(p*float64(len(lates))), len(lates)-1)] }
	fmt.Printf("| lateness at %d due jobs/s over %s (%d jobs) | value |\n| --- | --- |\n", rate, d, len(lates))
	fmt.Printf("| min | %s |\n| p50 | %s |\n| p99 | %s |\n| max | %s |\n| request errors | %d |\n\n",
		lates[0].Round(10*time.Microsecond), pct(0.50).Round(10*time.Microsecond),
		pct(0.99).Round(10*time.Microsecond), lates[len(lates)-1].Round(10*time.Microsecond), errs.Load())
	if errs.Load() > 0 {
		return errors.New("some requests failed")
	}
	return nil
}
