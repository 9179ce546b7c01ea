package natstransport

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Headers of intake messages, as docs/api.md's NATS section names them.
// They are matched in any case.
const (
	// HeaderDelay is how long until the job is due: a Go duration ("500ms",
	// "15m") or an integer of milliseconds. Exclusive with HeaderRunAt.
	HeaderDelay = "Delayq-Delay"
	// HeaderRunAt is when the job is due, RFC 3339 with an optional
	// fraction. Deliveries carry it too, with milliseconds in UTC.
	HeaderRunAt = "Delayq-Run-At"
	// HeaderID is the job's id, chosen by the producer; it is also set on
	// deliveries.
	HeaderID = "Delayq-Id"
	// HeaderTTR is the job's time to run, a duration as HeaderDelay.
	HeaderTTR = "Delayq-TTR"
	// HeaderMaxAttempts is the job's attempt limit, an integer.
	HeaderMaxAttempts = "Delayq-Max-Attempts"
	// HeaderKey is the job's business key.
	HeaderKey = "Delayq-Key"
	// HeaderBackoffDelays is the job's own retry schedule: durations as
	// HeaderDelay, comma-separated ("1m,3m,5m").
	HeaderBackoffDelays = "Delayq-Backoff-Delays"
	// HeaderPriority is the job's priority, an integer from
	// core.PriorityMin (most urgent) to core.PriorityMax.
	HeaderPriority = "Delayq-Priority"
	// HeaderURL is the job's own webhook URL, for a webhook topic that
	// allows one (delivery.allow_job_url).
	HeaderURL = "Delayq-Url"
	// HeaderExpiresAt is when the job expires, as HeaderRunAt. Exclusive
	// with HeaderExpiresIn.
	HeaderExpiresAt = "Delayq-Expires-At"
	// HeaderExpiresIn is the job's expiry as a duration from its run_at,
	// as HeaderDelay.
	HeaderExpiresIn = "Delayq-Expires-In"
	// HeaderTraceParent carries the W3C trace context of the push into
	// deliveries.
	HeaderTraceParent = "traceparent"
)

// Headers of deliveries besides HeaderID and HeaderTraceParent.
const (
	// HeaderAttempt is the 1-based attempt of a delivery.
	HeaderAttempt = "Delayq-Attempt"
	// HeaderTopic is the topic of a delivered job.
	HeaderTopic = "Delayq-Topic"
)

// headerPrefix starts every delayq header; an intake message with one this
// package does not know is refused, so that a misspelt header is not
// silently ignored.
const headerPrefix = "delayq-"

// intakeHeaders are the delayq headers an intake message may carry.
var intakeHeaders = []string{HeaderDelay, HeaderRunAt, HeaderID, HeaderTTR, HeaderMaxAttempts, HeaderKey, HeaderBackoffDelays, HeaderPriority, HeaderURL,
	HeaderExpiresAt, HeaderExpiresIn}

