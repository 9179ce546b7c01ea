package httptransport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// readBody reads the whole request body of a JSON route, at most limit
// bytes. A larger body is a *core.FieldError wrapping core.ErrTooLarge; a
// body that is not declared application/json (any parameters) is an error
// wrapping wire.ErrUnsupportedMediaType, but a body declared empty may come
// without a Content-Type. The buffer grows with what arrives, never to the declared
// Content-Length up front, so that a client cannot reserve memory by
// announcing a large body. Once the body is read, the read deadline that
// ServeHTTP set for it is lifted. The returned release gives the buffer back
// for reuse; the data must not be used after it.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) (data []byte, release func(), err error) {
	return readBodyOf(w, r, limit, jsonType)
}

// readBodyOf is readBody for a body of one of the media types types (the
// first is the one an error names).
func readBodyOf(w http.ResponseWriter, r *http.Request, limit int64, types ...string) (data []byte, release func(), err error) {
	if err := checkMediaType(r, types...); err != nil {
		return nil, func() {}, err
	}
	if r.ContentLength > limit {
		return nil, func() {}, tooLargeBody(limit)
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	release = func() {
		if buf.Cap() <= maxPooledBuffer {
			bufPool.Put(buf)
		}
	}
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		release()
		return nil, func() {}, bodyReadError(err, limit)
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return buf.Bytes(), release, nil
}

// bodyReadError describes an error of reading a request body.
func bodyReadError(err error, limit int64) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return tooLargeBody(limit)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return core.Invalid("", "the request body did not arrive within the body read timeout")
	}
	return core.Invalid("", "reading the request body failed: %v", err)
}

func tooLargeBody(limit int64) error {
	return core.TooLarge("", "request body is larger than the limit of %d bytes", limit)
}

// Media types of request bodies.
const (
	jsonType       = "application/json"
	ndjsonType     = "application/x-ndjson"
	mergePatchType = "application/merge-patch+json" // RFC 7386
)

// checkMediaType returns an error wrapping wire.ErrUnsupportedMediaType
// unless the request's Content-Type is one of want, with any parameters, or is
// absent with a body declared empty (Content-Length 0 or none, as curl
// -XPOST sends). A form or text/plain body, which a browser sends to any
// site without asking first, is so never read.
func checkMediaType(r *http.Request, want ...string) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength != 0 {
			return unsupportedMediaType(r, want[0])
		}
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && slices.Contains(want, mt) {
		return nil
	}
	return unsupportedMediaType(r, want[0])
}

// unsupportedMediaType tells curl users how to send the body.
func unsupportedMediaType(r *http.Request, want string) error {
	got := "no Content-Type"
	if ct := r.Header.Get("Content-Type"); ct != "" {
		got = fmt.Sprintf("Content-Type %q", ct)
	}
	hint := "with curl, add -H 'Content-Type: application/json' (curl -d alone sends a form) or use curl --json"
	if want == ndjsonType {
		hint = "with curl, add -H 'Content-Type: application/x-ndjson' --data-binary @jobs.ndjson"
	}
	return wire.WithMessage(fmt.Sprintf("the request body must be sent as %s, not with %s: %s", want, got, hint), wire.ErrUnsupportedMediaType)
}

// bufPool holds request buffers; maxPooledBuffer keeps the pool from
// holding on to the buffers of large batches.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuffer = 256 << 10

// trimJSONSpace trims the whitespace that JSON allows between tokens.
func trimJSONSpace(b []byte) []byte { return wire.TrimJSONSpace(b) }

// isNull reports whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool { return wire.IsNull(raw) }

// parseDuration decodes a duration field as wire.ParseDuration does.
func parseDuration(field string, raw json.RawMessage) (time.Duration, bool, error) {
	return wire.ParseDuration(field, raw)
}

// parseTime decodes a time field as wire.ParseTime does.
func parseTime(field string, raw json.RawMessage) (time.Time, bool, error) {
	return wire.ParseTime(field, raw)
}

// batchRequest is the wire form of POST /v1/jobs/batch; each job is decoded
// on its own so that one bad job fails alone.
type batchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// wellFormedBatch is the wire form of a batch whose every job is a
// well-formed job object, decoded in one pass.
type wellFormedBatch struct {
	Jobs []*wire.JobRequest `json:"jobs"`
}

