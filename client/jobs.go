package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// PushParams is a job to create (Push, PushBatch) or to create or replace
// (Replace). Only Topic is required; a zero field takes the service's
// default (the topic's, for TTR, MaxAttempts and the backoff).
type PushParams struct {
	// Topic is the job's topic, such as "orders.close".
	Topic string
	// Body is the job's body: a json.RawMessage (or []byte) holding one
	// JSON value is sent byte for byte; anything else is marshalled with
	// encoding/json. Nil: the body is null.
	Body any
	// Delay makes the job due after this long. Exclusive with RunAt;
	// neither: due now.
	Delay time.Duration
	// RunAt makes the job due at this time (kept to the millisecond).
	// Exclusive with Delay.
	RunAt time.Time
	// ID is the job's id (1-128 characters of [A-Za-z0-9_-]); empty: the
	// service makes one.
	ID string
	// Key is the job's business key, by which a topic's jobs are found
	// (FindByKey) and cancelled (CancelByKey).
	Key string
	// TTR is how long a consumer holds a delivery (1s to 12h).
	TTR time.Duration
	// MaxAttempts is the most deliveries before the job goes dead (1-1000).
	MaxAttempts int
	// Priority orders jobs due together: -10 (most urgent) to 10; 0 is the
	// default.
	Priority int
	// BackoffDelays is the job's own retry schedule (the delay after each
	// failed attempt, the last repeated), instead of its topic's backoff.
	BackoffDelays []time.Duration
	// URL is the job's own webhook URL, for a webhook topic that allows
	// one (DeliveryConfig.AllowJobURL); "": the topic's.
	URL string
	// ExpiresAt is when the job stops being delivered: one not delivered
	// and acknowledged by then goes dead with LastError "expired".
	// Exclusive with ExpiresIn; neither: the topic's expires_in, if any.
	ExpiresAt time.Time
	// ExpiresIn is ExpiresAt as a duration from the job's run_at.
	ExpiresIn time.Duration
	// Then is the job's next step, without ID: pushed by the service once
	// this job is done (acknowledged), its Delay counted from the ack;
	// never for a cancelled or dead job. Its id is "c-" and 32 hex digits
	// derived from this job and its finish. A step may have its own Then,
	// up to 8 steps, whose JSON is at most 64 KiB.
	Then *PushParams
}

