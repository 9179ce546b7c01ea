package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/delayq/delayq/core"
)

// DecodeObject decodes data, one JSON object, into dst strictly: unknown
// fields, wrong types and trailing data are *core.FieldError values naming
// the field, prefixed with prefix (the path of a nested object, "" at the
// top). Empty data and invalid UTF-8 are errors; callers that allow an
// empty body check first.
func DecodeObject(data []byte, prefix string, dst any) error {
	// JSON text is UTF-8, and encoding/json would turn invalid bytes of a
	// string into U+FFFD without a word: refuse them instead. Nested
	// objects are parts of a request already checked.
	if prefix == "" && !utf8.Valid(data) {
		return core.Invalid("", "request body is not valid UTF-8")
	}
	trimmed := TrimJSONSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if prefix == "" {
			return core.Invalid("", "request body must be a JSON object")
		}
		return core.Invalid(prefix, "%s must be a JSON object", prefix)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return DecodeError(prefix, err)
	}
	if len(TrimJSONSpace(data[dec.InputOffset():])) != 0 {
		return core.Invalid(prefix, "unexpected data after the JSON object")
	}
	return nil
}

// DecodeError turns an encoding/json error into a *core.FieldError.
func DecodeError(prefix string, err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return core.Invalid(prefix, "invalid JSON at byte %d: %s", se.Offset, se.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return core.Invalid(prefix, "invalid JSON: unexpected end of input")
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := joinField(prefix, te.Field)
		if field == "" {
			return core.Invalid("", "request body must be a JSON object")
		}
		return core.Invalid(field, "%s must be %s", field, jsonKind(te.Type))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, uerr := strconv.Unquote(name); uerr == nil {
			name = n
		}
		field := joinField(prefix, name)
		return core.Invalid(field, "unknown field %q", field)
	}
	if fe, ok := errors.AsType[*core.FieldError](err); ok {
		return fe
	}
	return core.Invalid(prefix, "invalid JSON: %v", err)
}

// joinField is the path of field name of the object at prefix.
func joinField(prefix, name string) string {
	switch {
	case prefix == "":
		return name
	case name == "":
		return prefix
	}
	return prefix + "." + name
}

// jsonKind names the JSON kind that a Go type decodes from, for messages.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	}
	return "a different type"
}

// JobRequest is the wire form of one job to create or replace: the body
// of POST /v1/jobs and PUT /v1/jobs/{id}, an item of a batch, and a Kafka
// intake record in JSON form.
type JobRequest struct {
	Topic       string          `json:"topic"`
	Body        json.RawMessage `json:"body"`
	Delay       json.RawMessage `json:"delay"`
	RunAt       json.RawMessage `json:"run_at"`
	ID          string          `json:"id"`
	TTR         json.RawMessage `json:"ttr"`
	MaxAttempts *int            `json:"max_attempts"`
	Key         string          `json:"key"`
	Backoff     json.RawMessage `json:"backoff"`
	Priority    int             `json:"priority"`
	URL         string          `json:"url"`
	ExpiresAt   json.RawMessage `json:"expires_at"`
	ExpiresIn   json.RawMessage `json:"expires_in"`
	Then        json.RawMessage `json:"then"`
}

// jobBackoff is the wire form of a job's backoff: its own retry
// schedule.
type jobBackoff struct {
	Delays []json.RawMessage `json:"delays"`
}

// DecodeJobBackoff decodes a job's "backoff" object into its retry
// schedule; null or absent is none.
func DecodeJobBackoff(raw json.RawMessage) ([]time.Duration, error) {
	if IsNull(raw) {
		return nil, nil
	}
	var b jobBackoff
	if err := DecodeObject(raw, "backoff", &b); err != nil {
		return nil, err
	}
	return DecodeDelays("backoff.delays", b.Delays)
}