// decodeBatch decodes the jobs of a batch request. Most batches are well
// formed, and one pass over them costs half of decoding each job on its
// own (JSON decoding was 40% of the CPU of batch intake); any error sends
// the batch down the slow path, which tells each job's error apart. So
// exactly one of jobs and raw is set.
func decodeBatch(data []byte) (jobs []*wire.JobRequest, raw []json.RawMessage, err error) {
	var fast wellFormedBatch
	if wire.DecodeObject(data, "", &fast) == nil && !slices.Contains(fast.Jobs, nil) && fast.Jobs != nil {
		return fast.Jobs, nil, nil
	}
	var req batchRequest
	if err := wire.DecodeObject(data, "", &req); err != nil {
		return nil, nil, err
	}
	if req.Jobs == nil {
		req.Jobs = []json.RawMessage{}
	}
	return nil, req.Jobs, nil
}

// claimRequest is the wire form of a claim.
type claimRequest struct {
	Max  *int            `json:"max"`
	Wait json.RawMessage `json:"wait"`
}

// leaseRequest is the wire form of ack and touch.
type leaseRequest struct {
	Lease string `json:"lease"`
}

// nackRequest is the wire form of nack.
type nackRequest struct {
	Lease string          `json:"lease"`
	Delay json.RawMessage `json:"delay"`
	Error string          `json:"error"`
}

// topicRequest is the wire form of PUT /v1/topics/{topic}. Nested objects
// are decoded on their own so that errors name their full path.
// The request types' omitempty is for topicRequestJSON, which writes a
// stored configuration in this form (decoding ignores it).
type topicRequest struct {
	// Name may repeat the topic of the path, so that a GET answer can be
	// sent back.
	Name        string          `json:"name,omitempty"`
	Delivery    json.RawMessage `json:"delivery,omitempty"`
	TTR         json.RawMessage `json:"ttr,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	Backoff     json.RawMessage `json:"backoff,omitempty"`
	Concurrency int             `json:"concurrency,omitempty"`
	UniqueKeys  string          `json:"unique_keys,omitempty"`
	OnDead      string          `json:"on_dead,omitempty"`
	Events      *eventsView     `json:"events,omitempty"`
	Rate        json.RawMessage `json:"rate,omitempty"`
	MaxInFlight int             `json:"max_in_flight,omitempty"`
	// KeyConcurrency is core.Topic.KeyConcurrency.
	KeyConcurrency int `json:"key_concurrency,omitempty"`
	// Fair is core.Topic.Fair.
	Fair      bool            `json:"fair,omitempty"`
	ExpiresIn json.RawMessage `json:"expires_in,omitempty"`
	Delay     json.RawMessage `json:"delay,omitempty"`
	Retention json.RawMessage `json:"retention,omitempty"`
}

type rateRequest struct {
	Limit  int             `json:"limit,omitempty"`
	Period json.RawMessage `json:"period,omitempty"`
	Burst  int             `json:"burst,omitempty"`
	PerKey bool            `json:"per_key,omitempty"`
}

type deliveryRequest struct {
	Type    string          `json:"type,omitempty"`
	URL     string          `json:"url,omitempty"`
	Timeout json.RawMessage `json:"timeout,omitempty"`
	Secret  string          `json:"secret,omitempty"`
	// PreviousSecret is the secret being rotated out; see
	// core.Delivery.PreviousSecret.
	PreviousSecret string            `json:"previous_secret,omitempty"`
	Subject        string            `json:"subject,omitempty"`
	KafkaTopic     string            `json:"kafka_topic,omitempty"`
	Success        string            `json:"success,omitempty"`
	Method         string            `json:"method,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	// ErrorBody is a pointer so that a JSON null leaves it unset, like the
	// other fields.
	ErrorBody *bool `json:"error_body,omitempty"`
	// AllowJobURL lets jobs carry their own url; a pointer as ErrorBody.
	AllowJobURL *bool `json:"allow_job_url,omitempty"`
}

type backoffRequest struct {
	Initial json.RawMessage `json:"initial,omitempty"`
	Max     json.RawMessage `json:"max,omitempty"`
	Factor  float64         `json:"factor,omitempty"`
	// Jitter is a pointer so that an explicit 0 (no jitter) differs from
	// an absent one (the default).
	Jitter *float64          `json:"jitter,omitempty"`
	Delays []json.RawMessage `json:"delays,omitempty"`
}