// decodePush builds the engine's push parameters from an intake message:
// the topic from the subject after subjectPrefix, the body from the
// payload, the rest from the headers. It checks the wire form only; the
// engine validates the values. Errors are *core.FieldError values naming
// the header.
func decodePush(subjectPrefix string, m *nats.Msg) (*core.PushParams, error) {
	p := &core.PushParams{
		Topic: strings.TrimPrefix(m.Subject, subjectPrefix),
		Body:  json.RawMessage(m.Data),
	}
	h, err := headerValues(m.Header)
	if err != nil {
		return nil, err
	}
	if v, ok := h[HeaderDelay]; ok {
		d, err := wire.ParseDurationText(HeaderDelay, v)
		if err != nil {
			return nil, err
		}
		p.Delay = &d
	}
	if v, ok := h[HeaderRunAt]; ok {
		if p.Delay != nil {
			return nil, core.Invalid(HeaderDelay, "%s and %s are exclusive", HeaderDelay, HeaderRunAt)
		}
		t, err := wire.ParseTimeText(HeaderRunAt, v)
		if err != nil {
			return nil, err
		}
		p.RunAt = &t
	}
	if v, ok := h[HeaderExpiresAt]; ok {
		t, err := wire.ParseTimeText(HeaderExpiresAt, v)
		if err != nil {
			return nil, err
		}
		p.ExpiresAt = &t
	}
	if v, ok := h[HeaderExpiresIn]; ok {
		d, err := wire.ParseDurationText(HeaderExpiresIn, v)
		if err != nil {
			return nil, err
		}
		p.ExpiresIn = &d
	}
	if v, ok := h[HeaderTTR]; ok {
		d, err := wire.ParseDurationText(HeaderTTR, v)
		if err != nil {
			return nil, err
		}
		if d <= 0 {
			return nil, core.Invalid(HeaderTTR, "%s must be between %s and %s", HeaderTTR, core.TTRMin, core.TTRMax)
		}
		p.TTR = d
	}
	if v, ok := h[HeaderMaxAttempts]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > core.MaxAttemptsMax {
			return nil, core.Invalid(HeaderMaxAttempts, "%s must be an integer between 1 and %d", HeaderMaxAttempts, core.MaxAttemptsMax)
		}
		p.MaxAttempts = n
	}
	if v, ok := h[HeaderPriority]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || core.ValidatePriority(HeaderPriority, n) != nil {
			return nil, core.Invalid(HeaderPriority, "%s must be an integer from %d (most urgent) to %d", HeaderPriority, core.PriorityMin, core.PriorityMax)
		}
		p.Priority = n
	}
	if v, ok := h[HeaderID]; ok {
		if v == "" {
			return nil, core.Invalid(HeaderID, "%s must not be empty", HeaderID)
		}
		p.ID = v
	}
	p.Key = h[HeaderKey]
	if v, ok := h[HeaderURL]; ok {
		if v == "" {
			return nil, core.Invalid(HeaderURL, "%s must not be empty", HeaderURL)
		}
		p.URL = v
	}
	if v, ok := h[HeaderBackoffDelays]; ok {
		for f := range strings.SplitSeq(v, ",") {
			d, err := wire.ParseDurationText(HeaderBackoffDelays, f)
			if err != nil {
				return nil, err
			}
			p.RetryDelays = append(p.RetryDelays, d)
		}
	}
	if tp := strings.TrimSpace(headerGet(m.Header, HeaderTraceParent)); wire.ValidTraceParent(tp) {
		p.TraceParent = tp
	}
	return p, nil
}

// headerValues returns the delayq headers of an intake message by their
// canonical names. A header given twice, or an unknown delayq header, is an
// error.
func headerValues(h nats.Header) (map[string]string, error) {
	out := map[string]string{}
	for k, vs := range h {
		if len(k) < len(headerPrefix) || !strings.EqualFold(k[:len(headerPrefix)], headerPrefix) {
			continue
		}
		name := ""
		for _, known := range intakeHeaders {
			if strings.EqualFold(k, known) {
				name = known
				break
			}
		}
		if name == "" {
			return nil, core.Invalid(k, "unknown header %q; intake takes %s", truncate(k, 64), strings.Join(intakeHeaders, ", "))
		}
		if _, dup := out[name]; dup || len(vs) != 1 {
			return nil, core.Invalid(name, "%s must be given once", name)
		}
		out[name] = vs[0]
	}
	return out, nil
}

// headerGet returns the first value of a header matched in any case.
func headerGet(h nats.Header, key string) string {
	if v := h.Get(key); v != "" {
		return v
	}
	for k, vs := range h {
		if strings.EqualFold(k, key) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

// truncate cuts s to at most n bytes on a rune boundary, for messages that
// repeat client input.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// deliveryHeaders returns the headers of a delivery of job.
func deliveryHeaders(job *core.Job) nats.Header {
	h := nats.Header{}
	h.Set(HeaderID, job.ID)
	h.Set(HeaderAttempt, strconv.Itoa(job.Attempt))
	h.Set(HeaderRunAt, job.RunAt.UTC().Format(wire.TimeLayout))
	h.Set(HeaderTopic, job.Topic)
	if job.TraceParent != "" {
		h.Set(HeaderTraceParent, job.TraceParent)
	}
	return h
}

// appendPushed appends the reply to a created job: id, topic, run_at and
// state, as the HTTP API answers it.
func appendPushed(b []byte, j *core.Job) []byte {
	b = append(b, `{"id":`...)
	b = wire.AppendString(b, j.ID)
	b = append(b, `,"topic":`...)
	b = wire.AppendString(b, j.Topic)
	b = append(b, `,"run_at":`...)
	b = wire.AppendTime(b, j.RunAt)
	b = append(b, `,"state":`...)
	b = wire.AppendString(b, string(j.State))
	return append(b, '}')
}
