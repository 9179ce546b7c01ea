package pebblestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
	})
}
