package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

// encJobs is how many jobs the encryption test pushes on each backend.
const encJobs = 4

// writeKeys writes a key file of the named keys (a fixed key per id), the
// first current, readable by its owner only.
func writeKeys(t *testing.T, path string, ids ...string) {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%s %s\n", id, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte(id[len(id)-1:]), 32)))
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
}

// TestE2EEncryptionAtRest runs the binary with --encryption-keys on each
// backend: what the store keeps (its files, Redis's keys) and an export
// hold no body, webhook secret or header value in clear, deliveries carry
// them in clear, and after a rotation (a new key first, delayq rekey) the
// old key can leave the key file (before it, a start without the old key
// is refused).
func TestE2EEncryptionAtRest(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{backendLocal, backendJetStream, "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testEncryptionAtRest(t, backend)
		})
	}
}

func testEncryptionAtRest(t *testing.T, backend string) {
	marker := "MARKER-" + backend + "-5e1f"
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("SECRET-"+marker))
	headerValue := "HEADER-" + marker
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	writeKeys(t, keys, "k1")
	args := serveArgs(backend, filepath.Join(dir, "data"))
	var rdb *redis.Client
	if backend == "redis" {
		rs := startRedis(t)
		args = []string{"--backend", "redis", "--redis-url", rs.URL(), "--data", filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--nats-listen", "off"}
		rdb = redis.NewClient(&redis.Options{Addr: rs.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
	}
	args = append(args, "--encryption-keys", keys)

	type call struct {
		body   []byte
		header http.Header
	}
	calls := make(chan call, 2*encJobs)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		calls <- call{body: body, header: r.Header.Clone()}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)

	srv := startServer(t, args...)
	api := newCaller(t, srv.HTTPURL)
	const topic = "enc.hooks"
	api.callJSON(http.MethodPut, "/v1/topics/"+topic, map[string]any{"delivery": map[string]any{
		"type": "webhook", "url": hook.URL, "secret": secret, "headers": map[string]string{"X-Marker": headerValue}}}, http.StatusOK, nil)
	// Paused, the jobs stay in the store until the end.
	api.callJSON(http.MethodPost, "/v1/topics/"+topic+"/pause", nil, http.StatusOK, nil)
	var ids []string
	for i := range encJobs {
		var pushed struct{ ID string }
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": topic, "body": map[string]any{"email": marker, "i": i}}, http.StatusCreated, &pushed)
		ids = append(ids, pushed.ID)
	}

	// The export holds ciphertext, but for the admin who asks.
	code, sealed, stderr := runCLI(t, "export", "--server", srv.HTTPURL)
	require.Equal(t, 0, code, stderr)
	require.Len(t, parseExport(t, []byte(sealed)), encJobs)
	require.NotContains(t, sealed, marker)
	code, plain, stderr := runCLI(t, "export", "--plaintext", "--server", srv.HTTPURL)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, plain, marker)

	// The store's own data: ids in clear (what is read is the data), no
	// body, secret or header value.
	data := storeData(t, backend, filepath.Join(dir, "data"), rdb)
	require.Contains(t, string(data), ids[0], "the scan reads the store's data")
	for _, clear := range []string{marker, secret, headerValue} {
		require.NotContains(t, string(data), clear)
	}

	// Rotation: k2 first, k1 still opening; rekey; then k1 goes. Before
	// the rekey, a start without k1 is refused: the store holds values
	// sealed with it.
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 20*time.Second))
	writeKeys(t, keys, "k2")
	code, _, stderr = runCLIWith(t, nil, "", append([]string{"serve"}, args...)...)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, `--encryption-keys: the key ring (keys k2) cannot decrypt what the store holds`)
	require.Contains(t, stderr, `sealed with key "k1", which is not in the key ring`)
	writeKeys(t, keys, "k2", "k1")
	srv = startServer(t, args...)
	code, out, stderr := runCLI(t, "rekey", "--server", srv.HTTPURL, "--limit", "2")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, fmt.Sprintf("pass 1: %d jobs read, %d re-encrypted, 0 changed meanwhile, 1 topics and schedules re-encrypted", encJobs, encJobs))
	require.Contains(t, out, "done: everything is encrypted with the current key")
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 20*time.Second))
	writeKeys(t, keys, "k2")
	srv = startServer(t, args...)
	api = newCaller(t, srv.HTTPURL)
	api.callJSON(http.MethodPost, "/v1/topics/"+topic+"/resume", nil, http.StatusOK, nil)

	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	for range encJobs {
		select {
		case c := <-calls:
			require.Contains(t, string(c.body), marker)
			require.Equal(t, headerValue, c.header.Get("X-Marker"))
			require.NoError(t, wh.Verify(c.body, c.header), "signed with the secret in clear")
		case <-time.After(15 * time.Second):
			t.Fatal("a job was not delivered within 15s")
		}
	}
}

// storeData returns what the store of backend keeps: every file under the
// local or jetstream data directory, or every value of every Redis key.
func storeData(t *testing.T, backend, dataDir string, rdb *redis.Client) []byte {
	t.Helper()
	var out bytes.Buffer
	if rdb == nil {
		sub := map[string]string{backendLocal: "local", backendJetStream: "jetstream"}[backend]
		err := filepath.WalkDir(filepath.Join(dataDir, sub), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			out.Write(b)
			return err
		})
		require.NoError(t, err)
		return out.Bytes()
	}
	ctx := t.Context()
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		out.WriteString(key)
		typ, err := rdb.Type(ctx, key).Result()
		require.NoError(t, err)
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, key).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, key).Result()
		case "list":
			v, err = rdb.LRange(ctx, key, 0, -1).Result()
		case "set":
			v, err = rdb.SMembers(ctx, key).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(ctx, key, "-", "+").Result()
		default:
			t.Fatalf("redis key %s of type %s", key, typ)
		}
		require.NoError(t, err)
		// %v, not JSON: JSON would escape what a value holds in clear.
		fmt.Fprintf(&out, "%v\n", v)
	}
	require.NoError(t, iter.Err())
	return out.Bytes()
}
