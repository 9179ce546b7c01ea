package wire

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/core"
)

// TrimJSONSpace trims the whitespace that JSON allows between tokens.
func TrimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// IsNull reports whether a raw JSON value is absent or null.
func IsNull(raw json.RawMessage) bool {
	raw = TrimJSONSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// ParseDuration decodes a duration field: a Go duration string ("1500ms",
// "2h") or an integer of milliseconds. ok is false when the field is absent
// or null. Errors are *core.FieldError values naming field.
func ParseDuration(field string, raw json.RawMessage) (d time.Duration, ok bool, err error) {
	if IsNull(raw) {
		return 0, false, nil
	}
	raw = TrimJSONSpace(raw)
	bad := func() error {
		return core.Invalid(field, "%s must be a duration such as \"1500ms\" or \"2h\", or an integer of milliseconds", field)
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false, bad()
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, false, bad()
		}
		return d, true, nil
	case c == '-' || c >= '0' && c <= '9':
		ms, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false, bad()
		}
		if err != nil || ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
			return 0, false, core.Invalid(field, "%s is out of range", field)
		}
		return time.Duration(ms) * time.Millisecond, true, nil
	}
	return 0, false, bad()
}

// ParseTime decodes a time field: an RFC 3339 string with an optional
// fraction, or a JSON number of Unix seconds with an optional fraction
// (1732528800.250), as older delay-queue clients send it; digits past the
// nanosecond are dropped. ok is false when the field is absent or null.
// Errors are *core.FieldError values naming field.
func ParseTime(field string, raw json.RawMessage) (t time.Time, ok bool, err error) {
	if IsNull(raw) {
		return time.Time{}, false, nil
	}
	raw = TrimJSONSpace(raw)
	if c := raw[0]; c == '-' || c >= '0' && c <= '9' {
		return parseUnixSeconds(field, string(raw))
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return time.Time{}, false, badTime(field)
	}
	t, err = time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false, badTime(field)
	}
	return t, true, nil
}

// badTime is the error of a time field that is neither form.
func badTime(field string) error {
	return core.Invalid(field, "%s must be an RFC 3339 time such as \"2026-11-21T10:00:00.250Z\" or a number of Unix seconds such as 1732528800.250", field)
}

// unixSecondsMax and unixSecondsMin bound a time in Unix seconds: the
// year 5138, far past what a job may ask for, and safe from overflow; the
// year 1, before which RFC 3339 has no form.
const (
	unixSecondsMax = 99_999_999_999
	unixSecondsMin = -62_135_596_800
)

// parseUnixSeconds reads s, a decimal number of seconds since the Unix
// epoch with an optional fraction and sign and no exponent, exactly: a
// float would turn .001 into .000999.
func parseUnixSeconds(field, s string) (time.Time, bool, error) {
	neg := strings.HasPrefix(s, "-")
	whole, frac, hasFrac := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	if !IsDigits(whole) || hasFrac && !IsDigits(frac) {
		return time.Time{}, false, badTime(field)
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || !neg && sec > unixSecondsMax || neg && -sec < unixSecondsMin {
		return time.Time{}, false, core.Invalid(field, "%s is out of range", field)
	}
	var nsec int64
	for i := range 9 {
		nsec *= 10
		if i < len(frac) {
			nsec += int64(frac[i] - '0')
		}
	}
	if neg {
		sec, nsec = -sec, -nsec
	}
	return time.Unix(sec, nsec).UTC(), true, nil
}

// IsDigits reports whether s is one or more ASCII digits.
func IsDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Request bounds every transport shares, so that a gRPC method's message
// is bounded as its HTTP route's body.
const (
	// SmallRequestBytes bounds a request without a job body: reads,
	// claims, acks, topic configuration.
	SmallRequestBytes = 256 << 10
	// EnvelopeBytes is the room a request with one job body has beyond the
	// engine's body limit, for its other fields and whitespace.
	EnvelopeBytes = 64 << 10
)

// TraceParent returns the traceparent header of h (an http.Header) when it
// is well formed (ValidTraceParent), else "".
func TraceParent(h interface{ Get(string) string }) string {
	if tp := strings.TrimSpace(h.Get("traceparent")); ValidTraceParent(tp) {
		return tp
	}
	return ""
}

// ValidTraceParent reports whether h is a W3C traceparent of a known shape:
// version-traceid-parentid-flags in lowercase hex, with later versions
// allowed to append fields. Invalid values are ignored, as the spec asks.
func ValidTraceParent(h string) bool {
	if len(h) < 55 || len(h) > 512 || (len(h) > 55 && (h[55] != '-' || h[:2] == "00")) {
		return false
	}
	for i := 0; i < 55; i++ {
		c := h[i]
		switch i {
		case 2, 35, 52:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return h[:2] != "ff" && h[3:35] != strings.Repeat("0", 32) && h[36:52] != strings.Repeat("0", 16)
}

// ParseDurationText decodes a duration given as text, such as a header
// value: a Go duration ("1500ms", "2h") or an integer of milliseconds
// ("1500"), surrounding spaces ignored. Errors are *core.FieldError values
// naming field; an empty value is one.
func ParseDurationText(field, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	raw := []byte(s)
	if !isInteger(s) {
		raw = AppendString(nil, s)
	}
	d, ok, err := ParseDuration(field, raw)
	if err == nil && !ok {
		err = core.Invalid(field, "%s must be a duration such as \"1500ms\" or \"2h\", or an integer of milliseconds", field)
	}
	return d, err
}

// ParseTimeText decodes a time given as text, such as a header value: RFC
// 3339 with an optional fraction, or Unix seconds with an optional
// fraction, surrounding spaces ignored. Errors are *core.FieldError values
// naming field; an empty value is one.
func ParseTimeText(field, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	raw := []byte(s)
	if s == "" || s[0] != '-' && (s[0] < '0' || s[0] > '9') || strings.Contains(s, ":") {
		raw = AppendString(nil, s)
	}
	t, ok, err := ParseTime(field, raw)
	if err == nil && !ok {
		err = badTime(field)
	}
	return t, err
}

// isInteger reports whether s is an optional minus sign and one or more
// ASCII digits.
func isInteger(s string) bool { return IsDigits(strings.TrimPrefix(s, "-")) }