// pushWire is PushParams without the body, as the service reads it.
type pushWire struct {
	Topic       string          `json:"topic"`
	Delay       string          `json:"delay,omitempty"`
	RunAt       string          `json:"run_at,omitempty"`
	ID          string          `json:"id,omitempty"`
	Key         string          `json:"key,omitempty"`
	TTR         string          `json:"ttr,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	Priority    int             `json:"priority,omitempty"`
	Backoff     *backoffDelays  `json:"backoff,omitempty"`
	URL         string          `json:"url,omitempty"`
	ExpiresAt   string          `json:"expires_at,omitempty"`
	ExpiresIn   string          `json:"expires_in,omitempty"`
	Then        json.RawMessage `json:"then,omitempty"`
	Body        json.RawMessage `json:"-"`
}

// backoffDelays is a job's own retry schedule on the wire.
type backoffDelays struct {
	Delays []string `json:"delays"`
}

// encode returns p as the JSON object the service reads, the body spliced
// in byte for byte (encoding/json would compact and escape it).
func (p *PushParams) encode() ([]byte, error) {
	if p == nil {
		return nil, invalidArgument("", "no job given")
	}
	if p.Delay != 0 && !p.RunAt.IsZero() {
		return nil, invalidArgument("delay", "delay and run_at are exclusive")
	}
	w := pushWire{Topic: p.Topic, ID: p.ID, Key: p.Key, MaxAttempts: p.MaxAttempts, Priority: p.Priority, URL: p.URL}
	if p.Delay != 0 {
		w.Delay = durationString(p.Delay)
	}
	if !p.RunAt.IsZero() {
		w.RunAt = p.RunAt.UTC().Format(time.RFC3339Nano)
	}
	if p.TTR != 0 {
		w.TTR = durationString(p.TTR)
	}
	if !p.ExpiresAt.IsZero() && p.ExpiresIn != 0 {
		return nil, invalidArgument("expires_in", "expires_at and expires_in are exclusive")
	}
	if !p.ExpiresAt.IsZero() {
		w.ExpiresAt = p.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	if p.ExpiresIn != 0 {
		w.ExpiresIn = durationString(p.ExpiresIn)
	}
	if len(p.BackoffDelays) > 0 {
		w.Backoff = &backoffDelays{}
		for _, d := range p.BackoffDelays {
			w.Backoff.Delays = append(w.Backoff.Delays, durationString(d))
		}
	}
	if p.Then != nil {
		then, err := p.Then.encode()
		if ae, ok := err.(*APIError); ok {
			ae.Field = strings.TrimSuffix("then."+ae.Field, ".")
		}
		if err != nil {
			return nil, err
		}
		w.Then = then
	}
	body, err := marshalBody("body", p.Body)
	if err != nil {
		return nil, err
	}
	out := jsonBody(&w)
	if body != nil {
		out = append(out[:len(out)-1], `,"body":`...)
		out = append(out, body...)
		out = append(out, '}')
	}
	return out, nil
}

// marshalBody returns a job body given as PushParams.Body is: nil for nil,
// a json.RawMessage or []byte as is, anything else marshalled. Errors:
// ErrInvalidArgument naming field when it is not one JSON value.
func marshalBody(field string, v any) (json.RawMessage, error) {
	var body []byte
	switch b := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		body = b
	case []byte:
		body = b
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			return nil, invalidArgument(field, "cannot marshal the body: %v", err)
		}
	}
	if !json.Valid(body) {
		return nil, invalidArgument(field, "the body is not one JSON value")
	}
	return bytes.TrimSpace(body), nil
}

// Pushed is the answer to a push: the job's id, topic, run_at and state.
type Pushed struct {
	// ID is the job's id, the one given or made by the service.
	ID string `json:"id"`
	// Topic is the job's topic.
	Topic string `json:"topic"`
	// RunAt is when the job is due.
	RunAt time.Time `json:"run_at"`
	// State is StateScheduled, or StateReady when due now.
	State string `json:"state"`
	// Replaced is true when an unfinished job was replaced rather than a
	// job created: by Replace of an existing job, or by a push of a key a
	// job has on a topic with unique_keys "replace".
	Replaced bool `json:"replaced"`
}

// Push creates a job (POST /v1/jobs). Errors: ErrInvalidArgument (Field
// names the field), ErrConflict when the id belongs to an unfinished job
// (the APIError's Job is that job), ErrRateLimited, ErrPermissionDenied,
// ErrUnavailable. Pushing the same ID again is idempotent as long as the
// first job is unfinished: the second is refused with ErrConflict.
func (c *Client) Push(ctx context.Context, p *PushParams) (*Pushed, error) {
	body, err := p.encode()
	if err != nil {
		return nil, err
	}
	var out Pushed
	if _, err := c.do(ctx, &request{method: http.MethodPost, path: "/v1/jobs", body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Replace creates the job p.ID, or replaces it if it is unfinished
// (PUT /v1/jobs/{id}): the job is rescheduled with attempt 0 and no
// last_error. Pushed.Replaced says which happened. Errors: as Push, and
// ErrConflict while the job is reserved. Idempotent.
func (c *Client) Replace(ctx context.Context, p *PushParams) (*Pushed, error) {
	if p == nil || p.ID == "" {
		return nil, invalidArgument("id", "Replace needs the job's id")
	}
	body, err := p.encode()
	if err != nil {
		return nil, err
	}
	var out Pushed
	status, err := c.do(ctx, &request{method: http.MethodPut, path: "/v1/jobs/" + segment(p.ID), body: body}, &out)
	if err != nil {
		return nil, err
	}
	out.Replaced = out.Replaced || status == http.StatusOK
	return &out, nil
}

// PushResult is the outcome of one job of PushBatch: Pushed, or Err (an
// *APIError, with the existing job for a conflict).
type PushResult struct {
	// Pushed is the created job, nil when Err is set.
	Pushed *Pushed
	// Err is why this job failed; nil when it was created.
	Err error
}

// PushBatch creates up to --max-batch (1000) jobs in one request
// (POST /v1/jobs/batch). Each job succeeds or fails on its own, and the
// results are in the order of jobs. The error is for the request as a
// whole: ErrInvalidArgument (no jobs), a 413 too_large, ErrRateLimited
// (the quota refuses the batch whole), ErrUnavailable when every job
// failed on the server side (send it again). Sending a batch again is
// safe for the jobs that have ids: those created the first time conflict.
func (c *Client) PushBatch(ctx context.Context, jobs []*PushParams) ([]PushResult, error) {
	if len(jobs) == 0 {
		return nil, invalidArgument("jobs", "no jobs given")
	}
	body := []byte(`{"jobs":[`)
	for i, p := range jobs {
		b, err := p.encode()
		if err != nil {
			if ae, ok := err.(*APIError); ok {
				ae.Message = "job " + strconv.Itoa(i) + ": " + ae.Message
			}
			return nil, err
		}
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, b...)
	}
	body = append(body, "]}"...)
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	if _, err := c.do(ctx, &request{method: http.MethodPost, path: "/v1/jobs/batch", body: body}, &out); err != nil {
		return nil, err
	}
	results := make([]PushResult, len(out.Results))
	for i, raw := range out.Results {
		var eb errorBody
		if err := json.Unmarshal(raw, &eb); err == nil && eb.Error != nil {
			results[i].Err = eb.apiError(0)
			continue
		}
		var p Pushed
		if err := json.Unmarshal(raw, &p); err != nil {
			results[i].Err = err
			continue
		}
		results[i].Pushed = &p
	}
	return results, nil
}

// Get reads a job (GET /v1/jobs/{id}), its state as of now. Finished jobs
// are found for the service's retention period. Errors: ErrNotFound,
// ErrPermissionDenied, ErrUnavailable. Read only.
func (c *Client) Get(ctx context.Context, id string) (*Job, error) {
	var j Job
	if _, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/jobs/" + segment(id)}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Cancel cancels a scheduled, ready or dead job (DELETE /v1/jobs/{id}).
// Errors: ErrNotFound for an unknown or finished job (so a second cancel
// is ErrNotFound), ErrConflict while the job is reserved, ErrUnavailable.
func (c *Client) Cancel(ctx context.Context, id string) error {
	_, err := c.do(ctx, &request{method: http.MethodDelete, path: "/v1/jobs/" + segment(id)}, nil)
	return err
}

// CancelRunning cancels a job as Cancel does, and a reserved one too
// (DELETE /v1/jobs/{id}?running=true): its delivery ends, its consumer's
// ack or nack is then ErrLeaseLost, and a subscriber of the instance that
// cancelled it has its handler's context cancelled with ErrJobCancelled.
// Errors: ErrNotFound for an unknown or finished job, ErrUnavailable.
func (c *Client) CancelRunning(ctx context.Context, id string) error {
	_, err := c.do(ctx, &request{method: http.MethodDelete, path: "/v1/jobs/" + segment(id),
		query: url.Values{"running": {"true"}}}, nil)
	return err
}

// Cancelled is the answer of CancelByKey.
type Cancelled struct {
	// Cancelled are the ids of the jobs cancelled, in id order.
	Cancelled []string `json:"cancelled"`
	// Reserved are the ids of the jobs left because a consumer holds them.
	Reserved []string `json:"reserved"`
}

// CancelByKey cancels every scheduled, ready and dead job of topic with
// the business key key (DELETE /v1/topics/{topic}/jobs?key=). No job is no
// error: both lists are empty. Errors: ErrInvalidArgument (an empty key),
// ErrPermissionDenied, ErrUnavailable. Idempotent.
func (c *Client) CancelByKey(ctx context.Context, topic, key string) (*Cancelled, error) {
	var out Cancelled
	_, err := c.do(ctx, &request{method: http.MethodDelete, path: "/v1/topics/" + segment(topic) + "/jobs",
		query: url.Values{"key": {key}}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// FindByKeyParams selects a page of a topic's jobs with a business key.
type FindByKeyParams struct {
	// Topic and Key are required.
	Topic, Key string
	// After is the NextAfter of the previous page; empty: the first page.
	After string
	// Limit is the page size, 1-1000; 0: the service's default (100).
	Limit int
}

// JobPage is a page of jobs.
type JobPage struct {
	// Jobs are the page's jobs, in the listing's order (id order for
	// FindByKey).
	Jobs []*Job `json:"jobs"`
	// NextAfter is the After of the next page when there may be one (for
	// FindByKey, when this page is full); empty when there is none.
	NextAfter string `json:"next_after"`
	// Scanned is how many jobs a ListJobs search (Contains) read; 0
	// otherwise.
	Scanned int `json:"scanned,omitempty"`
}

// FindByKey lists the jobs of a topic with a business key, in every state
// (GET /v1/topics/{topic}/jobs?key=), one page at a time: pass NextAfter
// as After until it is empty. Errors: ErrInvalidArgument (no key, a bad
// limit), ErrPermissionDenied, ErrUnavailable. Read only.
func (c *Client) FindByKey(ctx context.Context, p *FindByKeyParams) (*JobPage, error) {
	q := url.Values{"key": {p.Key}}
	if p.After != "" {
		q.Set("after", p.After)
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	var out JobPage
	if _, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/topics/" + segment(p.Topic) + "/jobs", query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Requeue makes a dead job ready now with a fresh attempt count
// (POST /v1/jobs/{id}/requeue). Errors: ErrNotFound, ErrConflict when the
// job is not dead, ErrPermissionDenied (needs an admin token),
// ErrUnavailable. A second requeue is ErrConflict.
func (c *Client) Requeue(ctx context.Context, id string) error {
	_, err := c.do(ctx, &request{method: http.MethodPost, path: "/v1/jobs/" + segment(id) + "/requeue"}, nil)
	return err
}

// ListDead lists up to limit (1-1000; 0: the service's default, 100) of a
// topic's dead jobs, oldest death first (GET /v1/topics/{topic}/dead).
// Errors: ErrInvalidArgument, ErrPermissionDenied (admin), ErrUnavailable.
// Read only.
func (c *Client) ListDead(ctx context.Context, topic string, limit int) ([]*Job, error) {
	var q url.Values
	if limit != 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	var out JobPage
	if _, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/topics/" + segment(topic) + "/dead", query: q}, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}
