package client

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestAPIErrorIs checks which sentinels each error answer matches.
func TestAPIErrorIs(t *testing.T) {
	t.Parallel()
	all := []error{ErrNotFound, ErrConflict, ErrInvalidArgument, ErrUnauthenticated, ErrPermissionDenied,
		ErrRateLimited, ErrUnavailable, ErrLeaseLost}
	for _, c := range []struct {
		err  *APIError
		want []error
	}{
		{&APIError{StatusCode: 404, Code: CodeNotFound}, []error{ErrNotFound}},
		{&APIError{StatusCode: 409, Code: CodeConflict}, []error{ErrConflict}},
		{&APIError{StatusCode: 409, Code: CodeConflict, lease: true}, []error{ErrConflict, ErrLeaseLost}},
		{&APIError{Code: CodeConflict, lease: true}, []error{ErrConflict, ErrLeaseLost}},
		{&APIError{StatusCode: 400, Code: CodeInvalidArgument}, []error{ErrInvalidArgument}},
		{&APIError{StatusCode: 401, Code: CodeUnauthenticated}, []error{ErrUnauthenticated}},
		{&APIError{StatusCode: 403, Code: CodePermissionDenied}, []error{ErrPermissionDenied}},
		{&APIError{StatusCode: 429, Code: CodeRateLimited}, []error{ErrRateLimited}},
		{&APIError{StatusCode: 503, Code: CodeUnavailable}, []error{ErrUnavailable}},
		{&APIError{StatusCode: 502, Code: "http 502"}, []error{ErrUnavailable}},
		{&APIError{StatusCode: 500, Code: CodeInternal}, nil},
		{&APIError{StatusCode: 413, Code: CodeTooLarge}, nil},
	} {
		for _, target := range all {
			want := false
			for _, w := range c.want {
				want = want || w == target
			}
			if got := errors.Is(c.err, target); got != want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", c.err, target, got, want)
			}
		}
	}
}

// TestDecodeError checks the reading of error answers: the service's body,
// Retry-After, and an answer without the body (from a proxy).
func TestDecodeError(t *testing.T) {
	t.Parallel()
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"3"}}}
	e := decodeError(resp, []byte(`{"error": {"code": "rate_limited", "message": "slow down", "field": ""}}`))
	if e.Code != CodeRateLimited || e.Message != "slow down" || e.RetryAfter != 3*time.Second || e.StatusCode != 429 {
		t.Errorf("decodeError = %+v", e)
	}
	e = decodeError(&http.Response{StatusCode: 409, Header: http.Header{}},
		[]byte(`{"error": {"code": "conflict", "message": "in use", "field": "id"}, "job": {"id": "j1", "ttr": "30s", "backoff": {"delays": ["1m"]}}}`))
	if e.Job == nil || e.Job.ID != "j1" || e.Job.TTR != 30*time.Second || len(e.Job.BackoffDelays) != 1 || e.Field != "id" {
		t.Errorf("decodeError = %+v, job %+v", e, e.Job)
	}
	e = decodeError(&http.Response{StatusCode: 502, Header: http.Header{}}, []byte("<html>Bad Gateway</html>"))
	if e.Code != "http 502" || e.Message != "<html>Bad Gateway</html>" || !errors.Is(e, ErrUnavailable) {
		t.Errorf("decodeError = %+v", e)
	}
	if got, want := e.Error(), "delayq: http 502: <html>Bad Gateway</html>"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
