package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/redisstore/redistest"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// TestMain stops the package's shared servers after the tests and checks
// for leaked goroutines.
func TestMain(m *testing.M) {
	code := m.Run()
	shared.stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// shared holds the servers that the package's tests share: one standalone
// server, one without functions (scriptsOnlyURL) and one 3-master cluster,
// each started at first use.
var shared sharedServers

type sharedServers struct {
	dirOnce sync.Once
	dir     string
	dirErr  error

	standalone sharedServer
	scripts    sharedServer // FUNCTION renamed away

	clusterOnce sync.Once
	cluster     *redistest.Cluster
	clusterErr  error
}

func (ss *sharedServers) tempDir() (string, error) {
	ss.dirOnce.Do(func() { ss.dir, ss.dirErr = os.MkdirTemp("", "redisstore-test-") })
	return ss.dir, ss.dirErr
}

// sharedServer is a standalone server the package's tests share.
type sharedServer struct {
	once sync.Once
	srv  *redistest.Server
	err  error
}

// url starts the server at first use, in the shared directory's sub, with
// args, and returns its URL.
func (s *sharedServer) url(t testing.TB, sub string, args ...string) string {
	t.Helper()
	redistest.Require(t)
	s.once.Do(func() {
		dir, err := shared.tempDir()
		if err != nil {
			s.err = err
			return
		}
		s.srv, s.err = redistest.StartServer(redistest.Options{Dir: dir + "/" + sub, Args: args})
	})
	require.NoError(t, s.err)
	return s.srv.URL()
}

func (ss *sharedServers) stop() {
	for _, s := range []*sharedServer{&ss.standalone, &ss.scripts} {
		if s.srv != nil {
			s.srv.Kill()
		}
	}
	if ss.cluster != nil {
		ss.cluster.Stop()
	}
	if ss.dir != "" {
		_ = os.RemoveAll(ss.dir)
	}
}

// standaloneURL returns the URL of the shared standalone server, or of
// TEST_REDIS_URL.
func standaloneURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return shared.standalone.url(t, "standalone")
}

// scriptsOnlyURL returns the URL of the shared standalone server whose
// FUNCTION command is renamed away, as on a server before Redis 7: stores
// there run EVALSHA scripts instead of the library (scripts.go).
func scriptsOnlyURL(t testing.TB) string {
	t.Helper()
	return shared.scripts.url(t, "scripts", "--rename-command", "FUNCTION", "")
}

// ownServer starts a standalone server of the test's or benchmark's own
// with the given AOF fsync policy ("" for no persistence), in a temporary
// directory, killed at cleanup.
func ownServer(tb testing.TB, fsync string) *redistest.Server {
	tb.Helper()
	redistest.Require(tb)
	srv, err := redistest.StartServer(redistest.Options{Dir: tb.TempDir(), AppendFsync: fsync})
	require.NoError(tb, err)
	tb.Cleanup(srv.Kill)
	return srv
}

// clusterURL returns the URL of the shared 3-master cluster, or of
// TEST_REDIS_CLUSTER_URL.
func clusterURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("TEST_REDIS_CLUSTER_URL"); u != "" {
		return u
	}
	redistest.Require(t)
	shared.clusterOnce.Do(func() {
		dir, err := shared.tempDir()
		if err != nil {
			shared.clusterErr = err
			return
		}
		shared.cluster, shared.clusterErr = redistest.StartCluster(3, redistest.Options{Dir: dir + "/cluster"})
	})
	require.NoError(t, shared.clusterErr)
	return shared.cluster.URL()
}

// newClient returns a client for url, closed at cleanup.
func newClient(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	c, err := ParseURL(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// uniquePrefix returns a prefix no other test, run or process uses.
func uniquePrefix(name string) string {
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "t-" + strings.Trim(name, "-") + "-" + strings.ToLower(rand.Text()[:8])
}

// openStore opens a store over its own client on url with prefix, closed at
// cleanup (before the client).
func openStore(t testing.TB, url, prefix string, mod ...func(*Config)) *Store {
	t.Helper()
	cfg := Config{Client: newClient(t, url), Prefix: prefix}
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

// job returns a valid job of topic due after delay.
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
