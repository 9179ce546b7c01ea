package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Delivery is a job handed to a consumer: by Claim, or to a Subscriber's
// handler. Its Lease settles exactly this delivery.
type Delivery struct {
	// ID is the job's id.
	ID string `json:"id"`
	// Topic is the job's topic.
	Topic string `json:"topic"`
	// Body is the job's body, byte for byte as pushed.
	Body json.RawMessage `json:"body"`
	// Attempt is this delivery's 1-based attempt.
	Attempt int `json:"attempt"`
	// RunAt is when the job was due.
	RunAt time.Time `json:"run_at"`
	// Lease is the token that acks, nacks or touches this delivery.
	Lease string `json:"lease"`
	// LeaseExpiresAt is when the lease ends unless touched, as the service
	// said when it handed out the delivery (or last touched it).
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// ClaimParams bounds a claim.
type ClaimParams struct {
	// Max is the most jobs to take, 1-1000; 0: 1.
	Max int
	// Wait is how long to wait for the first due job, up to 60s; 0: answer
	// at once.
	Wait time.Duration
}

// Claim takes up to p.Max due jobs of a topic, most urgent first, each
// reserved for its ttr (POST /v1/topics/{topic}/claim). It returns no
// deliveries, and no error, when none came within p.Wait. A nil p claims
// one job without waiting. Errors: ErrInvalidArgument, ErrPermissionDenied,
// ErrUnavailable. Not idempotent: each claim takes other jobs.
func (c *Client) Claim(ctx context.Context, topic string, p *ClaimParams) ([]*Delivery, error) {
	req := &request{method: http.MethodPost, path: "/v1/topics/" + segment(topic) + "/claim"}
	if p != nil && (p.Max != 0 || p.Wait != 0) {
		body := struct {
			Max  int    `json:"max,omitempty"`
			Wait string `json:"wait,omitempty"`
		}{Max: p.Max}
		if p.Wait != 0 {
			body.Wait = durationString(p.Wait)
		}
		req.body = jsonBody(&body)
	}
	var out struct {
		Jobs []*Delivery `json:"jobs"`
	}
	if _, err := c.do(ctx, req, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// Ack settles a delivery as done (POST /v1/jobs/{id}/ack). Errors:
// ErrLeaseLost (and ErrConflict) when the lease expired or the delivery
// was settled already, ErrNotFound, ErrUnavailable. A second ack of the
// same delivery is ErrLeaseLost, so a retried ack that fails so may have
// succeeded the first time.
func (c *Client) Ack(ctx context.Context, id, lease string) error {
	_, err := c.do(ctx, &request{method: http.MethodPost, path: "/v1/jobs/" + segment(id) + "/ack",
		body: jsonBody(map[string]string{"lease": lease}), lease: true}, nil)
	return err
}

// NackParams says how a failed delivery is retried.
type NackParams struct {
	// Delay is how long to wait before the retry (0 to 366 days; a pointer
	// to 0 retries at once). Nil: the topic's (or job's) backoff decides.
	Delay *time.Duration
	// Error is recorded as the job's last_error (cut to 2048 bytes).
	Error string
}

// nackWire is a nack on the wire, with its id for the batched form.
type nackWire struct {
	ID    string `json:"id,omitempty"`
	Lease string `json:"lease"`
	Delay string `json:"delay,omitempty"`
	Error string `json:"error,omitempty"`
}

// wire returns p as the service reads it.
func (p *NackParams) wire(id, lease string) nackWire {
	w := nackWire{ID: id, Lease: lease}
	if p != nil {
		if p.Delay != nil {
			w.Delay = durationString(*p.Delay)
		}
		w.Error = p.Error
	}
	return w
}

// Nack settles a delivery as failed (POST /v1/jobs/{id}/nack): the job is
// retried after the delay, or goes dead when that was its last attempt. A
// nil p takes the backoff and records no error. Errors: ErrLeaseLost (and
// ErrConflict), ErrNotFound, ErrInvalidArgument, ErrUnavailable. A second
// nack of the same delivery is ErrLeaseLost.
func (c *Client) Nack(ctx context.Context, id, lease string, p *NackParams) error {
	_, err := c.do(ctx, &request{method: http.MethodPost, path: "/v1/jobs/" + segment(id) + "/nack",
		body: jsonBody(p.wire("", lease)), lease: true}, nil)
	return err
}

// Touch extends a delivery's lease to its ttr from now and returns when it
// now expires (POST /v1/jobs/{id}/touch); the lease token stays. Errors:
// ErrLeaseLost (and ErrConflict), ErrNotFound, ErrUnavailable. Idempotent.
func (c *Client) Touch(ctx context.Context, id, lease string) (time.Time, error) {
	var out struct {
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
	}
	_, err := c.do(ctx, &request{method: http.MethodPost, path: "/v1/jobs/" + segment(id) + "/touch",
		body: jsonBody(map[string]string{"lease": lease}), lease: true}, &out)
	return out.LeaseExpiresAt, err
}

// AckItem is one delivery to acknowledge with AckBatch.
type AckItem struct {
	// ID and Lease are the delivery's.
	ID, Lease string
}

// NackItem is one delivery to nack with NackBatch.
type NackItem struct {
	// ID and Lease are the delivery's.
	ID, Lease string
	// NackParams says how it is retried.
	NackParams
}

// ItemResult is the outcome of one item of AckBatch or NackBatch.
type ItemResult struct {
	// ID is the item's job id.
	ID string
	// Err is nil when the item was settled, else an *APIError matching
	// ErrLeaseLost (a lost lease, or the same id twice), ErrNotFound,
	// ErrInvalidArgument or ErrPermissionDenied.
	Err error
}

// AckBatch acknowledges up to --max-batch (1000) deliveries in one request
// (POST /v1/acks), written together. Each item succeeds or fails on its
// own; the results are in the order of items. The error is for the
// request as a whole: ErrInvalidArgument (no items), a 413 too_large, or
// ErrUnavailable when every item failed on the server side (send it again:
// the acks applied before are then answered ErrLeaseLost).
func (c *Client) AckBatch(ctx context.Context, items []AckItem) ([]ItemResult, error) {
	if len(items) == 0 {
		return nil, invalidArgument("acks", "no acks given")
	}
	type ackWire struct {
		ID    string `json:"id"`
		Lease string `json:"lease"`
	}
	acks := make([]ackWire, len(items))
	for i, it := range items {
		acks[i] = ackWire(it)
	}
	return c.settleBatch(ctx, "/v1/acks", jsonBody(map[string]any{"acks": acks}))
}

// NackBatch nacks up to --max-batch (1000) deliveries in one request
// (POST /v1/nacks), each applied on its own, in order. Results and errors
// are those of AckBatch.
func (c *Client) NackBatch(ctx context.Context, items []NackItem) ([]ItemResult, error) {
	if len(items) == 0 {
		return nil, invalidArgument("nacks", "no nacks given")
	}
	nacks := make([]nackWire, len(items))
	for i, it := range items {
		nacks[i] = it.NackParams.wire(it.ID, it.Lease)
		nacks[i].ID = it.ID
	}
	return c.settleBatch(ctx, "/v1/nacks", jsonBody(map[string]any{"nacks": nacks}))
}

// settleBatch posts a batch of acks or nacks and reads its results.
func (c *Client) settleBatch(ctx context.Context, path string, body []byte) ([]ItemResult, error) {
	var out struct {
		Results []struct {
			ID string `json:"id"`
			errorBody
		} `json:"results"`
	}
	if _, err := c.do(ctx, &request{method: http.MethodPost, path: path, body: body, lease: true}, &out); err != nil {
		return nil, err
	}
	results := make([]ItemResult, len(out.Results))
	for i, r := range out.Results {
		results[i].ID = r.ID
		if ae := r.apiError(0); ae != nil {
			ae.ID = r.ID
			ae.lease = true
			results[i].Err = ae
		}
	}
	return results, nil
}
