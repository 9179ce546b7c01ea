package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore/natstest"
	"github.com/delayq/delayq/backends/redisstore/redistest"
)

// TestE2ENetworkFaults runs delayq against its backend (Redis, and a
// separate nats-server) through Toxiproxy, embedded, while a producer
// pushes 100 jobs a second and a consumer claims and acknowledges them:
// 300 ms of latency, a 10 s partition (the proxy disabled: connections
// refused and cut), connections reset mid-command, and a bandwidth limit,
// each followed by a pause to heal. No job answered 2xx may be lost;
// duplicates, the answers during each fault and the time to recover are
// reported (the figures of docs/reliability.md; DELAYQ_FAULTS_REPORT=FILE
// appends them to FILE as Markdown).
func TestE2ENetworkFaults(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		redistest.Require(t)
		rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
		require.NoError(t, err)
		t.Cleanup(rs.Kill)
		proxy := newToxiproxy(t, strings.TrimPrefix(rs.URL(), "redis://"))
		testNetworkFaults(t, proxy, "--backend", "redis", "--redis-url", "redis://"+proxy.Listen,
			"--http", "127.0.0.1:0", "--nats-listen", "off")
	})
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		ns := natstest.Start(t, natstest.Options{Dir: t.TempDir()})
		t.Cleanup(ns.Kill)
		proxy := newToxiproxy(t, strings.TrimPrefix(ns.URL(), "nats://"))
		testNetworkFaults(t, proxy, "--backend", "nats", "--nats-url", "nats://"+proxy.Listen,
			"--http", "127.0.0.1:0", "--nats-listen", "off")
	})
}

// newToxiproxy runs a Toxiproxy server in process, with one proxy on a
// free loopback port to upstream, removed at cleanup.
func newToxiproxy(t *testing.T, upstream string) *toxiclient.Proxy {
	t.Helper()
	return newToxiproxies(t, upstream, 1)[0]
}

// newToxiproxies runs a Toxiproxy server in process, with n proxies to
// upstream, each on a free loopback port of its own (one per instance, so
// that a fault of one leaves the others alone), removed at cleanup.
func newToxiproxies(t *testing.T, upstream string, n int) []*toxiclient.Proxy {
	t.Helper()
	// Toxics log through zerolog's global logger, at trace level.
	zerolog.SetGlobalLevel(zerolog.Disabled)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	api := httptest.NewServer(srv.Routes())
	t.Cleanup(func() {
		_ = srv.Collection.Clear()
		api.Close()
	})
	ps := make([]*toxiclient.Proxy, n)
	for i := range ps {
		p, err := toxiclient.NewClient(api.URL).CreateProxy(fmt.Sprintf("backend-%d", i), "127.0.0.1:0", upstream)
		require.NoError(t, err)
		ps[i] = p
	}
	return ps
}

// faultPhase is one step of the fault program: a fault applied for a
// while (or none: a pause to heal), then removed (or left: a fault that
// heals without help has no heal).
type faultPhase struct {
	name  string
	last  time.Duration
	apply func() error
	heal  func() error
	// untilAnswered, when set, makes the phase last, after apply, until a
	// push of it is answered 2xx, up to that long (the test fails past
	// it), and then last more.
	untilAnswered time.Duration
}

func toxic(p *toxiclient.Proxy, name, typ string, attrs toxiclient.Attributes) (apply, heal func() error) {
	return func() error {
			// Both directions: a request and its answer.
			if _, err := p.AddToxic(name+"-down", typ, "downstream", 1, attrs); err != nil {
				return err
			}
			_, err := p.AddToxic(name+"-up", typ, "upstream", 1, attrs)
			return err
		}, func() error {
			return errors.Join(p.RemoveToxic(name+"-down"), p.RemoveToxic(name+"-up"))
		}
}

// logReport logs a fault test's report and, when the variable env names a
// file, appends it there (the figures of docs/reliability.md).
func logReport(t *testing.T, env, report string) {
	t.Helper()
	t.Log("\n" + report)
	f := os.Getenv(env)
	if f == "" {
		return
	}
	out, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = out.WriteString(report + "\n")
	require.NoError(t, errors.Join(err, out.Close()))
}

func faultProgram(p *toxiclient.Proxy) []faultPhase {
	latency, latencyHeal := toxic(p, "latency", "latency", toxiclient.Attributes{"latency": 300})
	reset, resetHeal := toxic(p, "reset", "reset_peer", toxiclient.Attributes{"timeout": 100})
	slow, slowHeal := toxic(p, "bandwidth", "bandwidth", toxiclient.Attributes{"rate": 16}) // KB/s
	return []faultPhase{
		{name: "baseline", last: 2 * time.Second},
		{name: "latency 300 ms", last: 5 * time.Second, apply: latency, heal: latencyHeal},
		{name: "after latency", last: 3 * time.Second},
		{name: "partition 10 s", last: 10 * time.Second, apply: p.Disable, heal: p.Enable},
		{name: "after partition", last: 5 * time.Second},
		{name: "connections reset", last: 3 * time.Second, apply: reset, heal: resetHeal},
		{name: "after reset", last: 3 * time.Second},
		{name: "bandwidth 16 KB/s", last: 5 * time.Second, apply: slow, heal: slowHeal},
		{name: "after bandwidth", last: 3 * time.Second},
	}
}

