package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore"
	"github.com/delayq/delayq/backends/natsstore/natstest"
	"github.com/delayq/delayq/backends/redisstore/redistest"
)

// failoverTTR is the ttr of the jobs the failover tests push: a job whose
// ack a failover lost comes back this soon.
const failoverTTR = "2s"

// TestE2EBackendFailover fails delayq's backend over while a producer
// pushes 100 jobs a second and a consumer claims and acknowledges them
// (runFaultProgram's load):
//
//   - redis-sentinel: a master, two replicas and three redis-sentinel
//     processes; the master is killed with SIGKILL and Sentinel promotes a
//     replica. Replication is asynchronous, so jobs answered 2xx may be
//     lost: they are counted, not refused.
//   - redis-sentinel-wait: the same with --redis-wait-replicas 1: no job
//     answered 2xx may be lost.
//   - nats-cluster: three nats-servers, streams R3; the node that leads the
//     job stream is killed with SIGKILL, and restarted later. No job
//     answered 2xx may be lost.
//
// Each reports the jobs answered, lost and delivered more than once, how
// long and how intake failed, and when delayq worked again after the kill.
// DELAYQ_FAILOVER_RUNS=N runs each scenario N times (1 by default);
// DELAYQ_FAILOVER_SERVE_ARGS adds serve flags (space-separated), such as
// "--breaker-open-timeout 1s";
// DELAYQ_FAILOVER_REPORT=FILE appends the figures to FILE as Markdown (the
// tables of docs/reliability.md).
func TestE2EBackendFailover(t *testing.T) {
	t.Parallel()
	runs := 1
	if n, err := strconv.Atoi(os.Getenv("DELAYQ_FAILOVER_RUNS")); err == nil && n > 0 {
		runs = n
	}
	repeat := func(t *testing.T, run func(t *testing.T) failoverResult) {
		var rows []string
		for i := range runs {
			t.Run("run"+strconv.Itoa(i+1), func(t *testing.T) {
				rows = append(rows, run(t).row("run "+strconv.Itoa(i+1)))
			})
		}
		logReport(t, "DELAYQ_FAILOVER_REPORT", "| scenario | fault | load | answered 2xx | lost | delivered twice+ | intake failed for (answers, median / max) | first 2xx after the kill |\n"+
			"| --- | --- | --- | --- | --- | --- | --- | --- |\n"+strings.Join(rows, "\n")+"\n")
	}
	t.Run("redis-sentinel", func(t *testing.T) {
		t.Parallel()
		redistest.RequireSentinel(t)
		repeat(t, func(t *testing.T) failoverResult { return testRedisFailover(t, false) })
	})
	t.Run("redis-sentinel-wait", func(t *testing.T) {
		t.Parallel()
		redistest.RequireSentinel(t)
		repeat(t, func(t *testing.T) failoverResult { return testRedisFailover(t, true) })
	})
	t.Run("nats-cluster", func(t *testing.T) {
		t.Parallel()
		repeat(t, testNATSLeaderKilled)
	})
}

// failoverServeArgs are the serve flags of DELAYQ_FAILOVER_SERVE_ARGS.
func failoverServeArgs() []string { return strings.Fields(os.Getenv("DELAYQ_FAILOVER_SERVE_ARGS")) }

// failoverResult is one failover run's figures.
type failoverResult struct {
	scenario, fault string
	run             faultRun
	killedAt        time.Time
}

