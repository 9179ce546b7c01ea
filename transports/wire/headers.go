package wire

import (
	"iter"
	"strconv"
	"strings"

	"github.com/delayq/delayq/core"
)

// Headers of a push taken from a message queue (NATS and Kafka intake), as
// docs/api.md names them. They are matched in any case.
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

// headerPrefix starts every delayq header; an intake message with one
// DecodePushHeaders does not know is refused, so that a misspelt header is
// not silently ignored.
const headerPrefix = "delayq-"

// PushHeaderNames are the delayq headers of a push, those DecodePushHeaders
// reads.
var PushHeaderNames = []string{HeaderDelay, HeaderRunAt, HeaderID, HeaderTTR, HeaderMaxAttempts, HeaderKey, HeaderBackoffDelays, HeaderPriority, HeaderURL,
	HeaderExpiresAt, HeaderExpiresIn}

// IsDelayqHeader reports whether header name k starts with "Delayq-", in
// any case.
func IsDelayqHeader(k string) bool {
	return len(k) >= len(headerPrefix) && strings.EqualFold(k[:len(headerPrefix)], headerPrefix)
}

// Headers are a message's headers as its transport holds them: each name as
// sent with its values. A transport whose headers are a list of pairs
// yields each pair as a name with one value; a name yielded twice counts as
// given twice.
type Headers = iter.Seq2[string, []string]

// DecodePushHeaders fills p's fields but Topic and Body from the delayq
// headers of an intake message and returns the values of the headers named
// in extra (the transport's own, such as Kafka's topic header) by those
// names. Any other header that starts with "Delayq-" is refused. It checks
// the wire form only; the engine validates the values. Errors are
// *core.FieldError values naming the header.
func DecodePushHeaders(p *core.PushParams, hs Headers, extra ...string) (map[string]string, error) {
	h, tp, err := headerValues(hs, extra)
	if err != nil {
		return nil, err
	}
	if v, ok := h[HeaderDelay]; ok {
		d, err := ParseDurationText(HeaderDelay, v)
		if err != nil {
			return nil, err
		}
		p.Delay = &d
	}
	if v, ok := h[HeaderRunAt]; ok {
		if p.Delay != nil {
			return nil, core.Invalid(HeaderDelay, "%s and %s are exclusive", HeaderDelay, HeaderRunAt)
		}
		t, err := ParseTimeText(HeaderRunAt, v)
		if err != nil {
			return nil, err
		}
		p.RunAt = &t
	}
	if v, ok := h[HeaderExpiresAt]; ok {
		t, err := ParseTimeText(HeaderExpiresAt, v)
		if err != nil {
			return nil, err
		}
		p.ExpiresAt = &t
	}
	if v, ok := h[HeaderExpiresIn]; ok {
		d, err := ParseDurationText(HeaderExpiresIn, v)
		if err != nil {
			return nil, err
		}
		p.ExpiresIn = &d
	}
	if v, ok := h[HeaderTTR]; ok {
		d, err := ParseDurationText(HeaderTTR, v)
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
			d, err := ParseDurationText(HeaderBackoffDelays, f)
			if err != nil {
				return nil, err
			}
			p.RetryDelays = append(p.RetryDelays, d)
		}
	}
	if ValidTraceParent(tp) {
		p.TraceParent = tp
	}
	var out map[string]string
	for _, name := range extra {
		if v, ok := h[name]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = v
		}
	}
	return out, nil
}

// headerValues returns the delayq headers of an intake message by their
// canonical names (PushHeaderNames and extra), and its trace parent: the
// first non-empty value of a traceparent header in any case. A delayq
// header given twice, or an unknown one, is an error.
func headerValues(hs Headers, extra []string) (map[string]string, string, error) {
	out := map[string]string{}
	tp := ""
	for k, vs := range hs {
		if strings.EqualFold(k, HeaderTraceParent) {
			for _, v := range vs {
				if tp == "" {
					tp = strings.TrimSpace(v)
				}
			}
			continue
		}
		if !IsDelayqHeader(k) {
			continue
		}
		name := knownHeader(k, PushHeaderNames)
		if name == "" {
			name = knownHeader(k, extra)
		}
		if name == "" {
			return nil, "", core.Invalid(k, "unknown header %q; intake takes %s", Truncate(k, 64), strings.Join(append(PushHeaderNames[:len(PushHeaderNames):len(PushHeaderNames)], extra...), ", "))
		}
		if _, dup := out[name]; dup || len(vs) != 1 {
			return nil, "", core.Invalid(name, "%s must be given once", name)
		}
		out[name] = vs[0]
	}
	return out, tp, nil
}

// knownHeader returns the name of names that k is, in any case, or "".
func knownHeader(k string, names []string) string {
	for _, known := range names {
		if strings.EqualFold(k, known) {
			return known
		}
	}
	return ""
}

// Truncate cuts s to at most n bytes on a rune boundary, for messages that
// repeat client input.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
