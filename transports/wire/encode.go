package wire

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/delayq/delayq/core"
)

// TimeLayout is RFC 3339 with milliseconds, the form in which every
// transport shows times (in UTC).
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; U+2028 and U+2029 are escaped for JavaScript.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendTime appends t as a JSON string in RFC 3339 with milliseconds, UTC.
func AppendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeLayout)
	return append(b, '"')
}

// AppendBody appends a job body as it was given; an empty body is null.
func AppendBody(b []byte, body json.RawMessage) []byte {
	if len(body) == 0 {
		return append(b, "null"...)
	}
	return append(b, body...)
}

// AppendDelivery appends a claimed job as a delivery, lease included.
func AppendDelivery(b []byte, j *core.Job) []byte {
	b = append(b, `{"id":`...)
	b = AppendString(b, j.ID)
	b = append(b, `,"topic":`...)
	b = AppendString(b, j.Topic)
	b = append(b, `,"body":`...)
	b = AppendBody(b, j.Body)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, `,"run_at":`...)
	b = AppendTime(b, j.RunAt)
	b = append(b, `,"lease":`...)
	b = AppendString(b, j.Lease)
	b = append(b, `,"lease_expires_at":`...)
	b = AppendTime(b, j.LeaseExpiresAt)
	return append(b, '}')
}

// TraceParentFor returns a W3C traceparent for a delivery of a job that
// carries none (pushed without one, and tracing off), so that every
// delivery has one as the API promises: its trace id is derived from the
// job's id, so that all attempts of the job share one trace, and its parent
// id is random for each call. It is not sampled, since no span was recorded.
func TraceParentFor(jobID string) string {
	sum := sha256.Sum256([]byte(jobID))
	var span [8]byte
	binary.BigEndian.PutUint64(span[:], rand.Uint64()|1) // never all zeros
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, sum[:16])
	b = append(b, '-')
	b = hex.AppendEncode(b, span[:])
	b = append(b, "-00"...)
	return string(b)
}

// MatchHost reports whether host matches a host pattern as the operator's
// lists give them (webhook destinations, allowed Host headers): "*"
// matches every host, "*.name" every name under name but not name itself,
// anything else only itself. Callers give both in lower case without a
// final dot.
func MatchHost(pattern, host string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(host, pattern[1:])
	}
	return host == pattern
}