// pushOutcome is what one push got.
type pushOutcome struct {
	phase   int
	id      string // when answered 2xx
	status  int    // 0: no answer
	latency time.Duration
	at      time.Time
}

func testNetworkFaults(t *testing.T, proxy *toxiclient.Proxy, args ...string) {
	srv := startServer(t, args...)
	program := faultProgram(proxy)
	run := runFaultProgram(t, srv, faultLoad{topic: "e2e.faults", program: program, settle: 120 * time.Second})
	require.Empty(t, run.lost, "jobs answered 2xx and never delivered")
	report := faultReport(args[1], program, run.outcomes, run.acked, run.claimed, run.healedAt) +
		fmt.Sprintf("acks applied whose answer a fault cut off: %d\n", run.cutOff)
	logReport(t, "DELAYQ_FAULTS_REPORT", report)
	require.NotEmpty(t, run.answered)
}

// faultLoad is the load and fault program of runFaultProgram.
type faultLoad struct {
	topic   string
	program []faultPhase
	// ttr of the jobs pushed; empty: the service's default.
	ttr string
	// settle bounds the wait, after the program, for every job answered
	// 2xx to be acknowledged.
	settle time.Duration
	// quiet, when set, ends that wait early once no acknowledgement came
	// for that long: for a fault that may lose jobs, which never come.
	quiet time.Duration
}

// faultRun is what runFaultProgram saw.
type faultRun struct {
	outcomes []pushOutcome
	answered map[string]bool   // jobs answered 2xx
	acked    map[string]int    // acknowledgements that succeeded, and acks whose answer was cut off
	claimed  map[string]int    // deliveries
	healedAt map[int]time.Time // phase -> when its fault was removed
	lost     []string          // answered 2xx, never acknowledged nor done
	cutOff   int               // acks applied whose answer a fault cut off
}

