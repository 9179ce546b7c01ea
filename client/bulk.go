package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// JobFilter chooses the jobs of a topic for RequeueDead and CancelJobs; a
// zero field does not filter.
type JobFilter struct {
	// ErrorContains keeps the jobs whose last error contains it.
	ErrorContains string `json:"error_contains,omitempty"`
	// Key keeps the jobs with this business key.
	Key string `json:"key,omitempty"`
	// Since and Until keep the jobs whose time is in [Since, Until): the
	// time of death for RequeueDead, run_at for CancelJobs.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// State keeps the jobs in StateScheduled or StateReady (CancelJobs
	// only); empty keeps both.
	State State `json:"state,omitempty"`
	// Limit bounds the jobs matched; 0: no bound.
	Limit int `json:"limit,omitempty"`
	// DryRun counts the jobs matched and changes none.
	DryRun bool `json:"dry_run,omitempty"`
	// After is the NextAfter of an earlier answer to the same call.
	After string `json:"after,omitempty"`
}

// BulkResult is the answer of RequeueDead and CancelJobs.
type BulkResult struct {
	// Count is how many jobs were changed, or would be in a dry run.
	Count int `json:"count"`
	// DryRun says that nothing was changed.
	DryRun bool `json:"dry_run"`
	// Sample is the first jobs matched, at most 10, as they were found.
	Sample []*Job `json:"sample"`
	// NextAfter is set when the service stopped before the end of the
	// topic's jobs (it bounds the time of a request): the same call with
	// After set to it goes on.
	NextAfter string `json:"next_after,omitempty"`
}

// RequeueDead requeues the dead jobs of topic that f matches (nil: every
// one), as Requeue does each (POST /v1/topics/{topic}/dead/requeue).
// Errors: ErrInvalidArgument (a bad filter), ErrPermissionDenied,
// ErrNotFound (a topic with neither jobs nor configuration),
// ErrUnavailable.
func (c *Client) RequeueDead(ctx context.Context, topic string, f *JobFilter) (*BulkResult, error) {
	return c.bulk(ctx, "/v1/topics/"+segment(topic)+"/dead/requeue", f)
}

// CancelJobs cancels the scheduled and ready jobs of topic that f matches
// (nil: every one), as Cancel does each; reserved jobs are left
// (POST /v1/topics/{topic}/jobs/cancel). Errors as RequeueDead.
func (c *Client) CancelJobs(ctx context.Context, topic string, f *JobFilter) (*BulkResult, error) {
	return c.bulk(ctx, "/v1/topics/"+segment(topic)+"/jobs/cancel", f)
}

// bulk posts f to the bulk route path.
func (c *Client) bulk(ctx context.Context, path string, f *JobFilter) (*BulkResult, error) {
	if f == nil {
		f = &JobFilter{}
	}
	body, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	var out BulkResult
	if _, err := c.do(ctx, &request{method: http.MethodPost, path: path, body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
