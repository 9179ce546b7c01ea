package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore/natstest"
	"github.com/delayq/delayq/backends/redisstore/redistest"
)

// TestE2EInstanceKilled runs three instances of delayq on one backend (a
// Redis server, and a three-node NATS cluster) while producers push
// through every instance that is up and each instance has a consumer that
// claims through it and takes 100 ms per job before it acks. One instance
// is killed with SIGKILL under load. The jobs its consumer held come back
// through the survivors once their leases (ttr 2 s) expire, and no job is
// delivered again while a lease on it holds; intake goes on through the
// survivors; every job answered 2xx is acknowledged. DELAYQ_INSTANCES_REPORT=FILE
// appends the figures to FILE.
func TestE2EInstanceKilled(t *testing.T) {
	t.Parallel()
	onSharedBackends(t, testInstanceKilled)
}

// onSharedBackends runs test as parallel subtests on the backends several
// instances share, each given the serve flags of an instance: a
// redis-server ("redis"), a three-master Redis Cluster ("redis-cluster")
// and a three-node NATS cluster with R3 streams ("nats-cluster").
func onSharedBackends(t *testing.T, test func(t *testing.T, args ...string)) {
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		redistest.Require(t)
		rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
		require.NoError(t, err)
		t.Cleanup(rs.Kill)
		test(t, "--backend", "redis", "--redis-url", rs.URL(), "--http", "127.0.0.1:0", "--nats-listen", "off")
	})
	t.Run("redis-cluster", func(t *testing.T) {
		t.Parallel()
		redistest.Require(t)
		c, err := redistest.StartCluster(3, redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
		require.NoError(t, err)
		t.Cleanup(c.Stop)
		test(t, "--backend", "redis", "--redis-url", c.URL(), "--http", "127.0.0.1:0", "--nats-listen", "off")
	})
	t.Run("nats-cluster", func(t *testing.T) {
		t.Parallel()
		c := natstest.StartCluster(t, t.TempDir(), 3)
		t.Cleanup(func() {
			for i := range 3 {
				c.Kill(i)
			}
		})
		test(t, "--backend", "nats", "--nats-url", c.URLs(), "--nats-replicas", "3",
			"--http", "127.0.0.1:0", "--nats-listen", "off")
	})
}

// subtestName is the last element of t's name: the backend of a subtest of
// onSharedBackends.
func subtestName(t *testing.T) string {
	name := t.Name()
	return name[strings.LastIndexByte(name, '/')+1:]
}