// runFaultProgram runs load.program against srv while a producer pushes
// 100 jobs a second, each due 200 ms later, and a consumer claims and
// acknowledges them, then delivers what is left (up to load.settle) and
// returns the pushes' outcomes and what was delivered and lost.
func runFaultProgram(t *testing.T, srv *serverProc, load faultLoad) faultRun {
	topic := load.topic
	hc := &http.Client{Timeout: 20 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	post := func(path string, body any) (int, []byte) {
		status, out, err := postJSON(hc, srv.HTTPURL, path, body)
		if err != nil {
			return 0, nil
		}
		return status, out
	}

	var (
		mu       sync.Mutex
		phase    int
		outcomes []pushOutcome
		acked    = map[string]int{}    // acknowledgements that succeeded
		claimed  = map[string]int{}    // deliveries
		healedAt = map[int]time.Time{} // phase -> when its fault was removed
		lastAck  = time.Now()
	)
	currentPhase := func() int {
		mu.Lock()
		defer mu.Unlock()
		return phase
	}
	stopPush := make(chan struct{})
	// answeredIn has the phase of a push answered 2xx; a full channel
	// drops it, and the next push answered 2xx tells again.
	answeredIn := make(chan int, 1)
	var pushers sync.WaitGroup
	// Producers: 100 jobs a second, each due 200 ms later, from 4
	// goroutines so that a push held by a fault does not hold the rate.
	for w := range 4 {
		pushers.Go(func() {
			tick := time.NewTicker(40 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stopPush:
					return
				case <-tick.C:
				}
				ph := currentPhase()
				start := time.Now()
				job := map[string]any{"topic": topic, "delay": "200ms", "body": map[string]any{"w": w, "n": n}}
				if load.ttr != "" {
					job["ttr"] = load.ttr
				}
				status, out := post("/v1/jobs", job)
				o := pushOutcome{phase: ph, status: status, latency: time.Since(start), at: start}
				if status == http.StatusCreated {
					var j struct{ ID string }
					if json.Unmarshal(out, &j) == nil {
						o.id = j.ID
					}
					select {
					case answeredIn <- ph:
					default:
					}
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		})
	}
	stopConsume := make(chan struct{})
	var consumer sync.WaitGroup
	consumer.Go(func() {
		claimAndAck(hc, srv.HTTPURL, topic, "1s", stopConsume, func(ids []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				claimed[id]++
			}
		}, func(ids []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				acked[id]++
				lastAck = time.Now()
			}
		})
	})

	for i, ph := range load.program {
		mu.Lock()
		phase = i
		mu.Unlock()
		if ph.apply != nil {
			require.NoError(t, ph.apply(), ph.name)
		}
		if ph.untilAnswered > 0 {
			deadline := time.After(ph.untilAnswered)
			for answered := false; !answered; {
				select {
				case p := <-answeredIn:
					answered = p == i
				case <-deadline:
					t.Fatalf("%s: no push answered 2xx within %s", ph.name, ph.untilAnswered)
				}
			}
		}
		time.Sleep(ph.last) // the fault lasts this long: the point of the phase
		if ph.heal != nil {
			require.NoError(t, ph.heal(), ph.name)
			mu.Lock()
			healedAt[i] = time.Now()
			mu.Unlock()
		}
	}
	close(stopPush)
	pushers.Wait()

	// Every job answered 2xx must come out, at least once.
	mu.Lock()
	answered := map[string]bool{}
	for _, o := range outcomes {
		if o.id != "" {
			answered[o.id] = true
		}
	}
	mu.Unlock()
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for id := range answered {
			if acked[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	// state reads a job's state from the service.
	state := func(id string) (int, []byte, string) {
		resp, err := hc.Get(srv.HTTPURL + "/v1/jobs/" + id)
		if err != nil {
			return 0, nil, ""
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		var j struct{ State string }
		_ = json.Unmarshal(out, &j)
		return resp.StatusCode, out, j.State
	}
	// undelivered returns the jobs answered 2xx and not acknowledged, but
	// for those the service has as done: acknowledged by an ack whose
	// answer a fault cut off (a batch of acks that failed may have been
	// applied in part).
	undelivered := func(all bool) []string {
		var out []string
		for _, id := range missing() {
			if len(out) > 20 && !all {
				return append(out, id) // many left: not yet the time to ask
			}
			if _, _, st := state(id); st != "done" {
				out = append(out, id)
			}
		}
		return out
	}
	deadline := time.Now().Add(load.settle)
	for len(undelivered(false)) > 0 && time.Now().Before(deadline) {
		mu.Lock()
		quiet := time.Since(lastAck)
		mu.Unlock()
		if load.quiet > 0 && quiet > load.quiet {
			break // what is left is not coming
		}
		time.Sleep(200 * time.Millisecond) // deliveries in flight: polled
	}
	lost := undelivered(true)
	for i, id := range lost {
		if i == 5 {
			break
		}
		status, out, _ := state(id)
		t.Logf("missing %s: %d %s", id, status, out)
	}
	close(stopConsume)
	consumer.Wait()

	lostSet := map[string]bool{}
	for _, id := range lost {
		lostSet[id] = true
	}
	mu.Lock()
	defer mu.Unlock()
	cutOff := 0
	for id := range answered {
		if acked[id] == 0 && !lostSet[id] {
			acked[id]++ // done on the service: an ack whose answer was lost
			cutOff++
		}
	}
	return faultRun{outcomes: outcomes, answered: answered, acked: acked, claimed: claimed,
		healedAt: healedAt, lost: lost, cutOff: cutOff}
}

// faultReport tabulates the pushes of each phase: answered 2xx, 503, other
// errors or none; latency of the 2xx and of the 503 answers; the time from
// each fault's removal to the first 2xx push; jobs lost (answered 2xx,
// never acknowledged) and delivered more than once.
func faultReport(backend string, program []faultPhase, outcomes []pushOutcome, acked, claimed map[string]int, healedAt map[int]time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#### %s\n\n", backend)
	b.WriteString("| phase | pushes | 2xx | 503 | other | 2xx p50 / max | 503 p50 / max | first 2xx after heal |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	answered, dup := 0, 0
	for i, ph := range program {
		var ok, unavailable []time.Duration
		other := 0
		for _, o := range outcomes {
			if o.phase != i {
				continue
			}
			switch {
			case o.status == http.StatusCreated:
				ok = append(ok, o.latency)
			case o.status == http.StatusServiceUnavailable:
				unavailable = append(unavailable, o.latency)
			default:
				other++
			}
		}
		healed := "-"
		if at, ok := healedAt[i]; ok {
			for _, o := range outcomes {
				if o.status == http.StatusCreated && o.at.After(at) {
					healed = o.at.Sub(at).Round(time.Millisecond).String()
					break
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s |\n", ph.name, len(ok)+len(unavailable)+other,
			len(ok), len(unavailable), other, quantiles(ok), quantiles(unavailable), healed)
	}
	lost := 0
	for _, o := range outcomes {
		if o.id == "" {
			continue
		}
		answered++
		if acked[o.id] == 0 {
			lost++
		}
		if claimed[o.id] > 1 {
			dup++
		}
	}
	fmt.Fprintf(&b, "\njobs answered 2xx: %d, lost: %d, delivered more than once: %d\n", answered, lost, dup)
	return b.String()
}

func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	return ds[len(ds)/2].Round(time.Millisecond).String() + " / " + ds[len(ds)-1].Round(time.Millisecond).String()
}
