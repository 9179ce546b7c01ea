package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
)

// TestE2EKillLoop kills the service with SIGKILL at a random moment while
// producers push and a consumer claims and acks, and restarts it on the
// same data (the same Redis), DELAYQ_KILL_LOOP times (5 by default; 20 is
// the reliability figure, `DELAYQ_KILL_LOOP=20 go test -run TestE2EKillLoop
// ./cmd/delayq/`), on the local default, jetstream and redis backends. Then it delivers what is left: every job answered 2xx
// must be acknowledged once at least. Redeliveries are counted, not
// refused: delivery is at least once.
func TestE2EKillLoop(t *testing.T) {
	t.Parallel()
	kills := 5
	if n, err := strconv.Atoi(os.Getenv("DELAYQ_KILL_LOOP")); err == nil && n > 0 {
		kills = n
	}
	for _, backend := range []string{backendLocal, backendJetStream, "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			args := serveArgs(backend, t.TempDir())
			if backend == "redis" {
				// Redis itself stays up: the loop kills delayq.
				redistest.Require(t)
				rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
				require.NoError(t, err)
				t.Cleanup(rs.Kill)
				args = []string{"--backend", "redis", "--redis-url", rs.URL(), "--http", "127.0.0.1:0", "--nats-listen", "off"}
			}
			testKillLoop(t, args, kills)
		})
	}
}

func testKillLoop(t *testing.T, args []string, kills int) {
	const topic = "e2e.killloop"
	var (
		mu         sync.Mutex
		answered   = map[string]bool{} // pushes answered 2xx
		acked      = map[string]int{}  // acknowledgements per id
		unanswered int                 // pushes cut off by a kill
	)
	hc := &http.Client{Timeout: 5 * time.Second}
	post := func(url string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		resp, err := hc.Post(url, "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}
	// push pushes batches of jobs due within 300 ms until the server
	// stops answering.
	push := func(base string, stop <-chan struct{}) {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			jobs := make([]map[string]any, 20)
			for i := range jobs {
				jobs[i] = map[string]any{"topic": topic, "body": n, "delay": strconv.Itoa(rand.IntN(300)), "ttr": "2s"}
			}
			status, answer, err := post(base+"/v1/jobs/batch", map[string]any{"jobs": jobs})
			if err != nil || status != http.StatusOK {
				mu.Lock()
				unanswered += len(jobs)
				mu.Unlock()
				return
			}
			var out struct {
				Results []struct {
					ID string `json:"id"`
				} `json:"results"`
			}
			if json.Unmarshal(answer, &out) != nil {
				return
			}
			mu.Lock()
			for _, r := range out.Results {
				if r.ID != "" {
					answered[r.ID] = true
				}
			}
			mu.Unlock()
		}
	}
	// missing returns the jobs answered 2xx and never acknowledged; mu
	// must be held.
	missing := func() []string {
		var out []string
		for id := range answered {
			if acked[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	// consume claims and acks until the server stops answering or stop is
	// closed; after each ack, acked is called with mu held.
	consume := func(base string, stop <-chan struct{}, onAck func()) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			status, answer, err := post(base+"/v1/topics/"+topic+"/claim", map[string]any{"max": 50, "wait": "500ms"})
			if err != nil || status != http.StatusOK {
				return
			}
			var out struct {
				Jobs []delivery `json:"jobs"`
			}
			if json.Unmarshal(answer, &out) != nil {
				return
			}
			for _, d := range out.Jobs {
				status, _, err := post(base+"/v1/jobs/"+d.ID+"/ack", map[string]any{"lease": d.Lease})
				if err != nil {
					return
				}
				if status == http.StatusNoContent {
					mu.Lock()
					acked[d.ID]++
					onAck()
					mu.Unlock()
				}
			}
		}
	}

	start := time.Now()
	for k := range kills {
		srv := startServer(t, args...)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { push(srv.HTTPURL, stop) })
		}
		wg.Go(func() { consume(srv.HTTPURL, stop, func() {}) })
		time.Sleep(time.Duration(300+rand.IntN(1200)) * time.Millisecond) // the random moment of the kill
		require.Equal(t, -1, srv.signal(syscall.SIGKILL, 10*time.Second), "kill %d: killed by the signal", k+1)
		close(stop)
		wg.Wait()
		hc.CloseIdleConnections()
	}

	// The last run delivers what is left, until every answered job is
	// acknowledged or 20 s passed.
	srv := startServer(t, args...)
	stop, all := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		consume(srv.HTTPURL, stop, func() {
			if len(missing()) == 0 {
				once.Do(func() { close(all) })
			}
		})
	})
	mu.Lock()
	if len(missing()) == 0 {
		once.Do(func() { close(all) })
	}
	mu.Unlock()
	select {
	case <-all:
	case <-time.After(20 * time.Second): // what is left may be done already (below)
	}
	close(stop)
	wg.Wait()

	mu.Lock()
	redelivered := 0
	for _, n := range acked {
		redelivered += n - 1
	}
	stored := len(acked)
	for id := range acked {
		if answered[id] {
			stored--
		}
	}
	t.Logf("%s: %d kills in %s: %d jobs answered 2xx, %d acknowledged, %d acknowledged more than once (extra acks %d), %d pushes cut off by a kill (%d of them stored anyway)",
		args[1], kills, time.Since(start).Round(time.Millisecond), len(answered), len(acked), countOver(acked, 1), redelivered, unanswered, stored)
	notSeen := missing()
	mu.Unlock()
	// A job the service has as done was acknowledged, by an ack whose
	// answer the kill cut off: delivered, not lost.
	api := newCaller(t, srv.HTTPURL)
	var lost []string
	for _, id := range notSeen {
		var job struct {
			State string `json:"state"`
		}
		status, answer := api.call(http.MethodGet, "/v1/jobs/"+id, nil)
		if status == http.StatusOK && json.Unmarshal(answer, &job) == nil && job.State == "done" {
			continue
		}
		lost = append(lost, id)
		if len(lost) <= 5 {
			t.Logf("lost job %s: %d %s", id, status, answer)
		}
	}
	t.Logf("%d acks applied whose answer a kill cut off", len(notSeen)-len(lost))
	require.Empty(t, lost, fmt.Sprintf("%d of %d jobs answered 2xx were never delivered", len(lost), len(answered)))
}

// countOver returns how many values of m are over n.
func countOver(m map[string]int, n int) int {
	c := 0
	for _, v := range m {
		if v > n {
			c++
		}
	}
	return c
}
