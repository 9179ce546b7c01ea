package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestE2EBackupRestore takes `delayq backup DIR` of a service on the local
// default while a producer keeps pushing, with jobs in every state, then
// starts a second service on DIR and checks that every job answered before
// the backup began is there in its state, with the topic configurations,
// and that the first service never stopped.
func TestE2EBackupRestore(t *testing.T) {
	t.Parallel()
	srcData := t.TempDir()
	srcSrv := startServer(t, defaultArgs(srcData)...)
	src := newCaller(t, srcSrv.HTTPURL)
	deadline := time.Now().Add(55 * time.Second)

	// Topic configurations.
	conf := map[string]any{"ttr": "45s", "max_attempts": 7, "backoff": map[string]any{"initial": "2s", "max": "1m", "factor": 3}}
	status, answer := src.call(http.MethodPut, "/v1/topics/bk.conf", conf)
	require.True(t, status >= 200 && status < 300, "PUT topic: %d %s", status, answer)
	status, answer = src.call(http.MethodPut, "/v1/topics/bk.dead", map[string]any{"max_attempts": 1})
	require.True(t, status >= 200 && status < 300, "PUT topic: %d %s", status, answer)

	// Jobs in every state; want is the state each must have after the
	// restore.
	want := map[string]string{}
	bodies, keys := map[string]string{}, map[string]string{}
	push := func(topic string, n int, runAt time.Time, ttr string) []string {
		jobs := make([]map[string]any, n)
		for i := range jobs {
			jobs[i] = map[string]any{
				"topic":  topic,
				"key":    fmt.Sprintf("k-%s-%d", topic, i),
				"body":   json.RawMessage(fmt.Sprintf(`{"topic":%q,"n":%d}`, topic, i)),
				"run_at": runAt.UTC().Format(time.RFC3339Nano),
				"ttr":    ttr,
			}
		}
		var out struct {
			Results []struct {
				ID    string          `json:"id"`
				Error json.RawMessage `json:"error"`
			} `json:"results"`
		}
		src.callJSON(http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": jobs}, http.StatusOK, &out)
		ids := make([]string, len(out.Results))
		for i, r := range out.Results {
			require.Empty(t, r.Error)
			ids[i] = r.ID
			bodies[r.ID], keys[r.ID] = string(jobs[i]["body"].(json.RawMessage)), jobs[i]["key"].(string)
		}
		return ids
	}
	claimAll := func(topic string, n int) []delivery {
		var got []delivery
		for len(got) < n {
			require.True(t, time.Now().Before(deadline), "claimed %d of %d", len(got), n)
			got = append(got, src.claim(topic, n-len(got), 5*time.Second)...)
		}
		return got
	}
	for _, id := range push("bk.sched", 200, time.Now().Add(time.Hour), "30s") {
		want[id] = "scheduled"
	}
	for _, id := range push("bk.conf", 50, time.Now().Add(2*time.Hour), "45s") {
		want[id] = "scheduled"
	}
	for _, id := range push("bk.ready", 100, time.Now().Add(-time.Minute), "30s") {
		want[id] = "ready"
	}
	push("bk.held", 20, time.Now().Add(-time.Minute), "10m")
	held := claimAll("bk.held", 20)
	for _, d := range held {
		want[d.ID] = "reserved"
	}
	push("bk.dead", 10, time.Now().Add(-time.Minute), "30s")
	for i, status := range src.nackAll(claimAll("bk.dead", 10), "boom") {
		require.Equal(t, http.StatusNoContent, status, "nack %d", i)
	}
	push("bk.done", 10, time.Now().Add(-time.Minute), "30s")
	acked := claimAll("bk.done", 10)
	for i, status := range src.ackAll(acked) {
		require.Equal(t, http.StatusNoContent, status, "ack %d", i)
	}
	for _, id := range push("bk.cancel", 5, time.Now().Add(time.Hour), "30s") {
		src.callJSON(http.MethodDelete, "/v1/jobs/"+id, nil, http.StatusNoContent, nil)
		want[id] = "cancelled"
	}
	var dead struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	src.callJSON(http.MethodGet, "/v1/topics/bk.dead/dead", nil, http.StatusOK, &dead)
	require.Len(t, dead.Jobs, 10)
	for _, j := range dead.Jobs {
		want[j.ID] = "dead"
	}
	for _, d := range acked {
		want[d.ID] = "done"
	}
	srcCounts := map[string]json.RawMessage{}
	for _, topic := range []string{"bk.sched", "bk.conf", "bk.ready", "bk.held", "bk.dead", "bk.done", "bk.cancel"} {
		var out struct {
			Counts json.RawMessage `json:"counts"`
		}
		src.callJSON(http.MethodGet, "/v1/topics/"+topic, nil, http.StatusOK, &out)
		srcCounts[topic] = out.Counts
	}
	var confBefore map[string]any
	src.callJSON(http.MethodGet, "/v1/topics/bk.conf", nil, http.StatusOK, &confBefore)

	// A producer keeps pushing, over its own connections, until after the
	// backup.
	var (
		mu       sync.Mutex
		answered []string
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	producer := newCaller(t, srcSrv.HTTPURL)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			body, _ := json.Marshal(map[string]any{"topic": "bk.live", "body": map[string]int{"n": n}, "delay": "1h"})
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srcSrv.HTTPURL+"/v1/jobs", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := producer.http.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			var out struct {
				ID string `json:"id"`
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			_ = resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusCreated {
				t.Errorf("push during the backup: %d %v", resp.StatusCode, err)
				return
			}
			mu.Lock()
			answered = append(answered, out.ID)
			mu.Unlock()
		}
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answered) >= 50
	}, 20*time.Second, 5*time.Millisecond, "the producer pushes")
	mu.Lock()
	before := append([]string(nil), answered...)
	mu.Unlock()

	dir := filepath.Join(t.TempDir(), "backup")
	code, stdout, stderr := runCLI(t, "backup", dir, "--server", srcSrv.HTTPURL)
	require.Equal(t, 0, code, stderr)
	mu.Lock()
	during := len(answered) - len(before)
	mu.Unlock()
	close(stop)
	wg.Wait()
	t.Logf("backup: %s; %d jobs pushed during it", strings.TrimSpace(stdout), during)
	var sum struct {
		Dir   string `json:"dir"`
		Files int    `json:"files"`
		Bytes int64  `json:"bytes"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &sum), stdout)
	require.Equal(t, dir, sum.Dir)
	require.Positive(t, sum.Files)
	format, err := os.ReadFile(filepath.Join(dir, formatFile))
	require.NoError(t, err)
	require.Equal(t, formats[backendLocal], string(format))
	require.DirExists(t, filepath.Join(dir, localDir))
	info, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	// The source never stopped, and left nothing of the backup behind.
	var got struct {
		State string `json:"state"`
	}
	src.callJSON(http.MethodGet, "/v1/jobs/"+before[0], nil, http.StatusOK, &got)
	require.Equal(t, "scheduled", got.State)
	tmp, err := os.ReadDir(filepath.Join(srcData, backupTmpDir))
	require.NoError(t, err)
	require.Empty(t, tmp, "the backup's directory is removed")
	// A second backup into the same, now full, directory is refused.
	code, _, stderr = runCLI(t, "backup", dir, "--server", srcSrv.HTTPURL)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "is not empty")

	// A second service on the backup, on other ports.
	dstSrv := startServer(t, defaultArgs(dir)...)
	dst := newCaller(t, dstSrv.HTTPURL)
	for _, id := range before {
		want[id] = "scheduled"
	}
	for id, state := range want {
		var j struct {
			ID    string          `json:"id"`
			State string          `json:"state"`
			Body  json.RawMessage `json:"body"`
			Key   string          `json:"key"`
		}
		status, answer := dst.call(http.MethodGet, "/v1/jobs/"+id, nil)
		require.Equal(t, http.StatusOK, status, "job %s (%s) answered before the backup: %s", id, state, answer)
		require.NoError(t, json.Unmarshal(answer, &j))
		if body, ok := bodies[id]; ok {
			require.JSONEq(t, body, string(j.Body), id)
			require.Equal(t, keys[id], j.Key, id)
		}
		if state == "reserved" {
			// Reserved with its lease until the lease expires, then ready.
			require.Contains(t, []string{"reserved", "ready"}, j.State, id)
			continue
		}
		require.Equal(t, state, j.State, id)
	}
	for topic, counts := range srcCounts {
		dst.requireCounts(topic, string(counts))
	}
	var confAfter map[string]any
	dst.callJSON(http.MethodGet, "/v1/topics/bk.conf", nil, http.StatusOK, &confAfter)
	delete(confBefore, "counts")
	delete(confAfter, "counts")
	require.Equal(t, confBefore, confAfter)
	var deadTopic struct {
		MaxAttempts int `json:"max_attempts"`
	}
	dst.callJSON(http.MethodGet, "/v1/topics/bk.dead", nil, http.StatusOK, &deadTopic)
	require.Equal(t, 1, deadTopic.MaxAttempts)

	// The restored service takes over: a delivery held at the backup is
	// acked with its lease, the ready jobs are claimed, the dead ones
	// requeued.
	for i, status := range dst.ackAll(held) {
		require.Equal(t, http.StatusNoContent, status, "ack of held delivery %s on the restore", held[i].ID)
	}
	var claimed int
	for claimed < 100 {
		require.True(t, time.Now().Before(deadline), "claimed %d ready jobs on the restore", claimed)
		claimed += len(dst.claim("bk.ready", 100-claimed, 5*time.Second))
	}
	dst.callJSON(http.MethodGet, "/v1/topics/bk.dead/dead", nil, http.StatusOK, &dead)
	require.Len(t, dead.Jobs, 10)
	dst.callJSON(http.MethodPost, "/v1/jobs/"+dead.Jobs[0].ID+"/requeue", nil, http.StatusNoContent, nil)
	// The source is untouched by what happened on the restore.
	src.requireCounts("bk.held", string(srcCounts["bk.held"]))
	t.Logf("backed up and restored in %s", time.Since(deadline.Add(-55*time.Second)).Round(time.Millisecond))
	require.True(t, time.Now().Before(deadline), "the test took too long")
}

// TestE2EBackupErrors checks what `delayq backup` refuses and how it exits:
// a backend without backups answers 501 and nothing is written, a token
// without the admin scope is refused, a directory that is not empty is a
// usage error, the service gone is exit 1.
func TestE2EBackupErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off")
	server := "--server=" + srv.HTTPURL
	dir := filepath.Join(t.TempDir(), "backup")

	code, stdout, stderr := runCLI(t, "backup", dir, server)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "delayq: unimplemented: backup is not supported by this backend")
	require.Empty(t, stdout)
	require.NoDirExists(t, dir)

	code, _, stderr = runCLI(t, "backup", server)
	require.Equal(t, 2, code, stderr)
	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o600))
	code, _, stderr = runCLI(t, "backup", full, server)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "is not empty")

	// With tokens: an admin token is needed.
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte(`- name: producer
  token: producer-secret-0123456789
  scopes: [push]
- name: ops
  token: admin-secret-0123456789
  scopes: [admin]
`), 0o600))
	data := t.TempDir()
	local := startServer(t, append(defaultArgs(data), "--tokens-file", tokens)...)
	code, _, stderr = runCLI(t, "backup", dir, "--server", local.HTTPURL)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "delayq: unauthenticated: ")
	code, _, stderr = runCLIWith(t, []string{"DELAYQ_TOKEN=producer-secret-0123456789"}, "", "backup", dir, "--server", local.HTTPURL)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "delayq: permission_denied: ")
	require.NoDirExists(t, dir)
	code, stdout, stderr = runCLIWith(t, []string{"DELAYQ_TOKEN=admin-secret-0123456789"}, "", "backup", dir, "--server", local.HTTPURL)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"files":`)
	require.FileExists(t, filepath.Join(dir, formatFile))

	srv.signal(syscall.SIGTERM, 10*time.Second)
	code, _, stderr = runCLI(t, "backup", filepath.Join(t.TempDir(), "gone"), server)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "cannot reach")
}
