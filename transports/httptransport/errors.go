package httptransport

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/delayq/delayq/core"
)

// Error codes of API.md, plus method_not_allowed for a route that exists
// with other methods.
const (
	codeInvalidArgument  = "invalid_argument"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeConflict         = "conflict"
	codeTooLarge         = "too_large"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal"
)

// errMethodNotAllowed is returned for a path that has routes, none of them
// for the request's method.
var errMethodNotAllowed = errors.New("method not allowed")

// retryAfterSeconds is the Retry-After of a 503 answer.
const retryAfterSeconds = "1"

// errorTable maps errors to wire statuses and codes: the first entry that
// errors.Is matches wins, and anything unmatched is 500 internal. It is the
// only place that decides an error's status.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{core.ErrInvalidArgument, http.StatusBadRequest, codeInvalidArgument},
	{core.ErrTooLarge, http.StatusRequestEntityTooLarge, codeTooLarge},
	{core.ErrNotFound, http.StatusNotFound, codeNotFound},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, codeMethodNotAllowed},
	{core.ErrConflict, http.StatusConflict, codeConflict},
	{core.ErrUnavailable, http.StatusServiceUnavailable, codeUnavailable},
}

// apiError is an error as the wire shows it.
type apiError struct {
	status  int
	code    string
	message string
	field   string
	// job is the existing job of a conflict, when known.
	job *core.Job
}

// toAPIError maps err through errorTable. Messages of client errors are the
// error's own; server errors get a fixed message so that no detail leaks.
func toAPIError(err error) apiError {
	e := apiError{status: http.StatusInternalServerError, code: codeInternal, message: "internal error"}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			e.status, e.code = row.status, row.code
			break
		}
	}
	switch {
	case e.status == http.StatusServiceUnavailable:
		e.message = "the service is unavailable; retry later"
	case e.status < http.StatusInternalServerError:
		e.message = err.Error()
	}
	if fe, ok := errors.AsType[*core.FieldError](err); ok && e.status < http.StatusInternalServerError {
		e.field = fe.Field
		e.message = fe.Message
	}
	if me, ok := errors.AsType[*messageError](err); ok {
		e.message = me.msg // written by this package for clients
	}
	if ce, ok := errors.AsType[*core.ConflictError](err); ok && e.status == http.StatusConflict {
		e.job = ce.Job
	}
	return e
}

// messageError replaces the message of an error while keeping what it
// matches. Its message is shown to clients whatever the status, so it must
// not hold details of the backend.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }

// describe gives err the message format when err matches target, so that
// clients read `job "x" not found` rather than "not found". Other errors
// are returned as they are.
func describe(err, target error, format string, args ...any) error {
	if err == nil || !errors.Is(err, target) {
		return err
	}
	if ce, ok := errors.AsType[*core.ConflictError](err); ok && ce.Job != nil {
		return err // keep the existing job and the store's message
	}
	return &messageError{msg: fmt.Sprintf(format, args...), err: err}
}

// writeError answers err as the JSON error body with the status of
// errorTable, and logs server-side errors.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toAPIError(err)
	s.logError(r, e, err)
	if e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	b := make([]byte, 0, 256)
	b = append(b, '{')
	b = appendErrorFields(b, e)
	b = append(b, '}')
	writeRaw(w, e.status, b)
}

// logError logs errors that are the server's fault; a client that went away
// is not one.
func (s *Server) logError(r *http.Request, e apiError, err error) {
	switch {
	case e.status < http.StatusInternalServerError:
	case r.Context().Err() != nil:
		s.log.Debug("httptransport: request ended by the client", "method", r.Method, "path", r.URL.Path, "err", err)
	case e.status == http.StatusServiceUnavailable:
		s.log.Warn("httptransport: unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	default:
		s.log.Error("httptransport: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}

// appendErrorFields appends `"error":{...}` and, for a conflict with a known
// job, `,"job":{...}`, without the surrounding braces.
func appendErrorFields(b []byte, e apiError) []byte {
	b = append(b, `"error":{"code":`...)
	b = appendString(b, e.code)
	b = append(b, `,"message":`...)
	b = appendString(b, e.message)
	b = append(b, `,"field":`...)
	b = appendString(b, e.field)
	b = append(b, '}')
	if e.job != nil {
		b = append(b, `,"job":`...)
		b = appendJob(b, e.job)
	}
	return b
}
