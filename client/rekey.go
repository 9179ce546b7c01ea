package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// RekeyParams are the arguments of Rekey.
type RekeyParams struct {
	// After goes on with a pass: the NextAfter of the previous page; empty
	// starts one.
	After string `json:"after,omitempty"`
	// Limit bounds the jobs the page reads; 0 is the service's default.
	Limit int `json:"limit,omitempty"`
}

// RekeyPage is what a page of Rekey did.
type RekeyPage struct {
	// Scanned counts the jobs read.
	Scanned int `json:"scanned"`
	// Rekeyed counts the jobs sealed again with the current key.
	Rekeyed int `json:"rekeyed"`
	// Changed counts the jobs and records that changed meanwhile: already
	// sealed with it by a put, or gone.
	Changed int `json:"changed"`
	// Records counts the topic configurations and schedules sealed again.
	Records int `json:"records"`
	// NextAfter goes on with the pass; empty once it is over.
	NextAfter string `json:"next_after"`
}

// Rekey runs a page of re-encryption of the service's stored data with
// its current key (POST /v1/rekey), for an admin token not restricted to
// topics. Errors: ErrPermissionDenied, a 501 unimplemented when encryption
// at rest is off or the backend cannot rewrite a job's body,
// ErrUnavailable.
func (c *Client) Rekey(ctx context.Context, p *RekeyParams) (*RekeyPage, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var page RekeyPage
	if _, err := c.do(ctx, &request{method: http.MethodPost, path: "/v1/rekey", body: body}, &page); err != nil {
		return nil, err
	}
	return &page, nil
}
