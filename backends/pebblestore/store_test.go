package pebblestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// A pebble.Open that fails leaves its disk-health ticker running (Pebble
// closes it with the database only); the process exits on that error.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/cockroachdb/pebble/v2/vfs.(*diskHealthCheckingFS).startTickerLocked.func1"))
}

// TestStore runs the conformance suite. One process opens a database at a
// time, so opening a namespace again gives the same *Store while it is
// open (the closest to a second instance), and a new one over the same
// directory once it was closed (a restart).
func TestStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var (
		mu     sync.Mutex
		stores = map[string]*pebblestore.Store{}
	)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, ns string) core.Store {
			mu.Lock()
			defer mu.Unlock()
			if s, ok := stores[ns]; ok && !errors.Is(s.Ping(context.Background()), core.ErrClosed) {
				return s
			}
			s, err := pebblestore.Open(pebblestore.Config{Dir: filepath.Join(dir, ns)})
			require.NoError(t, err)
			stores[ns] = s
			return s
		},
		Durable: true,
		OpenClock: func(t *testing.T, ns string, clock core.Clock) core.Store {
			s, err := pebblestore.Open(pebblestore.Config{Dir: filepath.Join(dir, ns), Clock: clock})
			require.NoError(t, err)
			return s
		},
		OpenRetention: func(t *testing.T, ns string, retention time.Duration) core.Store {
			s, err := pebblestore.Open(pebblestore.Config{Dir: filepath.Join(dir, ns), Retention: retention})
			require.NoError(t, err)
			return s
		},
	})
}

// TestOpenTwice: a second Open of a directory in use is refused with a
// message that says why, and the directory is the service user's alone.
func TestOpenTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	s, err := pebblestore.Open(pebblestore.Config{Dir: dir})
	require.NoError(t, err)
	defer s.Close()
	_, err = pebblestore.Open(pebblestore.Config{Dir: dir})
	require.ErrorContains(t, err, "another process holds it")
	info, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm())
}
