package natsstore

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/natsstore/natstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	natstest.Cleanup()
	if embeddedSrv != nil {
		embeddedSrv.Shutdown()
	}
	if embeddedDir != "" {
		_ = os.RemoveAll(embeddedDir)
	}
	if clusterDir != "" {
		_ = os.RemoveAll(clusterDir)
	}
	if sharedExternalDir != "" {
		_ = os.RemoveAll(sharedExternalDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// The package's shared separate-process server, started on first use.
var (
	sharedExternalOnce sync.Once
	sharedExternalDir  string
	sharedExternalSrv  *natstest.Server
	sharedExternalErr  error
)

// startExternal starts nats-server with JetStream in dir on a free port
// (or on port, when not 0) and waits until it is ready.
func startExternal(t testing.TB, dir string, port int) *natstest.Server {
	t.Helper()
	return natstest.Start(t, natstest.Options{Dir: dir, Port: port})
}

// sharedExternal returns the package's shared separate-process server.
func sharedExternal(t testing.TB) *natstest.Server {
	t.Helper()
	sharedExternalOnce.Do(func() {
		sharedExternalDir, sharedExternalErr = os.MkdirTemp("", "natsstore-external-*")
		if sharedExternalErr != nil {
			return
		}
		sharedExternalSrv = startExternal(t, sharedExternalDir, 0)
	})
	require.NoError(t, sharedExternalErr)
	require.NotNil(t, sharedExternalSrv)
	return sharedExternalSrv
}

// connectURL connects to url, closed at cleanup.
func connectURL(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// TestExternalProcess runs a few focused checks against the separate
// nats-server process.
func TestExternalProcess(t *testing.T) {
	t.Parallel()
	srv := sharedExternal(t)
	nc := connectURL(t, srv.URL())
	s := openStore(t, nc, uniquePrefix())
	j := job("ext", 0)
	put(t, s, j)
	got := claim(t, s, "ext", 1, 5*time.Second)
	require.Len(t, got, 1)
	require.Equal(t, j.ID, got[0].ID)
	require.NoError(t, s.Ping(context.Background()))
}