// DecodeTopic decodes data, a topic configuration in the JSON form of the
// body of PUT /v1/topics/{topic}, for the topic called name, as the HTTP API
// does: unknown fields and wrong types are errors, durations are Go duration
// strings or integers of milliseconds, and a "name" field must equal name.
// It checks the shape only; Engine.PutTopic validates the values. Errors are
// *core.FieldError values naming the field.
func DecodeTopic(name string, data []byte) (*core.Topic, error) {
	return decodeTopicRequest(name, data)
}

// decodeTopicRequest decodes a topic configuration for the topic name of
// the path. The engine validates the values.
func decodeTopicRequest(name string, data []byte) (*core.Topic, error) {
	var req topicRequest
	if err := wire.DecodeObject(data, "", &req); err != nil {
		return nil, err
	}
	if req.Name != "" && req.Name != name {
		return nil, core.Invalid("name", "name %q does not match the topic of the path %q", req.Name, name)
	}
	t := &core.Topic{Name: name, MaxAttempts: req.MaxAttempts, Concurrency: req.Concurrency,
		UniqueKeys: req.UniqueKeys, OnDead: req.OnDead, MaxInFlight: req.MaxInFlight, KeyConcurrency: req.KeyConcurrency, Fair: req.Fair}
	if req.Events != nil {
		t.Events = core.Events{Topic: req.Events.Topic, On: req.Events.On}
	}
	var err error
	if t.TTR, _, err = parseDuration("ttr", req.TTR); err != nil {
		return nil, err
	}
	if t.ExpiresIn, _, err = parseDuration("expires_in", req.ExpiresIn); err != nil {
		return nil, err
	}
	if t.Delay, _, err = parseDuration("delay", req.Delay); err != nil {
		return nil, err
	}
	if t.Retention, _, err = parseDuration("retention", req.Retention); err != nil {
		return nil, err
	}
	if !isNull(req.Delivery) {
		var d deliveryRequest
		if err := wire.DecodeObject(req.Delivery, "delivery", &d); err != nil {
			return nil, err
		}
		t.Delivery = core.Delivery{Type: d.Type, URL: d.URL, Secret: d.Secret, PreviousSecret: d.PreviousSecret, Subject: d.Subject, Success: d.Success,
			KafkaTopic: d.KafkaTopic, Method: d.Method, Headers: d.Headers, ErrorBody: d.ErrorBody != nil && *d.ErrorBody,
			AllowJobURL: d.AllowJobURL != nil && *d.AllowJobURL}
		if t.Delivery.Timeout, _, err = parseDuration("delivery.timeout", d.Timeout); err != nil {
			return nil, err
		}
	}
	if !isNull(req.Rate) {
		var r rateRequest
		if err := wire.DecodeObject(req.Rate, "rate", &r); err != nil {
			return nil, err
		}
		t.Rate.Limit, t.Rate.Burst, t.Rate.PerKey = r.Limit, r.Burst, r.PerKey
		if t.Rate.Period, _, err = parseDuration("rate.period", r.Period); err != nil {
			return nil, err
		}
	}
	if !isNull(req.Backoff) {
		var b backoffRequest
		if err := wire.DecodeObject(req.Backoff, "backoff", &b); err != nil {
			return nil, err
		}
		t.Backoff.Factor = b.Factor
		var given bool
		if t.Backoff.Initial, given, err = parseDuration("backoff.initial", b.Initial); err != nil {
			return nil, err
		}
		t.Backoff.Zeros = zeroGiven(t.Backoff.Zeros, "initial", given && t.Backoff.Initial == 0)
		if t.Backoff.Max, given, err = parseDuration("backoff.max", b.Max); err != nil {
			return nil, err
		}
		t.Backoff.Zeros = zeroGiven(t.Backoff.Zeros, "max", given && t.Backoff.Max == 0)
		if b.Jitter != nil {
			t.Backoff.Jitter = *b.Jitter
		}
		t.Backoff.Zeros = zeroGiven(t.Backoff.Zeros, "jitter", b.Jitter != nil && *b.Jitter == 0)
		if t.Backoff.Delays, err = wire.DecodeDelays("backoff.delays", b.Delays); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// zeroGiven adds field to zeros (core.Backoff.Zeros) when it was given as
// 0 on purpose.
func zeroGiven(zeros []string, field string, given bool) []string {
	if given {
		return append(zeros, field)
	}
	return zeros
}

// see wire.ValidTraceParent.
