package natstransport

import (
	"strings"

	"github.com/delayq/delayq/transports/wire"
)

// fieldNames maps the engine's field names to what a NATS producer sets.
var fieldNames = map[string]string{
	"topic":        "subject",
	"body":         "payload",
	"delay":        HeaderDelay,
	"run_at":       HeaderRunAt,
	"id":           HeaderID,
	"ttr":          HeaderTTR,
	"max_attempts": HeaderMaxAttempts,
	"key":          HeaderKey,
	"priority":     HeaderPriority,
	"url":          HeaderURL,
	"expires_at":   HeaderExpiresAt,
	"expires_in":   HeaderExpiresIn,
}

// toReplyError maps err with wire.ToError, naming fields as a NATS
// producer sets them (any field under "backoff" by the one header that
// sets them). Replies carry no status, only the code.
func toReplyError(err error) wire.Error {
	e := wire.ToError(err)
	if name, ok := fieldNames[e.Field]; ok {
		e.Field = name
	} else if strings.HasPrefix(e.Field, "backoff.") {
		e.Field = HeaderBackoffDelays
	}
	return e
}

// appendErrorReply appends {"error":{"code","message","field"}}.
func appendErrorReply(b []byte, e wire.Error) []byte {
	b = append(b, `{"error":{"code":`...)
	b = wire.AppendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = wire.AppendString(b, e.Message)
	b = append(b, `,"field":`...)
	b = wire.AppendString(b, e.Field)
	return append(b, "}}"...)
}
