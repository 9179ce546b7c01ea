package natstransport_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/natsstore"
	"github.com/delayq/delayq/backends/natsstore/natstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopServers()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// The package's NATS servers, started on first use and shared by every
// test; each test uses subjects of its own.
var (
	embeddedOnce sync.Once
	embedded     *natsstore.Embedded
	embeddedDir  string
	embeddedErr  error

	externalsMu sync.Mutex
	externals   = map[string]*natstest.Server{}
	jsDir       string // the JetStream server's store
)

// sharedEmbedded returns the package's in-process nats-server with
// JetStream, listening on a free loopback port.
func sharedEmbedded(t testing.TB) *natsstore.Embedded {
	t.Helper()
	embeddedOnce.Do(func() {
		embeddedDir, embeddedErr = os.MkdirTemp("", "natstransport-test-*")
		if embeddedErr != nil {
			return
		}
		embedded, embeddedErr = natsstore.StartEmbedded(natsstore.EmbeddedConfig{DataDir: embeddedDir, Listen: "127.0.0.1:-1"})
	})
	require.NoError(t, embeddedErr)
	return embedded
}

// sharedExternal returns a separate nats-server process, with JetStream
// when js is set, started once per test run.
func sharedExternal(t testing.TB, js bool) *natstest.Server {
	t.Helper()
	key := fmt.Sprint(js)
	externalsMu.Lock()
	defer externalsMu.Unlock()
	if srv := externals[key]; srv != nil {
		return srv
	}
	var opts natstest.Options
	if js {
		dir, err := os.MkdirTemp("", "natstransport-js-*")
		require.NoError(t, err)
		jsDir, opts.Dir = dir, dir
	}
	srv := natstest.Start(t, opts)
	externals[key] = srv
	return srv
}

// stopServers stops every server the tests started and removes their
// files.
func stopServers() {
	natstest.Cleanup()
	if embedded != nil {
		embedded.Shutdown()
	}
	for _, dir := range []string{embeddedDir, jsDir} {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
}