// postJSON posts body as JSON to base+path and returns the answer.
func postJSON(hc *http.Client, base, path string, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	resp, err := hc.Post(base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// claimRecord is one delivery: when it was claimed, through which
// instance, and when its lease ran out.
type claimRecord struct {
	instance int
	at       time.Time
	expires  time.Time
}

func testInstanceKilled(t *testing.T, args ...string) {
	const (
		topic   = "e2e.instances"
		ttr     = 2 * time.Second
		victim  = 2
		work    = 100 * time.Millisecond
		perPush = 5
	)
	var srvs []*serverProc
	for range 3 {
		srvs = append(srvs, startServer(t, args...))
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	post := func(base, path string, body any) (int, []byte, error) { return postJSON(hc, base, path, body) }

	var (
		mu         sync.Mutex
		answered   = map[string]int{} // id -> the instance that answered 2xx
		claims     = map[string][]claimRecord{}
		acked      = map[string]int{}
		killedAt   time.Time
		pushedBy   [3]int // pushes answered 2xx per instance after the kill
		ackRefused int    // acks cut off by the kill
		victimHeld int    // jobs the killed instance's consumer holds
	)
	alive := func(i int) bool {
		mu.Lock()
		defer mu.Unlock()
		return i != victim || killedAt.IsZero()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Producers: a batch of 5 jobs due at once every 250 ms (20 a second,
	// less than the consumers take), through each instance that is up in
	// turn.
	wg.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			i := n % 3
			if !alive(i) {
				i = (i + 1) % 3
			}
			jobs := make([]map[string]any, perPush)
			for k := range jobs {
				jobs[k] = map[string]any{"topic": topic, "body": n, "ttr": ttr.String()}
			}
			status, out, err := post(srvs[i].HTTPURL, "/v1/jobs/batch", map[string]any{"jobs": jobs})
			if err != nil || status != http.StatusOK {
				continue
			}
			var res struct {
				Results []struct{ ID string } `json:"results"`
			}
			if json.Unmarshal(out, &res) != nil {
				continue
			}
			mu.Lock()
			for _, r := range res.Results {
				if r.ID != "" {
					answered[r.ID] = i
					if !killedAt.IsZero() {
						pushedBy[i]++
					}
				}
			}
			mu.Unlock()
		}
	})
	// Consumers, one per instance: claim 5, work 100 ms on each, ack.
	for i := range srvs {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !alive(i) {
					return // its instance is gone: its held jobs are left to their leases
				}
				status, out, err := post(srvs[i].HTTPURL, "/v1/topics/"+topic+"/claim", map[string]any{"max": 5, "wait": "500ms"})
				if err != nil || status != http.StatusOK {
					continue
				}
				var res struct {
					Jobs []struct {
						ID, Lease      string
						LeaseExpiresAt time.Time `json:"lease_expires_at"`
					} `json:"jobs"`
				}
				if json.Unmarshal(out, &res) != nil {
					continue
				}
				now := time.Now()
				mu.Lock()
				for _, j := range res.Jobs {
					claims[j.ID] = append(claims[j.ID], claimRecord{instance: i, at: now, expires: j.LeaseExpiresAt})
				}
				if i == victim {
					victimHeld += len(res.Jobs)
				}
				mu.Unlock()
				for _, j := range res.Jobs {
					time.Sleep(work) // the consumer's work on the job
					status, _, err := post(srvs[i].HTTPURL, "/v1/jobs/"+j.ID+"/ack", map[string]any{"lease": j.Lease})
					mu.Lock()
					if i == victim {
						victimHeld--
					}
					switch {
					case err == nil && status == http.StatusNoContent:
						acked[j.ID]++
					case err != nil:
						ackRefused++
					}
					mu.Unlock()
				}
			}
		})
	}

	time.Sleep(3 * time.Second) // load before the kill
	// The kill comes while the killed instance's consumer holds jobs, so
	// that their leases must come back through the survivors.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if victimHeld > 0 {
			killedAt = time.Now()
			return true
		}
		return false
	}, 20*time.Second, 5*time.Millisecond, "the killed instance's consumer never held a job")
	require.Equal(t, -1, srvs[victim].signal(syscall.SIGKILL, 10*time.Second))
	time.Sleep(3*ttr + time.Second) // load after it, past every lease it held
	close(stop)
	wg.Wait()

	// What is left goes out through a survivor.
	api := newCaller(t, srvs[0].HTTPURL)
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		var missing int
		for id := range answered {
			if acked[id] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		for _, d := range api.claim(topic, 100, time.Second) {
			mu.Lock()
			claims[d.ID] = append(claims[d.ID], claimRecord{instance: 0, at: time.Now()})
			mu.Unlock()
			if status, _ := api.call(http.MethodPost, "/v1/jobs/"+d.ID+"/ack", map[string]any{"lease": d.Lease}); status == http.StatusNoContent {
				mu.Lock()
				acked[d.ID]++
				mu.Unlock()
			}
		}
	}

	mu.Lock()
	defer mu.Unlock()
	var lost, early, redeliveredVictim, ackedUnanswered int
	var comeBack []time.Duration // from a victim's lease expiry to its job's next claim
	for id := range answered {
		if acked[id] == 0 {
			// A job the service has as done was acknowledged, by an ack
			// the kill cut off after it was applied: delivered, not lost.
			var job struct{ State string }
			status, answer := api.call(http.MethodGet, "/v1/jobs/"+id, nil)
			if status == http.StatusOK && json.Unmarshal(answer, &job) == nil && job.State == "done" {
				ackedUnanswered++
			} else {
				lost++
			}
		}
		cs := claims[id]
		for k := 1; k < len(cs); k++ {
			// The lease holds until its expiry: not delivered again before
			// (the stores' clocks and this test's differ by a few ms).
			if cs[k].at.Before(cs[k-1].expires.Add(-50 * time.Millisecond)) {
				early++
			}
			if cs[k-1].instance == victim {
				redeliveredVictim++
				comeBack = append(comeBack, cs[k].at.Sub(cs[k-1].expires))
			}
		}
	}
	report := fmt.Sprintf("%s: %d jobs answered 2xx, lost %d, delivered again while a lease held %d; %d held by the killed instance's consumer came back through the survivors (%s after their leases ran out, ttr %s); %d acks cut off by the kill, %d of them applied; pushes answered by each instance after the kill: %v",
		subtestName(t), len(answered), lost, early, redeliveredVictim, quantiles(comeBack), ttr, ackRefused, ackedUnanswered, pushedBy)
	logReport(t, "DELAYQ_INSTANCES_REPORT", report)
	require.Zero(t, lost, "jobs answered 2xx never acknowledged")
	require.Zero(t, early, "jobs delivered again while a lease on them held")
	require.Positive(t, ackRefused, "the killed instance's consumer held jobs at the kill")
	require.Equal(t, ackRefused-ackedUnanswered, redeliveredVictim, "the jobs the killed instance's consumer held come back")
	require.Positive(t, pushedBy[0], "intake goes on through the survivors")
	require.Positive(t, pushedBy[1], "intake goes on through the survivors")
	require.Zero(t, pushedBy[victim])
}
