package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestE2ERollingRestart restarts three instances of delayq on one backend
// (a Redis server, and a three-node NATS cluster) one after the other with
// SIGTERM, as a rolling upgrade does, while producers push through the
// instances that are up and consumers claim through them, work 100 ms on
// each job and ack through the instance they claimed from. Each instance
// drains first (claims refused, acks served), so no job answered 2xx is
// lost and none is delivered twice. DELAYQ_ROLLING_REPORT=FILE appends the
// figures to FILE.
func TestE2ERollingRestart(t *testing.T) {
	t.Parallel()
	onSharedBackends(t, func(t *testing.T, args ...string) {
		bin := binary(t)
		rollingRestart(t, rollout{from: bin, to: bin, hold: time.Second, env: "DELAYQ_ROLLING_REPORT"}, args...)
	})
}

// rollout is what rollingRestart does: start three instances of the
// binary from, restart each in turn on the binary to, and keep the load on
// for hold after each restart.
type rollout struct {
	from, to string
	hold     time.Duration
	// env names the variable of the file the report is appended to.
	env string
}

// mixedVersions checks that instances of two versions serving one backend
// read what the other writes: a topic's configuration and a schedule put
// through each are read through the other.
func mixedVersions(t *testing.T, a, b *serverProc) {
	t.Helper()
	for _, w := range []struct {
		name        string
		write, read *serverProc
	}{{"new-to-old", a, b}, {"old-to-new", b, a}} {
		topic := "e2e.mixed." + w.name
		newCaller(t, w.write.HTTPURL).callJSON(http.MethodPut, "/v1/topics/"+topic, map[string]any{"max_attempts": 9}, http.StatusOK, nil)
		newCaller(t, w.write.HTTPURL).callJSON(http.MethodPut, "/v1/schedules/e2e-mixed-"+w.name, map[string]any{
			"cron": "@every 1h", "topic": topic, "job": map[string]any{"body": w.name},
		}, http.StatusOK, nil)
		var cfg struct {
			MaxAttempts int `json:"max_attempts"`
		}
		newCaller(t, w.read.HTTPURL).callJSON(http.MethodGet, "/v1/topics/"+topic, nil, http.StatusOK, &cfg)
		require.Equal(t, 9, cfg.MaxAttempts, "%s: the topic's configuration", w.name)
		newCaller(t, w.read.HTTPURL).callJSON(http.MethodGet, "/v1/schedules/e2e-mixed-"+w.name, nil, http.StatusOK, nil)
	}
}

