package wire

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/delayq/delayq/core"
)

// Error codes of docs/api.md that ToError gives. A transport adds codes of its
// own, such as the HTTP API's method_not_allowed, next to its call of
// ToError.
const (
	CodeInvalidArgument  = "invalid_argument"
	CodeUnauthenticated  = "unauthenticated"
	CodePermissionDenied = "permission_denied"
	CodeNotFound         = "not_found"
	CodeConflict         = "conflict"
	CodeTooLarge         = "too_large"
	CodeRateLimited      = "rate_limited"
	// CodeUnsupportedMediaType is given for a request body that is not of
	// the media type its route reads.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeMisdirectedRequest is given for a request whose Host header
	// names a host this server does not serve.
	CodeMisdirectedRequest = "misdirected_request"
	CodeUnavailable        = "unavailable"
	CodeUnimplemented      = "unimplemented"
	CodeInternal           = "internal"
)

// ErrUnauthenticated is returned by a transport for a request that carries
// no credentials, or credentials it does not know: 401 unauthenticated.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrPermissionDenied is returned by a transport for a request whose
// credentials do not grant what it asks for: 403 permission_denied.
var ErrPermissionDenied = errors.New("permission denied")

// ErrRateLimited is returned by a transport for a request over its
// caller's quota: 429 rate_limited with Retry-After. A *RateLimitError
// carries how long to wait.
var ErrRateLimited = errors.New("rate limited")

// ErrUnsupportedMediaType is returned by a transport for a request body of
// a media type its route does not read: 415 unsupported_media_type.
var ErrUnsupportedMediaType = errors.New("unsupported media type")

// ErrMisdirectedRequest is returned by a transport for a request addressed
// to a host it does not serve, such as the name of a DNS rebinding attack:
// 421 misdirected_request.
var ErrMisdirectedRequest = errors.New("misdirected request")

// RateLimitError is a request refused by a quota; it matches
// ErrRateLimited.
type RateLimitError struct {
	// Message is shown to clients.
	Message string
	// RetryAfter is when the quota will allow the request.
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string { return e.Message }

// Is reports whether target is ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// RetryAfterSeconds is the Retry-After of an answer with status 503
// unavailable.
const RetryAfterSeconds = "1"

// RetryAfterHeader returns the Retry-After header of e, in whole seconds
// rounded up, or "" when e has none.
func (e Error) RetryAfterHeader() string {
	if e.RetryAfter <= 0 {
		return ""
	}
	return strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10)
}

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
	{ErrUnsupportedMediaType, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType},
	{ErrMisdirectedRequest, http.StatusMisdirectedRequest, CodeMisdirectedRequest},
	{ErrRateLimited, http.StatusTooManyRequests, CodeRateLimited},
	{core.ErrNotFound, http.StatusNotFound, CodeNotFound},
	{core.ErrConflict, http.StatusConflict, CodeConflict},
	{core.ErrUnavailable, http.StatusServiceUnavailable, CodeUnavailable},
	// An optional capability (export, import) the backend lacks. Retrying
	// will not help, so it is not 503.
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
	// RetryAfter is when a retry may succeed: a second for 503
	// unavailable, the quota's wait for 429 rate_limited; zero otherwise.
	// Transports with headers send it as Retry-After (RetryAfterHeader).
	RetryAfter time.Duration
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
	case errors.Is(err, core.ErrStorageFull):
		e.Message = "the server's storage is full (no space left on device): new jobs are refused until space is freed; claims, acks and reads still work; retry later"
	case errors.Is(err, core.ErrDraining):
		e.Message = "this instance is shutting down (draining): claim from another instance"
	case errors.Is(err, core.ErrNotReplicated):
		e.Message = "the write was done but the backend's replicas did not confirm it in time: it may be lost in a failover; retry (a put with the same id answers 409 conflict if the job exists)"
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
	switch e.Status {
	case http.StatusServiceUnavailable:
		e.RetryAfter = time.Second
	case http.StatusTooManyRequests:
		e.RetryAfter = time.Second
		if rl, ok := errors.AsType[*RateLimitError](err); ok {
			e.RetryAfter = max(rl.RetryAfter, time.Second)
		}
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
