package natstransport

import (
	"errors"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Error codes of API.md.
const (
	codeInvalidArgument = "invalid_argument"
	codeNotFound        = "not_found"
	codeConflict        = "conflict"
	codeTooLarge        = "too_large"
	codeUnavailable     = "unavailable"
	codeInternal        = "internal"
)

// errorTable maps errors to the codes of reply errors: the first entry that
// errors.Is matches wins, and anything unmatched is internal. It is the only
// place that decides an error's code.
var errorTable = []struct {
	err  error
	code string
}{
	{core.ErrInvalidArgument, codeInvalidArgument},
	{core.ErrTooLarge, codeTooLarge},
	{core.ErrNotFound, codeNotFound},
	{core.ErrConflict, codeConflict},
	{core.ErrUnavailable, codeUnavailable},
}

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
}

// replyError is an error as a reply shows it.
type replyError struct {
	code    string
	message string
	field   string
}

// toReplyError maps err through errorTable. Client errors keep their own
// message; server errors get a fixed one so that no detail leaks.
func toReplyError(err error) replyError {
	e := replyError{code: codeInternal, message: "internal error"}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			e.code = row.code
			break
		}
	}
	switch e.code {
	case codeUnavailable:
		e.message = "the service is unavailable; retry later"
	case codeInternal:
	default:
		e.message = err.Error()
		if fe, ok := errors.AsType[*core.FieldError](err); ok {
			e.message, e.field = fe.Message, fe.Field
			if name, ok := fieldNames[fe.Field]; ok {
				e.field = name
			}
		}
	}
	if me, ok := errors.AsType[*messageError](err); ok {
		e.message = me.msg // written by this package for clients
	}
	return e
}

// appendErrorReply appends {"error":{"code","message","field"}}.
func appendErrorReply(b []byte, e replyError) []byte {
	b = append(b, `{"error":{"code":`...)
	b = wire.AppendString(b, e.code)
	b = append(b, `,"message":`...)
	b = wire.AppendString(b, e.message)
	b = append(b, `,"field":`...)
	b = wire.AppendString(b, e.field)
	return append(b, "}}"...)
}

// messageError replaces the message of an error while keeping what it
// matches. Its message is shown to clients, so it must not hold details of
// the backend.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }
