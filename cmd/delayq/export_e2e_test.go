package main

import (
	"bufio"
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

	"github.com/delayq/delayq/backends/redisstore/redistest"
)

// exportedJob is a line of an export.
type exportedJob struct {
	ID          string          `json:"id"`
	Topic       string          `json:"topic"`
	Key         string          `json:"key"`
	Body        json.RawMessage `json:"body"`
	RunAt       string          `json:"run_at"`
	TTR         string          `json:"ttr"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
	Attempt     int             `json:"attempt"`
	State       string          `json:"state"`
	CreatedAt   string          `json:"created_at"`
	LastError   string          `json:"last_error"`
	History     json.RawMessage `json:"history"`
	Changes     json.RawMessage `json:"changes"`
}

// movedReserved makes want, a job exported reserved, what the store it
// moved to holds: ready at once (its run_at is the import's), its delivery
// in progress ended by the import as lease_expired.
func movedReserved(t *testing.T, want *exportedJob, got exportedJob) {
	t.Helper()
	if want.State != "reserved" {
		return
	}
	want.State, want.RunAt = "ready", got.RunAt
	var h []struct {
		Outcome string `json:"outcome"`
	}
	require.NoError(t, json.Unmarshal(got.History, &h))
	require.NotEmpty(t, h)
	require.Equal(t, "lease_expired", h[len(h)-1].Outcome)
	want.History = got.History
}

// parseExport reads an export into its jobs by id; an id twice fails.
func parseExport(t *testing.T, data []byte) map[string]exportedJob {
	t.Helper()
	jobs := map[string]exportedJob{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var j exportedJob
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&j), "%s", sc.Bytes())
		_, dup := jobs[j.ID]
		require.False(t, dup, "job %s exported twice", j.ID)
		jobs[j.ID] = j
	}
	require.NoError(t, sc.Err())
	return jobs
}

// TestE2EExportEmbeddedImportRedis moves 10 000 jobs, scheduled, ready,
// reserved and dead, from the embedded default to Redis with the CLI and
// checks that none is lost or duplicated and that each keeps its state (a
// reserved job becomes ready).
func TestE2EExportEmbeddedImportRedis(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	const (
		total    = 10000
		due      = 500 // pushed due; reserved of them are claimed and held
		reserved = 300
		dead     = 200 // pushed due on a max_attempts 1 topic, claimed and nacked
		later    = total - due - dead
		batch    = 1000
	)
	srcSrv := startServer(t, serveArgs(backendJetStream, t.TempDir())...)
	// A bound on the whole move, not a figure of speed: alone it takes
	// about 40 s under -race, and two CI runs beside the rest of the
	// package went past 55 s.
	deadline := time.Now().Add(3 * time.Minute)
	src := newCaller(t, srcSrv.HTTPURL)
	status, answer := src.call(http.MethodPut, "/v1/topics/mv.dead", map[string]any{"max_attempts": 1})
	require.True(t, status >= 200 && status < 300, "PUT topic: %d %s", status, answer)

	topicOf := map[string]string{}
	push := func(topic string, n int, runAt time.Time) {
		for b := 0; b < n; b += batch {
			jobs := make([]map[string]any, min(batch, n-b))
			for i := range jobs {
				k := len(topicOf) + i
				jobs[i] = map[string]any{
					"topic":  topic,
					"key":    fmt.Sprintf("k-%d", k),
					"body":   json.RawMessage(fmt.Sprintf(`{"n" : %d, "s":"<é&>" }`, k)),
					"run_at": runAt.UTC().Format(time.RFC3339Nano),
					"ttr":    "10m",
				}
			}
			var out struct {
				Results []struct {
					ID    string          `json:"id"`
					Error json.RawMessage `json:"error"`
				} `json:"results"`
			}
			src.callJSON(http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": jobs}, http.StatusOK, &out)
			require.Len(t, out.Results, len(jobs))
			for _, r := range out.Results {
				require.Empty(t, r.Error)
				topicOf[r.ID] = topic
			}
		}
	}
	push("mv.later", later, time.Now().Add(240*time.Hour))
	push("mv.due", due, time.Now().Add(-time.Minute))
	push("mv.dead", dead, time.Now().Add(-time.Minute))
	require.Len(t, topicOf, total)

	held := map[string]bool{}
	for len(held) < reserved {
		require.True(t, time.Now().Before(deadline), "claimed only %d", len(held))
		for _, d := range src.claim("mv.due", reserved-len(held), 5*time.Second) {
			held[d.ID] = true
		}
	}
	var killed []delivery
	for len(killed) < dead {
		require.True(t, time.Now().Before(deadline), "claimed only %d to kill", len(killed))
		killed = append(killed, src.claim("mv.dead", dead-len(killed), 5*time.Second)...)
	}
	for i, status := range src.nackAll(killed, "boom") {
		require.Equal(t, http.StatusNoContent, status, "nack %s", killed[i].ID)
	}
	src.requireCounts("mv.later", `{"scheduled":9300,"ready":0,"reserved":0,"done":0,"dead":0,"cancelled":0}`)
	src.requireCounts("mv.due", `{"scheduled":0,"ready":200,"reserved":300,"done":0,"dead":0,"cancelled":0}`)
	src.requireCounts("mv.dead", `{"scheduled":0,"ready":0,"reserved":0,"done":0,"dead":200,"cancelled":0}`)

	code, out, stderr := runCLI(t, "export", "--server", srcSrv.HTTPURL)
	require.Equal(t, 0, code, stderr)
	file := filepath.Join(t.TempDir(), "backup.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(out), 0o600))
	exported := parseExport(t, []byte(out))
	require.Len(t, exported, total)
	require.NotContains(t, out, "lease")
	for id, topic := range topicOf {
		j, ok := exported[id]
		require.True(t, ok, "job %s not exported", id)
		require.Equal(t, topic, j.Topic)
		want := map[string]string{"mv.later": "scheduled", "mv.due": "ready", "mv.dead": "dead"}[topic]
		if held[id] {
			want = "reserved"
		}
		require.Equal(t, want, j.State, id)
	}
	t.Logf("exported %d jobs (%d bytes) at %s", len(exported), len(out), time.Until(deadline))

	rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(rs.Kill)
	dstSrv := startServer(t, "--backend", "redis", "--redis-url", rs.URL(), "--http", "127.0.0.1:0", "--nats-listen", "off")
	dst := newCaller(t, dstSrv.HTTPURL)

	code, out, stderr = runCLI(t, "import", file, "--server", dstSrv.HTTPURL)
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, `{"imported":10000,"skipped":0,"failed":0,"errors":[]}`, out)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	code, out, stderr = runCLIWith(t, []string{"DELAYQ_SERVER=" + dstSrv.HTTPURL}, string(data), "import", "-")
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, `{"imported":0,"skipped":10000,"failed":0,"errors":[]}`, out, "a second import changes nothing")

	dst.requireCounts("mv.later", `{"scheduled":9300,"ready":0,"reserved":0,"done":0,"dead":0,"cancelled":0}`)
	dst.requireCounts("mv.due", `{"scheduled":0,"ready":500,"reserved":0,"done":0,"dead":0,"cancelled":0}`)
	dst.requireCounts("mv.dead", `{"scheduled":0,"ready":0,"reserved":0,"done":0,"dead":200,"cancelled":0}`)

	// Exactly the same ids, each in its state, the reserved ones ready.
	code, out, stderr = runCLI(t, "export", "--server", dstSrv.HTTPURL)
	require.Equal(t, 0, code, stderr)
	moved := parseExport(t, []byte(out))
	require.Len(t, moved, total)
	for id, want := range exported {
		got, ok := moved[id]
		require.True(t, ok, "job %s lost", id)
		movedReserved(t, &want, got)
		require.Equal(t, want, got)
	}

	// A sample over GET, and the due jobs claimed on Redis.
	n := 0
	for id, want := range exported {
		if n++; n > 50 && !held[id] {
			continue
		}
		var got exportedJob
		status, answer := dst.call(http.MethodGet, "/v1/jobs/"+id, nil)
		require.Equal(t, http.StatusOK, status, "%s", answer)
		require.Contains(t, string(answer), `"body":`+string(want.Body)+`,`, "the body byte for byte")
		var m map[string]any
		require.NoError(t, json.Unmarshal(answer, &m))
		require.Contains(t, m, "trail")
		delete(m, "updated_at")
		delete(m, "trail") // the changes, kept by the move, and the history
		b, _ := json.Marshal(m)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&got), "%s", answer)
		movedReserved(t, &want, got)
		// Read back through a map, whose keys come out sorted.
		require.JSONEq(t, string(want.Body), string(got.Body))
		if want.History != nil || got.History != nil {
			require.JSONEq(t, string(want.History), string(got.History))
		}
		got.Body, got.History, got.Changes = want.Body, want.History, want.Changes
		require.Equal(t, want, got)
	}
	claimed := map[string]bool{}
	for len(claimed) < due {
		require.True(t, time.Now().Before(deadline), "claimed only %d on Redis", len(claimed))
		got := dst.claim("mv.due", due-len(claimed), 5*time.Second)
		for _, d := range got {
			require.False(t, claimed[d.ID], "claimed %s twice", d.ID)
			require.Equal(t, "mv.due", topicOf[d.ID])
			want := 1
			if held[d.ID] {
				want = 2 // its first attempt was made before the move
			}
			require.Equal(t, want, d.Attempt, d.ID)
			claimed[d.ID] = true
		}
	}
	require.Empty(t, dst.claim("mv.later", 10, 0))
	require.Empty(t, dst.claim("mv.dead", 10, 0))
	require.True(t, time.Now().Before(deadline), "the move took too long")
}

// TestE2EImportErrors checks the exit codes of export and import.
func TestE2EImportErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off")
	server := "--server=" + srv.HTTPURL

	code, _, stderr := runCLI(t, "import", filepath.Join(t.TempDir(), "missing.ndjson"), server)
	require.Equal(t, 2, code, stderr)
	code, _, stderr = runCLI(t, "import", "a", "b", server)
	require.Equal(t, 2, code, stderr)
	code, _, stderr = runCLI(t, "export", "extra", server)
	require.Equal(t, 2, code, stderr)

	// A bad line fails alone: the good one is imported, the answer
	// printed, and the command exits 1.
	now := time.Now().UTC().Format(time.RFC3339)
	good := `{"id":"ok-1","topic":"imp.cli","body":{"a":1},"run_at":"` + now + `","ttr":"30s","max_attempts":3,"state":"ready"}`
	code, out, stderr := runCLIWith(t, nil, good+"\n{\"id\": 7}\n", "import", server)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "delayq: 1 lines failed (1 jobs imported, 0 skipped)")
	var a struct {
		Imported, Failed int
		Errors           []struct{ Line int }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &a), out)
	require.Equal(t, 1, a.Imported)
	require.Equal(t, 1, a.Failed)
	require.Equal(t, 2, a.Errors[0].Line)

	code, out, stderr = runCLI(t, "export", server)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"id":"ok-1"`)

	srv.signal(syscall.SIGTERM, 10*time.Second)
	for _, args := range [][]string{{"export"}, {"import", "-"}} {
		code, out, stderr = runCLI(t, append(args, server)...)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "cannot reach")
		require.Empty(t, out)
	}
}

// requireCounts checks a topic's counts.
func (c *apiCaller) requireCounts(topic, want string) {
	c.t.Helper()
	var out struct {
		Counts json.RawMessage `json:"counts"`
	}
	c.callJSON(http.MethodGet, "/v1/topics/"+topic, nil, http.StatusOK, &out)
	require.JSONEq(c.t, want, string(out.Counts), topic)
}

// nackAll nacks deliveries with an error, a few at a time, and returns the
// status of each nack (0 when the request failed).
func (c *apiCaller) nackAll(ds []delivery, reason string) []int {
	statuses := make([]int, len(ds))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			body := fmt.Sprintf(`{"lease": %q, "error": %q}`, d.Lease, reason)
			req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.base+"/v1/jobs/"+d.ID+"/nack", strings.NewReader(body))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.http.Do(req)
			if err != nil {
				return
			}
			_ = resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	return statuses
}