// rollingRestart runs the rolling restart of TestE2ERollingRestart as r
// says and returns the instances it left running (on r.to). It checks that
// a topic's configuration written through an instance of r.from is what
// the instances of r.to read.
func rollingRestart(t *testing.T, r rollout, args ...string) []*serverProc {
	const topic = "e2e.rolling"
	args = append(args, "--drain-timeout", "10s")
	srvs := make([]*serverProc, 3)
	for i := range srvs {
		srvs[i] = startServerBin(t, r.from, args...)
	}
	config := newCaller(t, srvs[0].HTTPURL)
	status, out := config.call(http.MethodPut, "/v1/topics/"+topic, map[string]any{"max_attempts": 7})
	require.Equal(t, http.StatusOK, status, "%s", out)
	hc := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	post := func(base, path string, body any) (int, []byte, error) { return postJSON(hc, base, path, body) }
	var (
		mu        sync.Mutex
		up        = [3]bool{true, true, true}
		urls      [3]string
		answered  = map[string]bool{}
		claimed   = map[string]int{}
		acked     = map[string]int{}
		refused   int // claims answered 503 while an instance drained
		ackFailed int
		// firstAckFailure is the answer of the first ack that failed.
		firstAckFailure string
	)
	for i, s := range srvs {
		urls[i] = s.HTTPURL
	}
	// pick returns the URL of instance i, or of the next one that is up.
	pick := func(i int) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		for k := range 3 {
			if j := (i + k) % 3; up[j] {
				return urls[j], true
			}
		}
		return "", false
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // 20 jobs a second, through the instances in turn
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			base, ok := pick(n % 3)
			if !ok {
				continue
			}
			jobs := make([]map[string]any, 5)
			for k := range jobs {
				jobs[k] = map[string]any{"topic": topic, "body": n, "ttr": "5s"}
			}
			status, out, err := post(base, "/v1/jobs/batch", map[string]any{"jobs": jobs})
			if err != nil || status != http.StatusOK {
				continue
			}
			var res struct {
				Results []struct{ ID string } `json:"results"`
			}
			if json.Unmarshal(out, &res) == nil {
				mu.Lock()
				for _, r := range res.Results {
					if r.ID != "" {
						answered[r.ID] = true
					}
				}
				mu.Unlock()
			}
		}
	})
	for i := range 3 { // a consumer per instance slot
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				base, ok := pick(i)
				if !ok {
					time.Sleep(50 * time.Millisecond) // every instance is down: wait for one
					continue
				}
				status, out, err := post(base, "/v1/topics/"+topic+"/claim", map[string]any{"max": 5, "wait": "500ms"})
				if err != nil || status != http.StatusOK {
					if status == http.StatusServiceUnavailable {
						mu.Lock()
						refused++
						mu.Unlock()
					}
					time.Sleep(50 * time.Millisecond) // draining or restarting: go elsewhere next time
					continue
				}
				var res struct {
					Jobs []struct{ ID, Lease string } `json:"jobs"`
				}
				if json.Unmarshal(out, &res) != nil {
					continue
				}
				mu.Lock()
				for _, j := range res.Jobs {
					claimed[j.ID]++
				}
				mu.Unlock()
				for _, j := range res.Jobs {
					time.Sleep(100 * time.Millisecond) // the consumer's work
					status, out, err := post(base, "/v1/jobs/"+j.ID+"/ack", map[string]any{"lease": j.Lease})
					mu.Lock()
					if err == nil && status == http.StatusNoContent {
						acked[j.ID]++
					} else {
						ackFailed++
						if firstAckFailure == "" {
							firstAckFailure = fmt.Sprintf("%d %s %v", status, out, err)
						}
					}
					mu.Unlock()
				}
			}
		})
	}

	time.Sleep(2 * time.Second) // load before the first restart
	for i := range srvs {
		mu.Lock()
		up[i] = false // the load balancer takes it out as it drains
		mu.Unlock()
		require.Equal(t, 0, srvs[i].signal(syscall.SIGTERM, 30*time.Second), "instance %d exits 0", i)
		require.Contains(t, srvs[i].log(), "msg=drained")
		srvs[i] = startServerBin(t, r.to, args...)
		mu.Lock()
		urls[i], up[i] = srvs[i].HTTPURL, true
		mu.Unlock()
		if i == 0 && r.from != r.to {
			mixedVersions(t, srvs[0], srvs[2])
		}
		time.Sleep(r.hold) // load on the new instance before the next restart
	}
	close(stop)
	wg.Wait()

	// What is left goes out through the first instance.
	api := newCaller(t, srvs[0].HTTPURL)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		left := 0
		for id := range answered {
			if acked[id] == 0 {
				left++
			}
		}
		mu.Unlock()
		if left == 0 {
			break
		}
		for _, d := range api.claim(topic, 100, time.Second) {
			mu.Lock()
			claimed[d.ID]++
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
	lost, twice := 0, 0
	var lostJobs []string // what the API says of each lost job
	for id := range answered {
		if acked[id] == 0 {
			lost++
			_, out := api.call(http.MethodGet, "/v1/jobs/"+id, nil)
			lostJobs = append(lostJobs, fmt.Sprintf("claimed %d times: %s", claimed[id], out))
		}
		if claimed[id] > 1 {
			twice++
		}
	}
	report := fmt.Sprintf("%s: 3 instances restarted in turn: %d jobs answered 2xx, lost %d, delivered more than once %d; claims refused while draining %d, acks that failed %d",
		subtestName(t), len(answered), lost, twice, refused, ackFailed)
	logReport(t, r.env, report)
	require.Zero(t, lost, "jobs answered 2xx never acknowledged:\n%s", strings.Join(lostJobs, "\n"))
	require.Zero(t, twice, "jobs delivered more than once")
	require.Zero(t, ackFailed, "acks of deliveries made before the drain are served; the first that failed: %s", firstAckFailure)
	status, out = api.call(http.MethodGet, "/v1/topics/"+topic, nil)
	require.Equal(t, http.StatusOK, status, "%s", out)
	var cfg struct {
		MaxAttempts int `json:"max_attempts"`
	}
	require.NoError(t, json.Unmarshal(out, &cfg))
	require.Equal(t, 7, cfg.MaxAttempts, "the configuration written before the restarts: %s", out)
	return srvs
}
