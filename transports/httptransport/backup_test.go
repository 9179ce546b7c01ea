package httptransport_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
)

// checkpointStore is a store with the checkpoint capability: its
// checkpoint writes a few files, a large one among them. When entered is
// set, a checkpoint says so on it and then waits for release.
type checkpointStore struct {
	core.Store
	big      []byte
	entered  chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	dirs     []string
	failWith error
}

func newCheckpointStore(size int) *checkpointStore {
	big := make([]byte, size)
	r := rand.NewChaCha8([32]byte{7})
	_, _ = r.Read(big)
	return &checkpointStore{big: big}
}

func (c *checkpointStore) Checkpoint(ctx context.Context, dir string) error {
	c.mu.Lock()
	c.dirs = append(c.dirs, dir)
	big, entered, release, failWith := c.big, c.entered, c.release, c.failWith
	c.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
		<-release
	}
	if failWith != nil {
		return failWith
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub", "empty"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "CURRENT"), []byte("MANIFEST-000001\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sub", "000001.sst"), big, 0o644)
}

// set changes the store's fields under its lock.
func (c *checkpointStore) set(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// calls returns the directories of the checkpoints asked for so far.
func (c *checkpointStore) calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.dirs...)
}

// withCheckpoints makes the store under the engine c, and the server's
// backups go to dir.
func withCheckpoints(c *checkpointStore, dir string) func(*setupConfig) {
	return func(cfg *setupConfig) {
		cfg.wrap = func(s core.Store) core.Store { c.Store = s; return c }
		cfg.backupDir = dir
	}
}

// tarEntry is one entry of an archive read back.
type tarEntry struct {
	typ  byte
	mode int64
	data []byte
}

// readTar reads a whole archive, requiring it to end properly.
func readTar(t *testing.T, data []byte) (names []string, entries map[string]tarEntry) {
	t.Helper()
	entries = map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, entries
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		names = append(names, h.Name)
		entries[h.Name] = tarEntry{typ: h.Typeflag, mode: h.Mode, data: body}
	}
}

// requireEmptyDir requires dir to hold nothing.
func requireEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "what a backup wrote is removed")
}

// TestBackupArchive checks the answer of GET /v1/backup: the checkpoint as
// a tar archive, directories first and private modes, and nothing left in
// the backup directory afterwards.
func TestBackupArchive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := newCheckpointStore(3<<20 + 123)
	b := setup(t, withCheckpoints(c, dir))
	res := b.do(t, http.MethodGet, "/v1/backup", nil)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "application/x-tar", res.header.Get("Content-Type"))
	require.Equal(t, "no-store", res.header.Get("Cache-Control"))
	require.Regexp(t, `^attachment; filename="delayq-backup-\d{8}T\d{6}Z\.tar"$`, res.header.Get("Content-Disposition"))
	names, entries := readTar(t, res.body)
	require.Equal(t, []string{"CURRENT", "sub/", "sub/000001.sst", "sub/empty/"}, names)
	require.Equal(t, tarEntry{typ: tar.TypeReg, mode: 0o600, data: []byte("MANIFEST-000001\n")}, entries["CURRENT"])
	require.Equal(t, byte(tar.TypeDir), entries["sub/"].typ)
	require.Equal(t, int64(0o700), entries["sub/"].mode)
	require.Equal(t, c.big, entries["sub/000001.sst"].data)
	requireEmptyDir(t, dir)
	dirs := c.calls()
	require.Len(t, dirs, 1)
	require.Equal(t, dir, filepath.Dir(dirs[0]), "the checkpoint is made in BackupDir")
}

// TestBackupUnsupported: a store without the capability answers 501 with
// the JSON error body, and nothing is written.
func TestBackupUnsupported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, func(c *setupConfig) { c.backupDir = dir })
	m := requireError(t, b.do(t, http.MethodGet, "/v1/backup", nil), http.StatusNotImplemented, "unimplemented", "")
	require.Contains(t, m["error"].(map[string]any)["message"], "backup is not supported")
	requireEmptyDir(t, dir)

	// Config.Backup's own ErrUnsupported answers the same.
	b = setup(t, func(c *setupConfig) {
		c.backupDir = dir
		c.backup = func(context.Context, string) error { return core.ErrUnsupported }
	})
	requireError(t, b.do(t, http.MethodGet, "/v1/backup", nil), http.StatusNotImplemented, "unimplemented", "")
}