// DecodeDelays decodes a retry schedule named field: a list of durations.
func DecodeDelays(field string, raws []json.RawMessage) ([]time.Duration, error) {
	var delays []time.Duration
	for i, raw := range raws {
		name := fmt.Sprintf("%s[%d]", field, i)
		d, set, err := ParseDuration(name, raw)
		if err != nil {
			return nil, err
		}
		if !set {
			return nil, core.Invalid(name, "%s must be a duration", name)
		}
		delays = append(delays, d)
	}
	return delays, nil
}

// DecodeJob decodes one job object (JobRequest) into the engine's push
// parameters. It checks the wire form only; the engine validates the
// values. A body of JSON null is kept as null.
func DecodeJob(data []byte) (*core.PushParams, error) {
	var req JobRequest
	if err := DecodeObject(data, "", &req); err != nil {
		return nil, err
	}
	return req.Params()
}

// Params turns a job object decoded by DecodeObject into the engine's push
// parameters. Its body is a RawMessage of a request DecodeObject checked,
// so the parameters say that it is JSON in UTF-8 (core.PushParams.BodyChecked).
func (req *JobRequest) Params() (*core.PushParams, error) { return req.paramsAt(0) }

// paramsAt is Params for a job object depth steps deep in a job's then.
func (req *JobRequest) paramsAt(depth int) (*core.PushParams, error) {
	p := &core.PushParams{
		Topic:       req.Topic,
		Body:        req.Body,
		BodyChecked: true,
		ID:          req.ID,
		Key:         req.Key,
		URL:         req.URL,
	}
	if err := core.ValidatePriority("priority", req.Priority); err != nil {
		return nil, err
	}
	p.Priority = req.Priority
	var err error
	if p.RetryDelays, err = DecodeJobBackoff(req.Backoff); err != nil {
		return nil, err
	}
	// An absent ttr or max_attempts takes the topic's; a zero one is an
	// error rather than a silent default.
	if req.MaxAttempts != nil {
		if err := core.ValidateMaxAttempts("max_attempts", *req.MaxAttempts); err != nil {
			return nil, err
		}
		p.MaxAttempts = *req.MaxAttempts
	}
	if d, ok, err := ParseDuration("delay", req.Delay); err != nil {
		return nil, err
	} else if ok {
		p.Delay = &d
	}
	if t, ok, err := ParseTime("run_at", req.RunAt); err != nil {
		return nil, err
	} else if ok {
		p.RunAt = &t
	}
	if p.Delay != nil && p.RunAt != nil {
		return nil, core.Invalid("delay", "delay and run_at are exclusive")
	}
	if d, ok, err := ParseDuration("expires_in", req.ExpiresIn); err != nil {
		return nil, err
	} else if ok {
		p.ExpiresIn = &d
	}
	if t, ok, err := ParseTime("expires_at", req.ExpiresAt); err != nil {
		return nil, err
	} else if ok {
		p.ExpiresAt = &t
	}
	ttr, ok, err := ParseDuration("ttr", req.TTR)
	if err != nil {
		return nil, err
	}
	if ok {
		if err := core.ValidateTTR("ttr", ttr); err != nil {
			return nil, err
		}
		p.TTR = ttr
	}
	if !IsNull(req.Then) {
		if p.Then, err = decodeThen(req.Then, depth+1); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// decodeThen decodes a job's then, the job object of its next step, depth
// steps deep (1 for a job's own), naming its fields then.*: a step's
// steps are decoded up to core.ThenDepthMax, for the engine to check.
func decodeThen(raw json.RawMessage, depth int) (*core.PushParams, error) {
	if depth > core.ThenDepthMax {
		return nil, core.Invalid("then", "then holds more than %d steps", core.ThenDepthMax)
	}
	var req JobRequest
	if err := DecodeObject(raw, "then", &req); err != nil {
		return nil, err
	}
	p, err := req.paramsAt(depth)
	if fe, ok := errors.AsType[*core.FieldError](err); ok {
		fe.Field = joinField("then", fe.Field)
	}
	return p, err
}
