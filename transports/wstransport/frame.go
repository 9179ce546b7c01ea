package wstransport

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Types of client frames, as docs/api.md names them. The server's frames (job,
// error, touched) are written by the append functions below.
const (
	frameAck   = "ack"
	frameNack  = "nack"
	frameTouch = "touch"
)

// frame is a client frame, decoded and checked.
type frame struct {
	Type  string
	ID    string
	Lease string
	// Delay of a nack; nil takes the topic's backoff.
	Delay *time.Duration
	// Error of a nack: why the attempt failed.
	Error string
}

// frameWire is the wire form of a client frame.
type frameWire struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Lease string          `json:"lease"`
	Delay json.RawMessage `json:"delay"`
	Error string          `json:"error"`
}

// decodeFrame decodes one client frame strictly: one JSON object of a known
// type with the fields that type takes and no others. On error it returns
// the frame's id, when it could be read, so that the error frame names it;
// errors are *core.FieldError values.
func decodeFrame(data []byte) (frame, error) {
	trimmed := wire.TrimJSONSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return frame{}, core.Invalid("", "a frame must be a JSON object such as {\"type\":\"ack\",\"id\":\"...\",\"lease\":\"...\"}")
	}
	w, err := decodeWire(trimmed)
	if err != nil {
		return frame{ID: w.ID}, err
	}
	f := frame{Type: w.Type, ID: w.ID, Lease: w.Lease, Error: w.Error}
	switch w.Type {
	case frameAck, frameTouch:
		if !wire.IsNull(w.Delay) {
			return f, core.Invalid("delay", "delay is only for nack frames")
		}
		if w.Error != "" {
			return f, core.Invalid("error", "error is only for nack frames")
		}
	case frameNack:
		d, ok, err := wire.ParseDuration("delay", w.Delay)
		if err != nil {
			return f, err
		}
		if ok {
			f.Delay = &d
		}
	case "":
		return f, core.Invalid("type", "type is required: ack, nack or touch")
	default:
		return f, core.Invalid("type", "type must be ack, nack or touch, not %q", truncate(w.Type, 64))
	}
	if f.ID == "" {
		return f, core.Invalid("id", "id is required")
	}
	if f.Lease == "" {
		return f, core.Invalid("lease", "lease is required")
	}
	return f, nil
}

// decodeWire decodes a frame's JSON object strictly: no field but
// frameWire's, nothing after it. A frame whose keys are all frameWire's, as
// written, goes through json.Unmarshal; any other (a key unknown, escaped
// or in other case, a syntax error, trailing data) through a json.Decoder
// that refuses unknown fields, which decides and whose errors name the
// fault. The Decoder's own buffer was a fifth of what a delivery allocated
// at 10 000 jobs/s. On error the id is returned when it could be read.
func decodeWire(obj []byte) (frameWire, error) {
	var w frameWire
	if json.Unmarshal(obj, &w) == nil && frameKeysOnly(obj) {
		return w, nil
	}
	w = frameWire{}
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return w, decodeError(err)
	}
	if len(wire.TrimJSONSpace(obj[dec.InputOffset():])) != 0 {
		return w, core.Invalid("", "unexpected data after the JSON object")
	}
	return w, nil
}

// frameKeysOnly reports whether every top-level key of obj, a valid JSON
// object, is a key of frameWire written exactly so.
func frameKeysOnly(obj []byte) bool {
	depth := 0
	for i := 0; i < len(obj); i++ {
		switch obj[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			start := i + 1
			for i++; obj[i] != '"'; i++ {
				if obj[i] == '\\' {
					i++ // an escaped key matches none of the names below
				}
			}
			if depth != 1 || !followedByColon(obj[i+1:]) {
				continue // a value
			}
			switch string(obj[start:i]) {
			case "type", "id", "lease", "delay", "error":
			default:
				return false
			}
		}
	}
	return true
}

// followedByColon reports whether b, after spaces, starts with ':'.
func followedByColon(b []byte) bool {
	b = wire.TrimJSONSpace(b)
	return len(b) > 0 && b[0] == ':'
}

// decodeError turns an encoding/json error into a *core.FieldError.
func decodeError(err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return core.Invalid("", "invalid JSON at byte %d: %s", se.Offset, se.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return core.Invalid("", "invalid JSON: unexpected end of input")
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		if te.Field == "delay" {
			return core.Invalid("delay", "delay must be a duration such as \"1500ms\" or \"2h\", or an integer of milliseconds")
		}
		return core.Invalid(te.Field, "%s must be a string", te.Field)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, uerr := strconv.Unquote(name); uerr == nil {
			name = n
		}
		return core.Invalid(name, "unknown field %q", truncate(name, 64))
	}
	return core.Invalid("", "a frame must be a JSON object such as {\"type\":\"ack\",\"id\":\"...\",\"lease\":\"...\"}")
}

// truncate cuts s to at most n bytes on a rune boundary, for messages that
// repeat client input.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// jobFrameSize is a capacity that holds j's job frame in most cases, so
// that building it does not grow the buffer again and again.
func jobFrameSize(j *core.Job) int {
	return 448 + len(j.Body) + len(j.Key) + len(j.LastError) + len(j.TraceParent)
}

// appendJobFrame appends the frame of one delivery: {"type":"job", ...} with
// the fields of a pull delivery and the body byte for byte.
func appendJobFrame(b []byte, j *core.Job) []byte {
	start := len(b)
	b = wire.AppendDelivery(b, j)
	return slices.Insert(b, start+1, []byte(`"type":"job",`)...)
}

// appendErrorFrame appends an error frame: code, message, and the field and
// the id of the frame it answers when known.
func appendErrorFrame(b []byte, e wire.Error, id string) []byte {
	b = append(b, `{"type":"error","code":`...)
	b = wire.AppendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = wire.AppendString(b, e.Message)
	if e.Field != "" {
		b = append(b, `,"field":`...)
		b = wire.AppendString(b, e.Field)
	}
	if id != "" {
		b = append(b, `,"id":`...)
		b = wire.AppendString(b, id)
	}
	return append(b, '}')
}

// appendCancelledFrame appends the frame that tells a subscriber that the
// job of a delivery it holds was cancelled while it ran.
func appendCancelledFrame(b []byte, id string) []byte {
	b = append(b, `{"type":"cancelled","id":`...)
	b = wire.AppendString(b, id)
	return append(b, '}')
}

// appendTouchedFrame appends the answer to a touch: the lease's new expiry.
func appendTouchedFrame(b []byte, id string, expires time.Time) []byte {
	b = append(b, `{"type":"touched","id":`...)
	b = wire.AppendString(b, id)
	b = append(b, `,"lease_expires_at":`...)
	b = wire.AppendTime(b, expires)
	return append(b, '}')
}
