package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// State is a job state, one of StateScheduled, StateReady, StateReserved,
// StateDone, StateDead and StateCancelled, as ListJobs takes it.
type State string

// ListJobsParams selects a page of a topic's jobs in one state.
type ListJobsParams struct {
	// Topic and State are required.
	Topic string
	State State
	// After is the NextAfter of the previous page, an opaque cursor;
	// empty: the first page.
	After string
	// Limit is the page size, 1-1000; 0: the service's default (100).
	Limit int
	// Contains, when set, keeps only the jobs whose body contains it.
	Contains string
	// Scan bounds the jobs a Contains search reads, 1-100000; 0: the
	// service's default (10000).
	Scan int
}

// ListJobs lists a page of a topic's jobs in one state, each as Get shows
// it now (GET /v1/topics/{topic}/jobs?state=): scheduled and ready by
// run_at, reserved by lease expiry, dead by death, done and cancelled
// newest first (in stream order on the NATS backend). Pass NextAfter as
// After until it is empty. With Contains, the page holds the jobs whose
// body contains it among at most Scan jobs read, Scanned says how many,
// and NextAfter goes on from where the scan stopped. Errors:
// ErrInvalidArgument (a bad state, limit, cursor or scan),
// ErrPermissionDenied, ErrUnavailable. Read only.
func (c *Client) ListJobs(ctx context.Context, p *ListJobsParams) (*JobPage, error) {
	q := url.Values{"state": {string(p.State)}}
	if p.After != "" {
		q.Set("after", p.After)
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Contains != "" {
		q.Set("contains", p.Contains)
		if p.Scan != 0 {
			q.Set("scan", strconv.Itoa(p.Scan))
		}
	}
	var out JobPage
	if _, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/topics/" + segment(p.Topic) + "/jobs", query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
