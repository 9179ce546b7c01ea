package natsstore

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestNoWriteWhileReconnecting: while the connection reconnects, nats.go
// keeps what is published and sends it once reconnected, so a put that
// failed meanwhile took effect later, after its answer (a history run saw
// a push answered 503 during a partition of its instance from NATS created
// 3 s later, after a cancel answered 404, and delivered). A write is
// refused while the connection is down, and never sent.
func TestNoWriteWhileReconnecting(t *testing.T) {
	t.Parallel()
	srv := startExternal(t, t.TempDir(), 0)
	t.Cleanup(srv.Kill)
	nc := connectURL(t, srv.URL())
	s := openStore(t, nc, uniquePrefix())
	ctx := context.Background()
	put(t, s, job("t", time.Hour)) // the topic is known: the put below only writes its job

	srv.Kill()
	require.Eventually(t, func() bool { return nc.Status() == nats.RECONNECTING }, 10*time.Second, 5*time.Millisecond)
	j := job("t", time.Hour)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := s.PutJobs(short, &core.PutJobsParams{Jobs: []*core.Job{j}})
	cancel()
	require.ErrorIs(t, err, core.ErrUnavailable)

	srv2 := srv.Restart(t)
	t.Cleanup(srv2.Kill)
	require.Eventually(t, nc.IsConnected, 10*time.Second, 5*time.Millisecond)
	// A write after the reconnect is applied after anything the
	// connection sent before it.
	marker := job("t", time.Hour)
	put(t, s, marker)
	_, err = s.GetJob(ctx, j.ID)
	require.ErrorIs(t, err, core.ErrNotFound, "the failed put was not sent on reconnect")
	require.NoError(t, s.Close()) // while the server runs: its cleanup kills it first
}
