package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors. Every error answer of the service is an *APIError, which
// matches the sentinel of its code with errors.Is; a request that never got
// an answer (the service cannot be reached, the connection broke) matches
// ErrUnavailable.
var (
	// ErrNotFound is matched by a 404 not_found: an unknown job or topic,
	// or a finished job for a cancel.
	ErrNotFound = errors.New("delayq: not found")
	// ErrConflict is matched by a 409 conflict: an id in use (the
	// APIError's Job is the job that has it), a reserved job replaced or
	// cancelled, a lost lease, a requeue of a job that is not dead.
	ErrConflict = errors.New("delayq: conflict")
	// ErrInvalidArgument is matched by a 400 invalid_argument, and by
	// arguments this package refuses before sending; the APIError's Field
	// names the field at fault.
	ErrInvalidArgument = errors.New("delayq: invalid argument")
	// ErrUnauthenticated is matched by a 401 unauthenticated: the service
	// has tokens and the request had no valid one.
	ErrUnauthenticated = errors.New("delayq: unauthenticated")
	// ErrPermissionDenied is matched by a 403 permission_denied: the token
	// lacks the route's scope or the topic.
	ErrPermissionDenied = errors.New("delayq: permission denied")
	// ErrRateLimited is matched by a 429 rate_limited: over the token's
	// intake quota. The APIError's RetryAfter says when to try again.
	ErrRateLimited = errors.New("delayq: rate limited")
	// ErrUnavailable is matched by a 503 unavailable (the backend is down,
	// its breaker open, the server stopping or full of subscribers), by a
	// 502 or 504 from a proxy, and by a request that got no answer. Such a
	// request may be sent again; the APIError's RetryAfter, when set, says
	// when.
	ErrUnavailable = errors.New("delayq: unavailable")
	// ErrLeaseLost is matched by the 409 conflict of an ack, nack or touch
	// (single, batched or over a subscription): the delivery's lease
	// expired, or it was settled already. Such an error matches ErrConflict
	// too.
	ErrLeaseLost = errors.New("delayq: lease lost")
	// ErrJobCancelled is the cause of a subscription handler's context
	// when the job it runs is cancelled while it runs (CancelRunning): its
	// ack or nack would be ErrLeaseLost.
	ErrJobCancelled = errors.New("delayq: the job was cancelled while it ran")
)

// Codes of the service's error answers, as APIError.Code holds them.
const (
	CodeInvalidArgument      = "invalid_argument"
	CodeUnauthenticated      = "unauthenticated"
	CodePermissionDenied     = "permission_denied"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeConflict             = "conflict"
	CodeTooLarge             = "too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeMisdirectedRequest   = "misdirected_request"
	CodeRateLimited          = "rate_limited"
	CodeInternal             = "internal"
	CodeUnimplemented        = "unimplemented"
	CodeUnavailable          = "unavailable"
)

// APIError is an error answer of the service: its HTTP status and the
// fields of its error body. Use errors.Is with the sentinels (ErrNotFound,
// ErrConflict...) rather than comparing codes, and errors.As to read the
// fields.
type APIError struct {
	// StatusCode is the HTTP status; 0 for the error of a batch item, an
	// import line or a subscription frame, which have none of their own,
	// and for arguments this package refuses before sending.
	StatusCode int
	// Code is the error code (CodeNotFound...), or "http <status>" for an
	// answer without the service's error body (from a proxy, say).
	Code string
	// Message says what is wrong, for people.
	Message string
	// Field names the request field at fault, when one is.
	Field string
	// ID is the job the error is about, for a batch item or a frame.
	ID string
	// Job is the existing job of a 409 conflict caused by an id in use,
	// when the token may see it; nil otherwise.
	Job *Job
	// RetryAfter is the answer's Retry-After (429 and 503); 0 without one.
	RetryAfter time.Duration

	// lease is set for the answers of ack, nack and touch, whose conflict
	// is a lost lease.
	lease bool
}

// Error returns "delayq: <code>: <message>", with the field when there is one.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("delayq: ")
	b.WriteString(e.Code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %s)", e.Field)
	}
	return b.String()
}

// Is reports whether target is the sentinel of the error's code (or, for
// errors without the service's body, of its status).
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == CodeNotFound
	case ErrConflict:
		return e.Code == CodeConflict
	case ErrLeaseLost:
		return e.Code == CodeConflict && e.lease
	case ErrInvalidArgument:
		return e.Code == CodeInvalidArgument
	case ErrUnauthenticated:
		return e.Code == CodeUnauthenticated
	case ErrPermissionDenied:
		return e.Code == CodePermissionDenied
	case ErrRateLimited:
		return e.Code == CodeRateLimited
	case ErrUnavailable:
		return e.Code == CodeUnavailable || e.StatusCode == http.StatusServiceUnavailable ||
			e.StatusCode == http.StatusBadGateway || e.StatusCode == http.StatusGatewayTimeout
	}
	return false
}

// errorBody is the service's error body, alone or as a batch item's.
type errorBody struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
		ID      string `json:"id"`
	} `json:"error"`
	Job *Job `json:"job"`
}

// apiError returns the *APIError of e, nil when it holds no error.
func (e *errorBody) apiError(status int) *APIError {
	if e.Error == nil {
		return nil
	}
	return &APIError{StatusCode: status, Code: e.Error.Code, Message: e.Error.Message, Field: e.Error.Field, ID: e.Error.ID, Job: e.Job}
}

// decodeError reads an error answer. One without the service's error body
// is described by its status and the start of its text.
func decodeError(resp *http.Response, body []byte) *APIError {
	var eb errorBody
	var ae *APIError
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
		ae = eb.apiError(resp.StatusCode)
	} else {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		ae = &APIError{StatusCode: resp.StatusCode, Code: "http " + strconv.Itoa(resp.StatusCode), Message: cmp.Or(msg, http.StatusText(resp.StatusCode))}
	}
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s >= 0 {
		ae.RetryAfter = time.Duration(s) * time.Second
	}
	return ae
}

// invalidArgument is the error of an argument refused before sending.
func invalidArgument(field, format string, args ...any) error {
	return &APIError{Code: CodeInvalidArgument, Message: fmt.Sprintf(format, args...), Field: field}
}

// transportError wraps a failure to get an answer: ErrUnavailable and the
// cause, or only the context's error when ctx ended.
func transportError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("delayq: %s: %w", op, ctx.Err())
	}
	return fmt.Errorf("delayq: %s: %w: %w", op, ErrUnavailable, err)
}
