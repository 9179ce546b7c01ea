package wire

import (
	"errors"
	"net/http"

	"github.com/delayq/delayq/core"
)

// Error codes of API.md that ToError gives. A transport adds codes of its
// own, such as the HTTP API's method_not_allowed, next to its call of
// ToError.
const (
	CodeInvalidArgument  = "invalid_argument"
	CodeUnauthenticated  = "unauthenticated"
	CodePermissionDenied = "permission_denied"
	CodeNotFound         = "not_found"
	CodeConflict         = "conflict"
	CodeTooLarge         = "too_large"
	CodeUnavailable      = "unavailable"
	CodeUnimplemented    = "unimplemented"
	CodeInternal         = "internal"
)

// ErrUnauthenticated is returned by a transport for a request that carries
// no credentials, or credentials it does not know: 401 unauthenticated.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrPermissionDenied is returned by a transport for a request whose
// credentials do not grant what it asks for: 403 permission_denied.
var ErrPermissionDenied = errors.New("permission denied")

// RetryAfterSeconds is the Retry-After of an answer with status 503
// unavailable.
const RetryAfterSeconds = "1"

// errorTable maps core sentinels to wire statuses and codes: the first entry
// that errors.Is matches wins, and anything unmatched is 500 internal. It is
// the only place that decides the status of a core error, for every
// transport.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{core.ErrInvalidArgument, http.StatusBadRequest, CodeInvalidArgument},
	{ErrUnauthenticated, http.StatusUnauthorized, CodeUnauthenticated},
	{ErrPermissionDenied, http.StatusForbidden, CodePermissionDenied},
	{core.ErrTooLarge, http.StatusRequestEntityTooLarge, CodeTooLarge},
	{core.ErrNotFound, http.StatusNotFound, CodeNotFound},
	{core.ErrConflict, http.StatusConflict, CodeConflict},
	{core.ErrUnavailable, http.StatusServiceUnavailable, CodeUnavailable},
	// An extension of API.md: an optional capability (export, import) the
	// backend lacks. Retrying will not help, so it is not 503.
	{errors.ErrUnsupported, http.StatusNotImplemented, CodeUnimplemented},
}

// Error is an error as the wire shows it.
type Error struct {
	// Status is the HTTP status of the error. Transports without statuses
	// use only Code.
	Status int
	// Code is one of the Code constants.
	Code string
	// Message is safe to show to clients.
	Message string
	// Field names the request field at fault, when known.
	Field string
	// Job is the existing job of a conflict, when known.
	Job *core.Job
}

// ToError maps err through errorTable. Client errors keep their own message,
// and the field and message of a *core.FieldError; server errors get a fixed
// message so that no detail leaks. A message set with WithMessage replaces
// any of these, whatever the status.
func ToError(err error) Error {
	e := Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			e.Status, e.Code = row.status, row.code
			break
		}
	}
	switch {
	case e.Status == http.StatusServiceUnavailable:
		e.Message = "the service is unavailable; retry later"
	case e.Status == http.StatusNotImplemented:
		e.Message = "the backend does not support this operation"
	case e.Status < http.StatusInternalServerError:
		e.Message = err.Error()
	}
	if fe, ok := errors.AsType[*core.FieldError](err); ok && e.Status < http.StatusInternalServerError {
		e.Field, e.Message = fe.Field, fe.Message
	}
	if me, ok := errors.AsType[*messageError](err); ok {
		e.Message = me.msg // written by a transport for clients
	}
	if ce, ok := errors.AsType[*core.ConflictError](err); ok && e.Status == http.StatusConflict {
		e.Job = ce.Job
	}
	return e
}

// WithMessage returns an error that matches what err matches but whose
// message, for ToError too, is msg. msg is shown to clients whatever the
// status, so it must not hold details of the backend.
func WithMessage(msg string, err error) error {
	return &messageError{msg: msg, err: err}
}

// messageError is the error of WithMessage.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }
