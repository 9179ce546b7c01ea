package breaker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore"
	"github.com/delayq/delayq/backends/natsstore/natstest"
	"github.com/delayq/delayq/core"
)

// TestFaultNATS runs the fault test over natsstore on a nats-server in a
// process of its own, killed with SIGKILL and restarted on the same port and
// store directory; the store's connection reconnects by itself.
func TestFaultNATS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: skipped with -short")
	}
	dir := t.TempDir()
	srv := natstest.Start(t, natstest.Options{Dir: dir})
	t.Cleanup(func() { srv.Kill() })
	runFault(t, faultBackend{
		name: "nats",
		open: func(t *testing.T) core.Store {
			nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := natsstore.New(ctx, natsstore.Config{Conn: nc, Prefix: "fault", Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			return s
		},
		stop:  func(*testing.T) { srv.Kill() },
		start: func(t *testing.T) { srv = srv.Restart(t) },
	})
}
