package wire_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// TestToError checks the status, code, message, field and job that every
// transport shows for an error.
func TestToError(t *testing.T) {
	t.Parallel()
	job := &core.Job{ID: "j1", Topic: "mail"}
	for _, tc := range []struct {
		name string
		err  error
		want wire.Error
	}{
		{
			name: "invalid argument",
			err:  fmt.Errorf("%w: bad", core.ErrInvalidArgument),
			want: wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalidArgument, Message: "invalid argument: bad"},
		},
		{
			name: "field error",
			err:  fmt.Errorf("decode: %w", core.Invalid("ttr", "ttr must be positive")),
			want: wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalidArgument, Message: "ttr must be positive", Field: "ttr"},
		},
		{
			name: "too large",
			err:  core.TooLarge("body", "body is over 1 MiB"),
			want: wire.Error{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeTooLarge, Message: "body is over 1 MiB", Field: "body"},
		},
		{
			name: "unauthenticated",
			err:  wire.WithMessage("a bearer token is required", wire.ErrUnauthenticated),
			want: wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: "a bearer token is required"},
		},
		{
			name: "permission denied",
			err:  fmt.Errorf("token %q may not push to topic %q: %w", "ci", "mail", wire.ErrPermissionDenied),
			want: wire.Error{Status: http.StatusForbidden, Code: wire.CodePermissionDenied, Message: `token "ci" may not push to topic "mail": permission denied`},
		},
		{
			name: "not found",
			err:  core.ErrNotFound,
			want: wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Message: "not found"},
		},
		{
			name: "not found with message",
			err:  wire.WithMessage(`job "x" not found`, fmt.Errorf("store: %w", core.ErrNotFound)),
			want: wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Message: `job "x" not found`},
		},
		{
			name: "conflict",
			err:  core.ErrLeaseLost,
			want: wire.Error{Status: http.StatusConflict, Code: wire.CodeConflict, Message: "conflict: lease lost"},
		},
		{
			name: "storage full",
			err:  fmt.Errorf("pebblestore: disk of /data full: %w", core.ErrStorageFull),
			want: wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, RetryAfter: time.Second,
				Message: "the server's storage is full (no space left on device): new jobs are refused until space is freed; claims, acks and reads still work; retry later"},
		},
		{
			name: "conflict with job",
			err:  fmt.Errorf("push: %w", &core.ConflictError{Message: `job "j1" exists`, Job: job}),
			want: wire.Error{Status: http.StatusConflict, Code: wire.CodeConflict, Message: `push: job "j1" exists`, Job: job},
		},
		{
			name: "unavailable",
			err:  fmt.Errorf("redis at 10.0.0.1: %w", core.ErrClosed),
			want: wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "the service is unavailable; retry later", RetryAfter: time.Second},
		},
		{
			name: "not replicated",
			err:  fmt.Errorf("redisstore: put jobs: %w: WAIT 1 answered 0", core.ErrNotReplicated),
			want: wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable,
				Message:    "the write was done but the backend's replicas did not confirm it in time: it may be lost in a failover; retry (a put with the same id answers 409 conflict if the job exists)",
				RetryAfter: time.Second},
		},
		{
			name: "unavailable with message",
			err:  wire.WithMessage("not ready", core.ErrUnavailable),
			want: wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "not ready", RetryAfter: time.Second},
		},
		{
			name: "rate limited",
			err:  fmt.Errorf("push: %w", &wire.RateLimitError{Message: `token "ci" is over its intake quota`, RetryAfter: 2500 * time.Millisecond}),
			want: wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeRateLimited, Message: `push: token "ci" is over its intake quota`, RetryAfter: 2500 * time.Millisecond},
		},
		{
			name: "unsupported media type",
			err:  wire.WithMessage("send JSON", wire.ErrUnsupportedMediaType),
			want: wire.Error{Status: http.StatusUnsupportedMediaType, Code: wire.CodeUnsupportedMediaType, Message: "send JSON"},
		},
		{
			name: "misdirected request",
			err:  wire.WithMessage("host not served", wire.ErrMisdirectedRequest),
			want: wire.Error{Status: http.StatusMisdirectedRequest, Code: wire.CodeMisdirectedRequest, Message: "host not served"},
		},
		{
			name: "unimplemented",
			err:  fmt.Errorf("export: %w", core.ErrUnsupported),
			want: wire.Error{Status: http.StatusNotImplemented, Code: wire.CodeUnimplemented, Message: "the backend does not support this operation"},
		},
		{
			name: "internal leaks nothing",
			err:  errors.New("pq: password authentication failed for user admin"),
			want: wire.Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Message: "internal error"},
		},
		{
			name: "internal ignores field errors",
			err:  &core.FieldError{Field: "ttr", Message: "secret", Err: errors.New("boom")},
			want: wire.Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Message: "internal error"},
		},
		{
			name: "first row wins",
			err:  errors.Join(core.ErrUnavailable, core.ErrInvalidArgument),
			want: wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalidArgument, Message: "unavailable\ninvalid argument"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, wire.ToError(tc.err))
		})
	}
}

// TestRetryAfterHeader checks that Retry-After rounds up to whole seconds.
func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	require.Empty(t, wire.Error{}.RetryAfterHeader())
	require.Equal(t, "1", wire.Error{RetryAfter: time.Second}.RetryAfterHeader())
	require.Equal(t, "3", wire.Error{RetryAfter: 2500 * time.Millisecond}.RetryAfterHeader())
}

// TestWithMessage checks that WithMessage keeps what the error matches.
func TestWithMessage(t *testing.T) {
	t.Parallel()
	err := wire.WithMessage("gone", core.ErrNotFound)
	require.EqualError(t, err, "gone")
	require.ErrorIs(t, err, core.ErrNotFound)
}