// row is the result as a row of the report's table.
func (r failoverResult) row(run string) string {
	f := failoverFiguresOf(r.run.outcomes, r.killedAt)
	dup := 0
	for id := range r.run.answered {
		if r.run.claimed[id] > 1 {
			dup++
		}
	}
	recovered := "-"
	if f.recovery >= 0 {
		recovered = f.recovery.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprintf("| %s (%s) | %s | 100 jobs/s in and out | %d | %d | %d | %s (%s) | %s |",
		r.scenario, run, r.fault, len(r.run.answered), len(r.run.lost), dup,
		f.window.Round(10*time.Millisecond), f.answers(), recovered)
}

// failoverFigures describe the pushes answered around a fault.
type failoverFigures struct {
	byStatus map[int]int     // pushes that failed since the fault, by status (0: no answer)
	latency  []time.Duration // how long those took to be answered
	window   time.Duration   // from the first failed push (or the fault) to the last failed answer
	recovery time.Duration   // from the fault to the first 2xx after the last failure; -1: none
}

// failoverFiguresOf reads the pushes answered since at: those that failed,
// the span from the first of them (a push held by the fault fails late, so
// its start counts, but not before at) to the last answer, and the first
// 2xx after that.
func failoverFiguresOf(outcomes []pushOutcome, at time.Time) failoverFigures {
	f := failoverFigures{byStatus: map[int]int{}, recovery: -1}
	var first, last time.Time
	for _, o := range outcomes {
		answered := o.at.Add(o.latency)
		if answered.Before(at) || o.status == http.StatusCreated {
			continue
		}
		f.byStatus[o.status]++
		f.latency = append(f.latency, o.latency)
		if start := maxTime(o.at, at); first.IsZero() || start.Before(first) {
			first = start
		}
		if answered.After(last) {
			last = answered
		}
	}
	if !first.IsZero() {
		f.window = last.Sub(first)
	}
	after := at
	if !last.IsZero() {
		after = last
	}
	for _, o := range outcomes {
		answered := o.at.Add(o.latency)
		if o.status == http.StatusCreated && !answered.Before(after) && (f.recovery < 0 || answered.Sub(at) < f.recovery) {
			f.recovery = answered.Sub(at)
		}
	}
	return f
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// answers says how the failed pushes were answered, and how fast (median /
// max): "N×503, M×no answer in 2ms / 5.01s".
func (f failoverFigures) answers() string {
	if len(f.byStatus) == 0 {
		return "none failed"
	}
	var parts []string
	for _, status := range []int{http.StatusServiceUnavailable, 0} {
		if n := f.byStatus[status]; n > 0 {
			name := strconv.Itoa(status)
			if status == 0 {
				name = "no answer"
			}
			parts = append(parts, fmt.Sprintf("%d×%s", n, name))
		}
	}
	for status, n := range f.byStatus {
		if status != http.StatusServiceUnavailable && status != 0 {
			parts = append(parts, fmt.Sprintf("%d×%d", n, status))
		}
	}
	return strings.Join(parts, ", ") + " in " + quantiles(f.latency)
}

// testRedisFailover runs delayq on a Sentinel-managed master with two
// replicas, kills the master with SIGKILL under load and lets Sentinel
// promote a replica. With wait, delayq runs with --redis-wait-replicas 1
// and must lose nothing answered; the second replica, which Sentinel
// points at the promoted one, is what the writes wait for after the
// failover.
func testRedisFailover(t *testing.T, wait bool) failoverResult {
	g, err := redistest.StartSentinel(2, 3, redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
	require.NoError(t, err)
	t.Cleanup(g.Stop)
	args := append([]string{"--backend", "redis", "--redis-url", g.URL(), "--http", "127.0.0.1:0", "--nats-listen", "off"},
		failoverServeArgs()...)
	scenario := "redis, Sentinel, 2 replicas"
	if wait {
		args = append(args, "--redis-wait-replicas", "1", "--redis-wait-timeout", "500ms")
		scenario += ", --redis-wait-replicas 1"
	}
	srv := startServer(t, args...)
	master := g.Servers[0]

	var (
		mu         sync.Mutex
		killedAt   time.Time
		promotedAt time.Time
		promoted   string
	)
	watchDone := make(chan struct{})
	program := []faultPhase{
		{name: "baseline", last: 2 * time.Second},
		{name: "master killed (SIGKILL)", last: 6 * time.Second, apply: func() error {
			mu.Lock()
			killedAt = time.Now()
			mu.Unlock()
			master.Kill()
			// Sentinel's promotion, seen from outside: when the Sentinels
			// name another master.
			go func() {
				defer close(watchDone)
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					if addr, err := g.MasterAddr(); err == nil && addr != master.Addr {
						mu.Lock()
						promotedAt, promoted = time.Now(), addr
						mu.Unlock()
						return
					}
					time.Sleep(20 * time.Millisecond) // another process's state: polled
				}
			}()
			return nil
		}},
		{name: "until a replica follows the new master", untilAnswered: 60 * time.Second, apply: func() error {
			// Sentinel reconfigures the other replica only after the
			// promotion, and a loaded machine takes seconds to resync it;
			// until then --redis-wait-replicas refuses every write.
			// A first promotion may fail and Sentinel promote the other
			// replica after its failover timeout (10 s): the master is the
			// one that stays. Even then delayq's writes were seen refused
			// for 10 s more (WAIT 1: 0 confirmed) while Sentinel
			// reconfigured the servers, so the phase also lasts until
			// delayq answers a push 2xx again.
			<-watchDone
			addr, err := g.AwaitReplicated(60 * time.Second)
			mu.Lock()
			promoted = addr
			mu.Unlock()
			return err
		}},
		{name: "after the failover", last: 3 * time.Second},
	}
	load := faultLoad{topic: "e2e.failover", program: program, ttr: failoverTTR, settle: 60 * time.Second}
	if !wait {
		load.quiet = 8 * time.Second // lost jobs never come
	}
	run := runFaultProgram(t, srv, load)
	<-watchDone

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, promoted, "Sentinel promoted a replica")
	newMaster := g.Server(promoted)
	require.NotNil(t, newMaster, "the new master is one of the replicas")
	role, err := newMaster.Role()
	require.NoError(t, err)
	require.Equal(t, "master", role)
	report := faultReport("redis+sentinel", program, run.outcomes, run.acked, run.claimed, run.healedAt) +
		fmt.Sprintf("Sentinel promoted %s %s after the kill; acks applied whose answer the failover cut off: %d\n",
			promoted, promotedAt.Sub(killedAt).Round(10*time.Millisecond), run.cutOff)
	logReport(t, "DELAYQ_FAILOVER_REPORT", report)
	require.NotEmpty(t, run.answered)
	afterPromotion := 0
	for _, o := range run.outcomes {
		if o.id != "" && o.at.After(promotedAt) {
			afterPromotion++
		}
	}
	require.Positive(t, afterPromotion, "delayq works on the new master")
	if wait {
		require.Empty(t, run.lost, "jobs answered 2xx, after their replica confirmed them, lost in the failover")
	}
	return failoverResult{scenario: scenario, fault: "master SIGKILL, replica promoted", run: run, killedAt: killedAt}
}

// testNATSLeaderKilled runs delayq on a three-node NATS cluster with R3
// streams, kills the node that leads the job stream with SIGKILL under
// load, and restarts it 6 s later. Nothing answered may be lost.
func testNATSLeaderKilled(t *testing.T) failoverResult {
	c := natstest.StartCluster(t, t.TempDir(), 3)
	t.Cleanup(func() {
		for i := range 3 {
			c.Kill(i)
		}
	})
	srv := startServer(t, append([]string{"--backend", "nats", "--nats-url", c.URLs(), "--nats-replicas", "3",
		"--http", "127.0.0.1:0", "--nats-listen", "off"}, failoverServeArgs()...)...)
	nc, err := nats.Connect(c.URLs())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream := strings.ToUpper(natsstore.PrefixDefault) + "_QUEUE"
	// leader names the node that leads the job stream ("n1"), "" when
	// none does.
	leader := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return ""
		}
		info := s.CachedInfo()
		if info.Cluster == nil {
			return ""
		}
		return info.Cluster.Leader
	}
	var old string
	require.Eventually(t, func() bool { old = leader(); return old != "" }, 10*time.Second, 20*time.Millisecond,
		"the job stream %s has a leader", stream)
	victim, err := strconv.Atoi(strings.TrimPrefix(old, "n"))
	require.NoError(t, err, "node name %q", old)

	var (
		mu       sync.Mutex
		killedAt time.Time
		electAt  time.Time
		elected  string
		// restarted is set once the killed node runs again: it may then
		// win the election itself, when none ended before.
		restarted atomic.Bool
	)
	watchDone := make(chan struct{})
	program := []faultPhase{
		{name: "baseline", last: 2 * time.Second},
		{name: "stream leader killed (SIGKILL)", last: 6 * time.Second, apply: func() error {
			mu.Lock()
			killedAt = time.Now()
			mu.Unlock()
			c.Kill(victim)
			go func() {
				defer close(watchDone)
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					if l := leader(); l != "" && (l != old || restarted.Load()) {
						mu.Lock()
						electAt, elected = time.Now(), l
						mu.Unlock()
						return
					}
					time.Sleep(20 * time.Millisecond) // the cluster's state: polled
				}
			}()
			return nil
		}},
		// Long enough for the breaker's second probe (5 s apart), which a
		// leader elected late needs.
		{name: "old leader restarted", last: 8 * time.Second, apply: func() error {
			c.Restart(t, victim)
			restarted.Store(true)
			return nil
		}},
	}
	run := runFaultProgram(t, srv, faultLoad{topic: "e2e.failover", program: program, ttr: failoverTTR, settle: 60 * time.Second})
	<-watchDone

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, elected, "a node leads the stream again after the kill")
	report := faultReport("nats R3", program, run.outcomes, run.acked, run.claimed, run.healedAt) +
		fmt.Sprintf("stream leader %s killed; %s leads it %s after the kill; acks applied whose answer the failover cut off: %d\n",
			old, elected, electAt.Sub(killedAt).Round(10*time.Millisecond), run.cutOff)
	logReport(t, "DELAYQ_FAILOVER_REPORT", report)
	require.NotEmpty(t, run.answered)
	require.Empty(t, run.lost, "jobs answered 2xx lost when the stream leader died")
	return failoverResult{scenario: "nats, 3 nodes, R3", fault: "stream leader SIGKILL, restarted after 6 s", run: run, killedAt: killedAt}
}
