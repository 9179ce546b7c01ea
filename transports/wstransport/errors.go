package wstransport

import (
	"errors"
	"net/http"

	"github.com/delayq/delayq/core"
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

// errNotWebSocket is returned for a request to the subscribe route that
// does not ask for a WebSocket upgrade.
var errNotWebSocket = errors.New("not a WebSocket upgrade")

// errorTable maps errors to codes, and to HTTP statuses for the answers
// given before the upgrade: the first entry that errors.Is matches wins, and
// anything unmatched is internal. It is the only place that decides an
// error's code.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{core.ErrInvalidArgument, http.StatusBadRequest, codeInvalidArgument},
	{errNotWebSocket, http.StatusBadRequest, codeInvalidArgument},
	{core.ErrTooLarge, http.StatusRequestEntityTooLarge, codeTooLarge},
	{core.ErrNotFound, http.StatusNotFound, codeNotFound},
	{core.ErrConflict, http.StatusConflict, codeConflict},
	{core.ErrUnavailable, http.StatusServiceUnavailable, codeUnavailable},
}

// wireError is an error as frames and answers show it.
type wireError struct {
	status  int
	code    string
	message string
	field   string
}

// toWireError maps err through errorTable. Client errors keep their own
// message; server errors get a fixed one so that no detail leaks.
func toWireError(err error) wireError {
	e := wireError{status: http.StatusInternalServerError, code: codeInternal, message: "internal error"}
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
		e.field, e.message = fe.Field, fe.Message
	}
	if me, ok := errors.AsType[*messageError](err); ok {
		e.message = me.msg // written by this package for clients
	}
	return e
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
