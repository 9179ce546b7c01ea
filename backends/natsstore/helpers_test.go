package natsstore

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// embedded is the package's shared in-process server; every test uses its
// own prefix on it.
var (
	embeddedOnce sync.Once
	embeddedSrv  *Embedded
	embeddedErr  error
	embeddedDir  string
	prefixSeq    atomic.Int64
)

func sharedEmbedded(t testing.TB) *Embedded {
	t.Helper()
	embeddedOnce.Do(func() {
		embeddedDir, embeddedErr = os.MkdirTemp("", "natsstore-test-*")
		if embeddedErr != nil {
			return
		}
		embeddedSrv, embeddedErr = StartEmbedded(EmbeddedConfig{DataDir: embeddedDir, Listen: "127.0.0.1:-1"})
	})
	require.NoError(t, embeddedErr)
	return embeddedSrv
}

// uniquePrefix returns a prefix no other test of this run uses.
func uniquePrefix() string {
	return fmt.Sprintf("t%d_%d", os.Getpid(), prefixSeq.Add(1))
}

// testBundle is what a test works with.
type testBundle struct {
	store  *Store
	nc     *nats.Conn
	prefix string
}

// setup opens a store with a fresh prefix on the shared embedded server.
func setup(t *testing.T, mod ...func(*Config)) *testBundle {
	t.Helper()
	nc, err := sharedEmbedded(t).Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	b := &testBundle{nc: nc, prefix: uniquePrefix()}
	b.store = openStore(t, nc, b.prefix, mod...)
	return b
}

// openStore opens a store over nc with prefix, closed at cleanup.
func openStore(t *testing.T, nc *nats.Conn, prefix string, mod ...func(*Config)) *Store {
	t.Helper()
	cfg := Config{Conn: nc, Prefix: prefix}
	for _, m := range mod {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// job returns a valid job due after delay.
func job(topic string, delay time.Duration) *core.Job {
	j := storetest.NewJob(topic, time.Now().Add(delay))
	j.MaxAttempts = 3
	return j
}

func put(t testing.TB, s *Store, jobs ...*core.Job) {
	t.Helper()
	storetest.Put(t, context.Background(), s, jobs...)
}

func claim(t testing.TB, s *Store, topic string, n int, wait time.Duration) []*core.Job {
	t.Helper()
	return storetest.Claim(t, context.Background(), s, topic, n, wait)
}

// settleErr drops the result of a settling call (AckJob, RetryJob,
// BuryJob), for checks of its error alone.
func settleErr(_ core.SettleResult, err error) error { return err }
