package natstest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// ClientConn connects to url as user with password, closed at cleanup,
// and returns the connection with the channel that collects its
// asynchronous errors (permission violations, for RequireViolation). It
// fails tb if the connection is refused.
func ClientConn(tb testing.TB, url, user, password string) (*nats.Conn, chan error) {
	tb.Helper()
	errs := make(chan error, 64)
	nc, err := nats.Connect(url, nats.UserInfo(user, password), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		errs <- err
	}))
	if err != nil {
		tb.Fatalf("natstest: connect to %s as %s: %v", url, user, err)
	}
	tb.Cleanup(nc.Close)
	return nc, errs
}

// RequireViolation waits up to 10 s for the next error in errs (from
// ClientConn) and fails tb unless it is the permission violation on
// subject.
func RequireViolation(tb testing.TB, errs <-chan error, subject string) {
	tb.Helper()
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `"`+subject+`"`) {
			tb.Fatalf("natstest: got %v, want the permission violation for %q", err, subject)
		}
	case <-time.After(10 * time.Second):
		tb.Fatalf("natstest: no permission violation for %s within 10s", subject)
	}
}
