package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/pebblestore/disktest"
)

// TestE2EDiskFull runs delayq serve, on the local default and on the
// jetstream backend, with its data on a tmpfs (local: 40 MiB, jetstream:
// 160 MiB) that a filler file holds all but 28 MiB of (with the reserve),
// while two producers push batches of 10 jobs of 16 KiB (one due 2 s
// later) as fast as they are answered and a consumer claims and
// acknowledges. The disk fills within seconds: pushes must then be
// answered 503 unavailable, at once, saying the storage is full, while the
// consumer's claims and acks and the reads go on and /readyz answers 503
// saying why; the process must not crash. The test then deletes the
// filler: intake must come back by itself, without a restart, and every
// job answered 2xx must be acknowledged. DELAYQ_DISKFULL_REPORT=FILE
// appends the figures to FILE (docs/reliability.md).
func TestE2EDiskFull(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{backendLocal, backendJetStream} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testDiskFull(t, backend)
		})
	}
}

// diskFullPush is what one batch push got.
type diskFullPush struct {
	at      time.Time
	latency time.Duration
	status  int // 0: no answer
	code    string
	message string
	ids     []string // answered 2xx
}

func testDiskFull(t *testing.T, backend string) {
	const (
		topic     = "e2e.diskfull"
		batch     = 10
		bodyBytes = 16 << 10
	)
	// The local store fills 28 MiB of a 40 MiB disk (its reserve a tenth:
	// 4 MiB). nats-server writes in blocks of 4 MiB and a compaction
	// rewrites up to half of one, so the jetstream store's low mark, half
	// its reserve, needs a disk of 160 MiB (a 16 MiB reserve) to be more
	// than that; 28 MiB fill it there too, down to the low mark.
	disk, fill := int64(40<<20), int64(12<<20)
	if backend == backendJetStream {
		disk, fill = 160<<20, 108<<20
	}
	mnt := disktest.Mount(t, disk)
	filler := filepath.Join(mnt, "filler")
	disktest.Fill(t, filler, fill)
	args := []string{"--backend", backend, "--data", filepath.Join(mnt, "data"), "--http", "127.0.0.1:0", "--nats-listen", "off"}
	srv := startServer(t, args...)
	hc := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)

	var (
		mu      sync.Mutex
		pushes  []diskFullPush
		claimed = map[string]int{}
		acked   = map[string]int{}
		ackedAt []time.Time
		// ackBatch is signalled after each batch of acks applied (a
		// signal pending is enough): the full phase waits on it.
		ackBatch = make(chan struct{}, 1)
	)
	start := time.Now()
	stopPush := make(chan struct{})
	var producers sync.WaitGroup
	for range 2 {
		producers.Go(func() {
			raw := make([]byte, bodyBytes*3/4)
			for {
				select {
				case <-stopPush:
					return
				default:
				}
				jobs := make([]map[string]any, batch)
				for i := range jobs {
					_, _ = rand.Read(raw) // incompressible
					jobs[i] = map[string]any{"topic": topic, "body": base64.StdEncoding.EncodeToString(raw), "ttr": "5s"}
				}
				// One job of each batch comes due 2 s later, so that there is
				// work to claim and acknowledge while the disk is full even
				// when the consumer kept up with intake before.
				jobs[0]["delay"] = "2s"
				p := diskFullPush{at: time.Now()}
				status, answer, err := postJSON(hc, srv.HTTPURL, "/v1/jobs/batch", map[string]any{"jobs": jobs})
				p.latency, p.status = time.Since(p.at), status
				if err == nil {
					var out struct {
						Results []struct {
							ID string `json:"id"`
						} `json:"results"`
						Error struct{ Code, Message string } `json:"error"`
					}
					_ = json.Unmarshal(answer, &out)
					p.code, p.message = out.Error.Code, out.Error.Message
					if status == http.StatusOK {
						for _, r := range out.Results {
							if r.ID != "" {
								p.ids = append(p.ids, r.ID)
							}
						}
					}
				}
				mu.Lock()
				pushes = append(pushes, p)
				mu.Unlock()
				if status == http.StatusServiceUnavailable {
					time.Sleep(20 * time.Millisecond) // as a client honouring Retry-After would, sooner
				}
			}
		})
	}
	stopConsume := make(chan struct{})
	var consumer sync.WaitGroup
	consumer.Go(func() {
		claimAndAck(hc, srv.HTTPURL, topic, "500ms", stopConsume, func(ids []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				claimed[id]++
			}
		}, func(ids []string) {
			mu.Lock()
			for _, id := range ids {
				acked[id]++
				ackedAt = append(ackedAt, time.Now())
			}
			mu.Unlock()
			select {
			case ackBatch <- struct{}{}:
			default:
			}
		})
	})
	// firstPush returns the first push after since that got status.
	firstPush := func(since time.Time, status int) (diskFullPush, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range pushes {
			if p.at.After(since) && p.status == status {
				return p, true
			}
		}
		return diskFullPush{}, false
	}
	get := func(path string) (int, []byte) {
		resp, err := hc.Get(srv.HTTPURL + path)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}

	// The disk fills.
	var full diskFullPush
	require.Eventually(t, func() bool {
		var ok bool
		full, ok = firstPush(start, http.StatusServiceUnavailable)
		return ok
	}, 60*time.Second, 50*time.Millisecond, "the disk never filled")
	t.Logf("%s: first 503 %s after the start", backend, full.at.Sub(start).Round(time.Millisecond))

	// Full for 3 s at least: intake refused, the rest served. One-job pushes time
	// the refusal itself (a batch's time is mostly its upload).
	var probeLat []time.Duration
	probeStatus := map[int]int{}
	for range 20 {
		at := time.Now()
		status, _, err := postJSON(hc, srv.HTTPURL, "/v1/jobs", map[string]any{"topic": topic, "body": "probe"})
		require.NoError(t, err)
		probeLat = append(probeLat, time.Since(at))
		probeStatus[status]++
	}
	time.Sleep(max(3*time.Second-time.Since(full.at), 0)) // the full state lasts this long: the point of the phase
	// It lasts until a batch of acks was applied while full too: under
	// -race on a busy machine one round of the consumer (claim 100, ack
	// them) can outlast the 3 s.
	acksAfter := func(since time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, at := range ackedAt {
			if at.After(since) {
				n++
			}
		}
		return n
	}
	for ackWait := time.After(30 * time.Second); acksAfter(full.at) == 0; {
		select {
		case <-ackBatch:
		case <-ackWait:
			t.Fatal("no ack applied in 30 s while the disk was full")
		}
	}
	status, answer := get("/readyz")
	readyFull := fmt.Sprintf("%d %s", status, answer)
	mu.Lock()
	var someID string
	for _, p := range pushes {
		if len(p.ids) > 0 {
			someID = p.ids[0]
			break
		}
	}
	mu.Unlock()
	acksWhileFull := acksAfter(full.at)
	readStatus, _ := get("/v1/jobs/" + someID)

	// Space comes back.
	require.NoError(t, os.Remove(filler))
	freedAt := time.Now()
	var back diskFullPush
	recovered := assert.Eventually(t, func() bool {
		var ok bool
		back, ok = firstPush(freedAt, http.StatusOK)
		return ok
	}, 15*time.Second, 20*time.Millisecond, "intake never came back after space was freed")
	time.Sleep(time.Second) // pushes go on a moment after the recovery
	close(stopPush)
	producers.Wait()
	readyAfter, _ := get("/readyz")

	// Every job answered 2xx is acknowledged.
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, p := range pushes {
			for _, id := range p.ids {
				if acked[id] == 0 {
					out = append(out, id)
				}
			}
		}
		return out
	}
	// undelivered leaves out the jobs the service has as done: their ack's
	// answer was lost.
	undelivered := func() []string {
		var out []string
		for _, id := range missing() {
			if len(out) > 20 {
				return append(out, id)
			}
			status, answer := get("/v1/jobs/" + id)
			var j struct{ State string }
			if status != http.StatusOK || json.Unmarshal(answer, &j) != nil || j.State != "done" {
				out = append(out, id)
			}
		}
		return out
	}
	t.Logf("%s: pushes stopped %s after the start; %d jobs to deliver", backend, time.Since(start).Round(time.Millisecond), len(missing()))
	delivered := assert.Eventually(t, func() bool { return len(undelivered()) == 0 }, 30*time.Second, 200*time.Millisecond,
		"jobs answered 2xx and never delivered")
	t.Logf("%s: all delivered %s after the start", backend, time.Since(start).Round(time.Millisecond))
	close(stopConsume)
	consumer.Wait()
	select {
	case <-srv.Done():
		t.Errorf("delayq serve exited: %v", srv.Err())
	default:
	}

	lost := len(undelivered())
	mu.Lock()
	defer mu.Unlock()
	var (
		answered, refused, other int
		refusedLat               []time.Duration
		messages                 = map[string]int{}
	)
	for _, p := range pushes {
		switch p.status {
		case http.StatusOK:
			answered += len(p.ids)
		case http.StatusServiceUnavailable:
			refused++
			refusedLat = append(refusedLat, p.latency)
			messages[p.code+": "+p.message]++
		default:
			other++
			if other <= 3 {
				t.Logf("push answered %d %s: %s", p.status, p.code, p.message)
			}
		}
	}
	backAfter := "never"
	if recovered {
		backAfter = back.at.Sub(freedAt).Round(time.Millisecond).String() + " after"
	}
	report := fmt.Sprintf("#### disk full, %s\n\n", backend) +
		fmt.Sprintf("jobs answered 2xx: %d, lost: %d, delivered more than once: %d\n", answered, lost, countOver(claimed, 1)) +
		fmt.Sprintf("batch pushes: %d answered 503 (p50 / max %s), %d neither 200 nor 503; first 503 %s after the start\n",
			refused, quantiles(refusedLat), other, full.at.Sub(start).Round(time.Millisecond)) +
		fmt.Sprintf("one-job pushes while full: %v, p50 / max %s\n", probeStatus, quantiles(probeLat)) +
		fmt.Sprintf("while full: /readyz %s; GET of a job %d; %d acks applied after the first 503\n",
			strings.TrimSpace(readyFull), readStatus, acksWhileFull) +
		fmt.Sprintf("space freed %s after the first 503; first 2xx push %s; /readyz then %d\n",
			freedAt.Sub(full.at).Round(time.Millisecond), backAfter, readyAfter)
	for m, n := range messages {
		report += fmt.Sprintf("503 answer (%d): %s\n", n, m)
	}
	logReport(t, "DELAYQ_DISKFULL_REPORT", report)

	require.True(t, recovered && delivered)
	require.Zero(t, lost, "jobs answered 2xx and never delivered")
	require.Zero(t, other, "pushes answered neither 200 nor 503 (or not at all)")
	require.Equal(t, "unavailable: the server's storage is full (no space left on device): new jobs are refused until space is freed; claims, acks and reads still work; retry later", full.code+": "+full.message)
	require.Len(t, messages, 1, "every refused push says why")
	require.Equal(t, map[int]int{http.StatusServiceUnavailable: 20}, probeStatus)
	// At once: a flag the store checks, where a push the store cannot
	// answer waits out the breaker's call timeout (5 s); the bound leaves
	// room for -race on a busy machine (measured there: p50 56-72 ms).
	require.Less(t, probeLat[len(probeLat)/2], 250*time.Millisecond, "refused at once")
	require.Contains(t, readyFull, "503")
	require.Contains(t, readyFull, "storage is full")
	require.Equal(t, http.StatusOK, readStatus, "reads go on while full")
	require.Positive(t, acksWhileFull, "acks go on while full")
	require.Equal(t, http.StatusOK, readyAfter, "/readyz is green once space is back")
	require.NotContains(t, srv.log(), "panic")
}