// TestBackupOneAtATime: while a backup runs, another is answered 409
// conflict at once; once it ended, the next one runs.
func TestBackupOneAtATime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := newCheckpointStore(1 << 10)
	c.entered, c.release = make(chan struct{}), make(chan struct{})
	b := setup(t, withCheckpoints(c, dir))
	first := make(chan *response, 1)
	go func() {
		res, err := b.send(context.Background(), http.MethodGet, "/v1/backup", nil)
		if err != nil {
			t.Error(err)
		}
		first <- res
	}()
	<-c.entered
	for range 3 {
		m := requireError(t, b.do(t, http.MethodGet, "/v1/backup", nil), http.StatusConflict, "conflict", "")
		require.Contains(t, m["error"].(map[string]any)["message"], "a backup is already running")
		require.NotContains(t, m, "job")
	}
	close(c.release)
	res := <-first
	require.NotNil(t, res)
	requireStatus(t, res, http.StatusOK)
	c.set(func() { c.entered = nil })
	requireStatus(t, b.do(t, http.MethodGet, "/v1/backup", nil), http.StatusOK)
	requireEmptyDir(t, dir)
	require.Len(t, c.calls(), 2, "the refused backups reached no store")
}

// TestBackupErrors: a failed checkpoint answers its error and leaves
// nothing; one that fails as unavailable answers 503.
func TestBackupErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := newCheckpointStore(10)
	b := setup(t, withCheckpoints(c, dir))
	c.set(func() { c.failWith = errors.New("disk on fire at 10.0.0.7") })
	res := b.do(t, http.MethodGet, "/v1/backup", nil)
	m := requireError(t, res, http.StatusInternalServerError, "internal", "")
	require.Equal(t, "internal error", m["error"].(map[string]any)["message"])
	c.set(func() { c.failWith = fmt.Errorf("wrapped: %w", core.ErrUnavailable) })
	requireError(t, b.do(t, http.MethodGet, "/v1/backup", nil), http.StatusServiceUnavailable, "unavailable", "")
	requireEmptyDir(t, dir)
}

// TestBackupClientGone: a client that leaves in the middle of a backup
// ends it: its directory is removed, and the next backup runs.
func TestBackupClientGone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := newCheckpointStore(64 << 20)
	b := setup(t, withCheckpoints(c, dir))
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+"/v1/backup", nil)
	require.NoError(t, err)
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	requireStatus(t, &response{status: resp.StatusCode}, http.StatusOK)
	_, err = io.ReadFull(resp.Body, make([]byte, 1<<20))
	require.NoError(t, err)
	cancel()
	_ = resp.Body.Close()
	require.Eventually(t, func() bool {
		entries, err := os.ReadDir(dir)
		return err == nil && len(entries) == 0
	}, 10*time.Second, 10*time.Millisecond, "the backup's directory is removed")
	c.set(func() { c.big = c.big[:1000] })
	require.Eventually(t, func() bool {
		return b.do(t, http.MethodGet, "/v1/backup", nil).status == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond, "the next backup runs")
	requireEmptyDir(t, dir)
}

// TestBackupNeedsAdmin: GET /v1/backup needs the admin scope, and a token
// restricted to topics is refused even with it.
func TestBackupNeedsAdmin(t *testing.T) {
	t.Parallel()
	const restrictedSecret = "restricted-admin-0123456789"
	tokens, err := auth.NewTokens([]auth.Token{
		{Name: "producer", Token: pushSecret, Scopes: []auth.Scope{auth.ScopePush}},
		{Name: "worker", Token: consumeSecret, Scopes: []auth.Scope{auth.ScopeConsume}},
		{Name: "ops", Token: adminSecret, Scopes: []auth.Scope{auth.ScopeAdmin}},
		{Name: "orders-ops", Token: restrictedSecret, Scopes: []auth.Scope{auth.ScopeAdmin}, Topics: []string{"orders.>"}},
	})
	require.NoError(t, err)
	dir := t.TempDir()
	c := newCheckpointStore(10)
	b := setup(t, withCheckpoints(c, dir), func(cfg *setupConfig) { cfg.tokens = tokens })
	requireError(t, b.do(t, http.MethodGet, "/v1/backup", nil), http.StatusUnauthorized, "unauthenticated", "")
	for _, secret := range []string{pushSecret, consumeSecret, restrictedSecret} {
		requireError(t, b.do(t, http.MethodGet, "/v1/backup", nil, bearer(secret)...), http.StatusForbidden, "permission_denied", "")
	}
	require.Empty(t, c.calls(), "refused before any checkpoint")
	requireStatus(t, b.do(t, http.MethodGet, "/v1/backup", nil, bearer(adminSecret)...), http.StatusOK)
	requireEmptyDir(t, dir)
}
