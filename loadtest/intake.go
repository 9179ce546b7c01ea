package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// client calls delayq's HTTP API.
type client struct {
	base string
	http *http.Client
}

func newClient(base string) *client {
	return &client{base: base, http: &http.Client{
		Timeout:   time.Minute,
		Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024},
	}}
}

// do sends body (bytes, or a value to encode) and decodes a 2xx answer
// into out, when out is not nil.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
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
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// jobReq is a job as POST /v1/jobs takes it.
type jobReq struct {
	Topic    string          `json:"topic"`
	Body     json.RawMessage `json:"body"`
	Delay    string          `json:"delay,omitempty"`
	RunAt    string          `json:"run_at,omitempty"`
	Priority int             `json:"priority,omitempty"`
}

// sampleBody is a small body of a typical size.
var sampleBody = json.RawMessage(`{"order":42,"customer":"c-1234","note":"a small body of a typical size"}`)

// batchBody encodes a batch request of n copies of j.
func batchBody(j jobReq, n int) []byte {
	jobs := make([]jobReq, n)
	for i := range jobs {
		jobs[i] = j
	}
	b, _ := json.Marshal(map[string]any{"jobs": jobs})
	return b
}

// intakeResult is one intake measurement.
type intakeResult struct {
	Jobs      int64   `json:"jobs"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
}

// errRecorder counts errors and keeps the first.
type errRecorder struct {
	n     atomic.Int64
	once  sync.Once
	first string
}

func (e *errRecorder) add(err error) {
	e.n.Add(1)
	e.once.Do(func() { e.first = err.Error() })
}

func (e *errRecorder) fill(r *intakeResult) {
	r.Errors = e.n.Load()
	if r.Errors > 0 {
		r.FirstErr = e.first
	}
}

// intakeHTTP pushes jobs due in delay to topic from workers for d, one job
// per request when batch is 1, else batch per request; with limit > 0 it
// stops once limit jobs are in. Every request body is encoded once, so the
// harness spends its CPU on requests, not JSON.
func (c *client) intakeHTTP(ctx context.Context, topic string, workers, batch int, d time.Duration, limit int64) intakeResult {
	job := jobReq{Topic: topic, Body: sampleBody, Delay: "1h"}
	path, body := "/v1/jobs", []byte(nil)
	if batch == 1 {
		body, _ = json.Marshal(job)
	} else {
		path, body = "/v1/jobs/batch", batchBody(job, batch)
	}
	var (
		n     atomic.Int64
		errs  errRecorder
		wg    sync.WaitGroup
		start = time.Now()
	)
	deadline := start.Add(d)
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil && (limit <= 0 || n.Load() < limit) {
				var out struct {
					Results []struct {
						Error json.RawMessage `json:"error"`
					} `json:"results"`
				}
				var dst any
				if batch > 1 {
					dst = &out
				}
				if err := c.do(ctx, http.MethodPost, path, body, dst); err != nil {
					errs.add(err)
					if errs.n.Load() > 100 {
						return
					}
					continue
				}
				ok := int64(batch)
				for _, r := range out.Results {
					if r.Error != nil {
						ok--
						errs.add(errors.New(string(r.Error)))
					}
				}
				n.Add(ok)
			}
		})
	}
	wg.Wait()
	r := intakeResult{Jobs: n.Load(), Seconds: time.Since(start).Seconds()}
	r.PerSecond = float64(r.Jobs) / r.Seconds
	errs.fill(&r)
	return r
}

// intakeNATS publishes jobs due in an hour to delayq.push.<topic> for d,
// each with a reply subject, keeping up to window unanswered, and counts
// the answers that carry an id: a job counts once delayq has stored it.
// It connects as t.NATSUser when set.
func intakeNATS(ctx context.Context, t *target, topic string, window int, d time.Duration) (intakeResult, error) {
	opts := []nats.Option{nats.Name("delayq-loadtest")}
	if t.NATSUser != "" {
		opts = append(opts, nats.UserInfo(t.NATSUser, t.NATSPassword))
	}
	nc, err := nats.Connect(t.NATSURL, opts...)
	if err != nil {
		return intakeResult{}, err
	}
	defer nc.Close()
	var (
		ok, answered atomic.Int64
		errs         errRecorder
		slots        = make(chan struct{}, window)
	)
	inbox := nats.NewInbox()
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		if bytes.HasPrefix(m.Data, []byte(`{"id"`)) {
			ok.Add(1)
		} else {
			errs.add(errors.New(string(m.Data)))
		}
		answered.Add(1)
		<-slots
	})
	if err != nil {
		return intakeResult{}, err
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return intakeResult{}, err
	}
	start := time.Now()
	deadline := start.Add(d)
	var sent int64
	for time.Now().Before(deadline) && ctx.Err() == nil {
		slots <- struct{}{}
		m := &nats.Msg{Subject: "delayq.push." + topic, Reply: inbox + "." + strconv.FormatInt(sent, 36), Data: sampleBody, Header: nats.Header{}}
		m.Header.Set("Delayq-Delay", "1h")
		if err := nc.PublishMsg(m); err != nil {
			return intakeResult{}, err
		}
		sent++
	}
	// The answers still due come within a few seconds, or are counted as
	// lost.
	wait := time.Now().Add(10 * time.Second)
	for answered.Load() < sent && time.Now().Before(wait) {
		time.Sleep(10 * time.Millisecond)
	}
	r := intakeResult{Jobs: ok.Load(), Seconds: time.Since(start).Seconds()}
	r.PerSecond = float64(r.Jobs) / r.Seconds
	errs.fill(&r)
	if lost := sent - answered.Load(); lost > 0 {
		r.Errors += lost
		if r.FirstErr == "" {
			r.FirstErr = fmt.Sprintf("%d publishes got no answer within 10s", lost)
		}
	}
	return r, nil
}

// topicCounts reads a topic's job counts.
func (c *client) topicCounts(ctx context.Context, topic string) (counts, error) {
	var out struct {
		Counts counts `json:"counts"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/topics/"+topic, nil, &out)
	return out.Counts, err
}

// setPaused pauses or resumes a topic.
func (c *client) setPaused(ctx context.Context, topic string, paused bool) error {
	action := "/resume"
	if paused {
		action = "/pause"
	}
	return c.do(ctx, http.MethodPost, "/v1/topics/"+topic+action, nil, nil)
}

// counts are a topic's jobs by state, done and cancelled ones within the
// retention period.
type counts struct {
	Scheduled int64 `json:"scheduled"`
	Ready     int64 `json:"ready"`
	Reserved  int64 `json:"reserved"`
	Done      int64 `json:"done"`
	Dead      int64 `json:"dead"`
	Cancelled int64 `json:"cancelled"`
}
