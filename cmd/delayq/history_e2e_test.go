package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore"
	"github.com/delayq/delayq/backends/natsstore/natstest"
	"github.com/delayq/delayq/backends/redisstore/redistest"
	"github.com/delayq/delayq/internal/history"
	"github.com/delayq/delayq/internal/logproc"
)

// History runs: random operations of concurrent clients against a running
// deployment while faults are injected, every one recorded and the
// history checked against the model of the contract (internal/history).
// DELAYQ_HISTORY_DURATION lengthens a run (45s by default, 30s on NATS
// and Sentinel) and
// DELAYQ_HISTORY_SEED changes its random choices (1 by default), so that a
// long run is one command; DELAYQ_HISTORY_REPORT appends a line of figures
// per run to a file, and DELAYQ_HISTORY_DUMP writes each history into a
// directory:
//
//	DELAYQ_HISTORY_DURATION=1h DELAYQ_HISTORY_SEED=7 go test -count=1 -timeout 2h -run TestE2EHistory ./cmd/delayq/

// historyConfig is the length, seed and fault period of a run.
type historyConfig struct {
	duration time.Duration
	seed     uint64
	// faultEvery is the period of the faults: a kill -9 and restart, then
	// a SIGSTOP, in turn.
	faultEvery time.Duration
	// stopFor is how long a SIGSTOP lasts: longer than the jobs' ttr (1 s)
	// and so than any lease the stopped instance holds.
	stopFor time.Duration
	// clients is how many clients the generator runs, subscribers how many
	// WebSocket subscribers beside them.
	clients, subscribers int
	// durationSet is whether DELAYQ_HISTORY_DURATION set the duration: a
	// deployment may shorten only the default.
	durationSet bool
}

// historyEnv reads the run's length and seed from the environment.
func historyEnv(t *testing.T) historyConfig {
	cfg := historyConfig{duration: 45 * time.Second, seed: 1, faultEvery: 10 * time.Second, stopFor: 3 * time.Second, clients: 6, subscribers: 3}
	if v := os.Getenv("DELAYQ_HISTORY_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "DELAYQ_HISTORY_DURATION")
		cfg.duration, cfg.durationSet = d, true
	}
	if v := os.Getenv("DELAYQ_HISTORY_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "DELAYQ_HISTORY_SEED")
		cfg.seed = s
	}
	return cfg
}

// TestE2EHistory checks the histories of the local default (one instance,
// killed with SIGKILL and restarted on its data, and stopped with SIGSTOP
// for longer than its leases), of three instances on one redis-server (one
// of them killed and restarted, stopped, cut off Redis, slowed down, its
// clock moved forward and back, in turn) and of three instances on a
// three-node NATS cluster with R3 streams (one killed, one stopped, the
// node leading the job stream killed and restarted, one cut off the
// cluster, one slowed down, in turn), and of three
// instances on a Sentinel-managed Redis (one killed, one stopped, the
// master killed and replaced, in turn).
func TestE2EHistory(t *testing.T) {
	t.Parallel()
	cfg := historyEnv(t)
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		d := newHistoryDeployment(t, binary(t), nil, 1, func(int) []string {
			return []string{"--backend", backendLocal, "--data", dir, "--nats-listen", "off"}
		})
		r := runHistory(t, d, cfg, history.LocalAllowances())
		requireNoAnomalies(t, r)
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		redistest.Require(t)
		rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
		require.NoError(t, err)
		t.Cleanup(rs.Kill)
		// Each instance reaches Redis through a proxy of its own.
		proxies := newToxiproxies(t, strings.TrimPrefix(rs.URL(), "redis://"), 3)
		d := newHistoryDeployment(t, binary(t), nil, 3, func(i int) []string {
			return []string{"--backend", "redis", "--redis-url", "redis://" + proxies[i].Listen, "--nats-listen", "off"}
		})
		for _, p := range proxies {
			d.proxies = append(d.proxies, []*toxiclient.Proxy{p})
		}
		// Six faults take turns: each comes at least once in the CI run.
		cfg := cfg
		cfg.faultEvery = 6 * time.Second
		d.faults = append(slices.Clone(killAndStop), historyFault{kind: history.FaultPartition}, historyFault{kind: history.FaultLatency},
			historyFault{kind: history.FaultClock, offset: clockJump}, historyFault{kind: history.FaultClock, offset: -clockJump})
		r := runHistory(t, d, cfg, history.RedisAllowances())
		requireNoAnomalies(t, r)
	})
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		testHistoryNATS(t, cfg)
	})
	t.Run("redis-sentinel", func(t *testing.T) {
		t.Parallel()
		testHistorySentinel(t, cfg)
	})
}

// testHistoryNATS runs three instances on a three-node NATS cluster with
// R3 streams, each reaching each node through a Toxiproxy of its own: a
// kill -9 of one (and its restart), a SIGSTOP of one, a kill -9 of the
// node that leads the job stream (restarted after cfg.stopFor), a
// partition of one from every node, and latency between one and every
// node, in turn.
func testHistoryNATS(t *testing.T, cfg historyConfig) {
	// As docs/deploying.md asks of a replicated deployment: with
	// nats-server's default, a node killed loses the writes its stream
	// had not flushed yet, and may later lead with them missing
	// (docs/reliability.md).
	c := natstest.StartClusterWith(t, t.TempDir(), 3, natstest.ClusterOptions{SyncInterval: cmp.Or(os.Getenv("DELAYQ_HISTORY_NATS_SYNC"), "always")})
	t.Cleanup(func() {
		for i := range 3 {
			c.Kill(i)
		}
	})
	// Each instance reaches each node through a proxy of its own.
	urls := make([][]string, 3)
	var proxies [3][]*toxiclient.Proxy
	for node := range 3 {
		for i, p := range newToxiproxies(t, strings.TrimPrefix(c.NodeURL(node), "nats://"), 3) {
			proxies[i] = append(proxies[i], p)
			urls[i] = append(urls[i], "nats://"+p.Listen)
		}
	}
	d := newHistoryDeployment(t, binary(t), nil, 3, func(i int) []string {
		return []string{"--backend", "nats", "--nats-url", strings.Join(urls[i], ","), "--nats-replicas", "3", "--nats-listen", "off"}
	})
	d.proxies = proxies[:]
	d.nats = c
	d.faults = append(slices.Clone(killAndStop), historyFault{kind: history.FaultBackendKill},
		historyFault{kind: history.FaultPartition}, historyFault{kind: history.FaultLatency})
	if os.Getenv("DELAYQ_HISTORY_CLOCK_JUMP") != "" {
		// Not in CI: on NATS each instance judges due times and leases
		// on its own clock, and the runs with jumps found a delivery
		// answered twice (docs/reliability.md).
		d.faults = append(d.faults, historyFault{kind: history.FaultClock, offset: clockJump}, historyFault{kind: history.FaultClock, offset: -clockJump})
	}
	cfg.faultEvery = 6 * time.Second
	if !cfg.durationSet {
		// Its runs cost the most (an R3 write is three servers' work,
		// and the claims left without an answer by a failover are many
		// ways for the model to check): 30 s in CI, for four faults.
		cfg.duration = 30 * time.Second
	}
	r := runHistory(t, d, cfg, history.NATSAllowances())
	requireNoAnomalies(t, r)
}

// testHistorySentinel runs three instances on a Redis master with two
// replicas watched by three Sentinels, with --redis-wait-replicas 1 (so
// that a failover loses no settle answered, only the last claims:
// docs/backends.md, "Waiting for replicas"): a kill -9 of one instance
// (and its restart), a SIGSTOP of one, and a kill -9 of the master, which
// a replica replaces, in turn.
func testHistorySentinel(t *testing.T, cfg historyConfig) {
	redistest.RequireSentinel(t)
	g, err := redistest.StartSentinel(2, 3, redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
	require.NoError(t, err)
	t.Cleanup(g.Stop)
	d := newHistoryDeployment(t, binary(t), nil, 3, func(int) []string {
		return []string{"--backend", "redis", "--redis-url", g.URL(), "--redis-wait-replicas", "1", "--redis-wait-timeout", "500ms", "--nats-listen", "off"}
	})
	d.sentinel = g
	d.faults = append(slices.Clone(killAndStop), historyFault{kind: history.FaultBackendKill})
	cfg.faultEvery = 6 * time.Second
	if !cfg.durationSet {
		cfg.duration = 30 * time.Second
	}
	r := runHistory(t, d, cfg, history.SentinelAllowances())
	requireNoAnomalies(t, r)
}

func requireNoAnomalies(t *testing.T, r history.Report) {
	t.Helper()
	for i, a := range r.Anomalies {
		if i == 10 {
			t.Logf("... %d more", len(r.Anomalies)-10)
			break
		}
		t.Logf("anomaly: %s", a)
	}
	require.Empty(t, r.Anomalies, "the history has anomalies")
	require.Zero(t, r.Unknown, "every job's history was checked")
}

// historyDeployment is the instances of a deployment under test, each on a
// port of its own that its restarts keep.
type historyDeployment struct {
	t    *testing.T
	bin  string
	env  []string
	args func(i int) []string

	// faults is the rotation of faults, injected in turn (kill -9 and
	// SIGSTOP unless set).
	faults []historyFault
	// proxies, when set, are each instance's Toxiproxy proxies to the
	// backend (one per server it reaches), for partitions and latency.
	proxies [][]*toxiclient.Proxy
	// nats, when set, is the NATS cluster the instances use, for a
	// failover of its stream leader.
	nats *natstest.Cluster
	// sentinel, when set, is the Sentinel-managed Redis the instances
	// use, for a failover of its master.
	sentinel *redistest.Sentinel
	// clockDir holds each instance's clock offset file (testhooks.go),
	// for clock jumps.
	clockDir string

	mu    sync.Mutex
	procs []*serverProc
	addrs []string
	up    []bool
}

// historyFault is one fault of a deployment's rotation: its kind
// (history.FaultKill, FaultStop, FaultPartition, FaultLatency or
// FaultClock) and, for a clock jump, the offset the instance's clock
// jumps to.
type historyFault struct {
	kind   history.FaultKind
	offset time.Duration
}

// clockJump is how far a clock jump moves an instance's clock, forward
// and back: DELAYQ_HISTORY_CLOCK_JUMP, 2 s by default. Setting it adds
// clock jumps to the NATS run too.
var clockJump = func() time.Duration {
	d, err := time.ParseDuration(os.Getenv("DELAYQ_HISTORY_CLOCK_JUMP"))
	if err != nil {
		return 2 * time.Second
	}
	return d
}()

// killAndStop is the rotation of every deployment: a kill -9 and restart,
// then a SIGSTOP.
var killAndStop = []historyFault{{kind: history.FaultKill}, {kind: history.FaultStop}}

// newHistoryDeployment starts n instances of bin serving with args(i) and
// the environment env added. The generator's topics are configured once
// the first listens, before the others start: they read topics at start,
// and later only every 2 s.
func newHistoryDeployment(t *testing.T, bin string, env []string, n int, args func(i int) []string) *historyDeployment {
	d := &historyDeployment{t: t, bin: bin, env: env, args: args, faults: killAndStop, clockDir: t.TempDir(),
		procs: make([]*serverProc, n), addrs: make([]string, n), up: make([]bool, n)}
	for i := range n {
		d.addrs[i] = freeLoopbackAddr(t)
		require.NoError(t, d.start(i))
		if i == 0 {
			require.NoError(t, history.Setup(t.Context(), d.url(0)))
		}
	}
	return d
}

// freeLoopbackAddr returns a loopback address with a port free now.
func freeLoopbackAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// start starts instance i and marks it up once it listens.
func (d *historyDeployment) start(i int) error {
	t := d.t
	args := append([]string{"serve", "--http", d.addrs[i]}, d.args(i)...)
	cmd := exec.Command(d.bin, args...)
	cmd.Env = append(append(childEnv(), d.env...), "DELAYQ_TEST_CLOCK_FILE="+d.clockFile(i))
	proc, _, err := logproc.Start(t.Context(), cmd, 30*time.Second, httpListening)
	if err != nil {
		return fmt.Errorf("start instance %d: %w", i, err)
	}
	p := &serverProc{t: t, Proc: proc, HTTPURL: "http://" + d.addrs[i]}
	t.Cleanup(func() {
		p.Kill()
		log := p.log()
		if strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("instance %d reported a data race", i)
		}
		if t.Failed() {
			t.Logf("instance %d (%s) log:\n%s", i, strings.Join(args, " "), lastLines(log, 40))
		}
	})
	d.mu.Lock()
	d.procs[i], d.up[i] = p, true
	d.mu.Unlock()
	return nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// url is instance i's base URL, "" while it is down.
func (d *historyDeployment) url(i int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.up[i] {
		return ""
	}
	return "http://" + d.addrs[i]
}

// kill kills instance i with SIGKILL, records it and starts it again.
func (d *historyDeployment) kill(i int, h *history.History) error {
	d.mu.Lock()
	p := d.procs[i]
	d.up[i] = false
	d.mu.Unlock()
	h.AddFault(history.Fault{Kind: history.FaultKill, Instance: i, At: time.Now()})
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		return fmt.Errorf("instance %d did not exit within 10s of SIGKILL", i)
	}
	// An instance that cannot start (on NATS, while the cluster elects a
	// stream leader its start times out on) exits: it is started again, a
	// second later, as a supervisor would.
	for attempt := 1; ; attempt++ {
		err := d.start(i)
		if err == nil {
			break
		}
		if attempt == 5 {
			return err
		}
		d.t.Logf("restart %d of instance %d failed, started again in 1s: %v", attempt, i, err)
		holdFault(context.Background(), time.Second)
	}
	h.AddFault(history.Fault{Kind: history.FaultStart, Instance: i, At: time.Now()})
	return nil
}

// stop stops instance i with SIGSTOP for stopFor (less when ctx ends),
// then continues it with SIGCONT.
func (d *historyDeployment) stop(ctx context.Context, i int, h *history.History, stopFor time.Duration) error {
	d.mu.Lock()
	p := d.procs[i]
	d.mu.Unlock()
	h.AddFault(history.Fault{Kind: history.FaultStop, Instance: i, At: time.Now()})
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	holdFault(ctx, stopFor)
	err := p.Signal(syscall.SIGCONT)
	h.AddFault(history.Fault{Kind: history.FaultCont, Instance: i, At: time.Now()})
	return err
}

// partition cuts instance i off its backend for last (less when ctx ends):
// its proxy refuses connections and closes those open, as a network
// partition between the two would, while the other instances go on.
func (d *historyDeployment) partition(ctx context.Context, i int, h *history.History, last time.Duration) error {
	h.AddFault(history.Fault{Kind: history.FaultPartition, Instance: i, At: time.Now()})
	for _, p := range d.proxies[i] {
		if err := p.Disable(); err != nil {
			return err
		}
	}
	holdFault(ctx, last)
	var errs []error
	for _, p := range d.proxies[i] {
		errs = append(errs, p.Enable())
	}
	h.AddFault(history.Fault{Kind: history.FaultHeal, Instance: i, At: time.Now()})
	return errors.Join(errs...)
}

// slow adds 50-200 ms of latency (125 ms, jitter 75 ms) each way between
// instance i and its backend for last (less when ctx ends).
func (d *historyDeployment) slow(ctx context.Context, i int, h *history.History, last time.Duration) error {
	var heals []func() error
	h.AddFault(history.Fault{Kind: history.FaultLatency, Instance: i, At: time.Now()})
	for _, p := range d.proxies[i] {
		apply, heal := toxic(p, "history-latency", "latency", toxiclient.Attributes{"latency": 125, "jitter": 75})
		if err := apply(); err != nil {
			return err
		}
		heals = append(heals, heal)
	}
	holdFault(ctx, last)
	var errs []error
	for _, heal := range heals {
		errs = append(errs, heal())
	}
	h.AddFault(history.Fault{Kind: history.FaultLatencyEnd, Instance: i, At: time.Now()})
	return errors.Join(errs...)
}

// clockFile is the file of instance i's clock offset: its content, a Go
// duration, is read by the binary's test hook every 5 ms (testhooks.go).
func (d *historyDeployment) clockFile(i int) string {
	return filepath.Join(d.clockDir, fmt.Sprintf("clock-%d", i))
}

// setClock moves instance i's clock to offset from the real time.
func (d *historyDeployment) setClock(i int, offset time.Duration) error {
	// Renamed into place: the hook never reads half a file.
	tmp := d.clockFile(i) + ".tmp"
	if err := os.WriteFile(tmp, []byte(offset.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, d.clockFile(i))
}

// jump moves instance i's clock by offset for last (less when ctx ends),
// then back to the real time. Its faults are recorded before the jump and
// once the instance says it runs on the real time again, so that they
// span the hook's lag (its 5 ms poll, and more on a loaded machine: a run
// had an instance on the moved clock 100 ms after a fixed 20 ms wait).
func (d *historyDeployment) jump(ctx context.Context, i int, h *history.History, offset, last time.Duration) error {
	h.AddFault(history.Fault{Kind: history.FaultClock, Instance: i, At: time.Now(), Offset: offset})
	if err := d.setClock(i, offset); err != nil {
		return err
	}
	holdFault(ctx, last)
	err := d.setClock(i, 0)
	d.clockSeen(i, 0)
	h.AddFault(history.Fault{Kind: history.FaultClock, Instance: i, At: time.Now()})
	return err
}

// clockSeen waits until instance i says it runs on offset (testhooks.go
// writes the offset it took to its file's name with ".seen" added), for
// up to 10 s: an instance that is down takes the file at its start.
func (d *historyDeployment) clockSeen(i int, offset time.Duration) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(d.clockFile(i) + ".seen"); err == nil && string(b) == offset.String() {
			return
		}
		time.Sleep(5 * time.Millisecond) // the hook's poll
	}
}

// failLeader kills with SIGKILL the NATS node that leads the job stream,
// and restarts it after last (less when ctx ends): the stream elects
// another leader meanwhile.
func (d *historyDeployment) failLeader(ctx context.Context, h *history.History, last time.Duration) error {
	nc, err := nats.Connect(d.nats.URLs())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	infoCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(infoCtx, strings.ToUpper(natsstore.PrefixDefault)+"_QUEUE")
	if err != nil {
		return fmt.Errorf("the job stream: %w", err)
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return errors.New("the job stream has no leader")
	}
	node, err := strconv.Atoi(strings.TrimPrefix(info.Cluster.Leader, "n"))
	if err != nil {
		return fmt.Errorf("leader %q: %w", info.Cluster.Leader, err)
	}
	h.AddFault(history.Fault{Kind: history.FaultBackendKill, Instance: node, At: time.Now()})
	d.nats.Kill(node)
	holdFault(ctx, last)
	d.nats.Restart(d.t, node)
	h.AddFault(history.Fault{Kind: history.FaultBackendStart, Instance: node, At: time.Now()})
	return nil
}

// failMaster kills with SIGKILL the Redis master the Sentinels name, waits
// (at least last, up to a minute) until they promote a replica and a
// replica confirms the new master's writes, and starts the old master
// again: the Sentinels make it a replica of the new one.
func (d *historyDeployment) failMaster(ctx context.Context, h *history.History, last time.Duration) error {
	g := d.sentinel
	addr, err := g.MasterAddr()
	if err != nil {
		return err
	}
	master := g.Server(addr)
	if master == nil {
		return fmt.Errorf("the Sentinels name %s, none of the servers", addr)
	}
	node := slices.Index(g.Servers, master)
	h.AddFault(history.Fault{Kind: history.FaultBackendKill, Instance: node, At: time.Now()})
	master.Kill()
	holdFault(ctx, last)
	if _, err := g.AwaitReplicated(time.Minute); err != nil {
		return err
	}
	if err := master.Start(); err != nil {
		return err
	}
	h.AddFault(history.Fault{Kind: history.FaultBackendStart, Instance: node, At: time.Now()})
	return nil
}

// holdFault waits for last, the length of a fault (not a wait for a
// condition), or until ctx ends.
func holdFault(ctx context.Context, last time.Duration) {
	timer := time.NewTimer(last)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// runHistory runs the generator against the deployment for cfg.duration
// while the faults of its rotation take turns every cfg.faultEvery on an
// instance chosen by the seed, then delivers what is left and checks the
// history.
func runHistory(t *testing.T, d *historyDeployment, cfg historyConfig, allow history.Allowances) history.Report {
	h := &history.History{}
	g := history.NewGenerator(history.GeneratorConfig{
		Seed: cfg.seed, Clients: cfg.clients, Subscribers: cfg.subscribers, Instances: len(d.addrs), URLFunc: d.url, History: h,
	})
	ctx, cancel := context.WithTimeout(t.Context(), cfg.duration)
	defer cancel()
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		r := rand.New(rand.NewPCG(cfg.seed, 1<<32))
		tick := time.NewTicker(cfg.faultEvery)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			i := r.IntN(len(d.addrs))
			var err error
			switch f := d.faults[n%len(d.faults)]; f.kind {
			case history.FaultKill:
				err = d.kill(i, h)
			case history.FaultStop:
				err = d.stop(ctx, i, h, cfg.stopFor)
			case history.FaultPartition:
				err = d.partition(ctx, i, h, cfg.stopFor)
			case history.FaultLatency:
				err = d.slow(ctx, i, h, cfg.stopFor)
			case history.FaultClock:
				err = d.jump(ctx, i, h, f.offset, cfg.stopFor)
			case history.FaultBackendKill:
				if d.sentinel != nil {
					err = d.failMaster(ctx, h, cfg.stopFor)
				} else {
					err = d.failLeader(ctx, h, cfg.stopFor)
				}
			default:
				err = fmt.Errorf("no such fault %q", f.kind)
			}
			if err != nil {
				t.Errorf("fault %d: %v", n+1, err)
				return
			}
		}
	}()
	start := time.Now()
	g.Run(ctx)
	<-faultsDone
	drainCtx, drainCancel := context.WithTimeout(t.Context(), time.Minute)
	defer drainCancel()
	// Quiet for longer than a job waits once the clients stop: a delay
	// (under 1.5 s), a nack's (under 0.8 s), a lease (1 s).
	g.Drain(drainCtx, 0, 3*time.Second)
	ran := time.Since(start)

	checkStart := time.Now()
	r := history.Check(h, allow)
	if dir := os.Getenv("DELAYQ_HISTORY_DUMP"); dir != "" {
		// The history, to check again: DELAYQ_HISTORY_FILE=<file>
		// go test -run TestCheckFile ./internal/history/
		// A failed write is reported and the check goes on: an hour's
		// run is not lost to it.
		path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "-")+".json")
		var f *os.File
		err := os.MkdirAll(dir, 0o755)
		if err == nil {
			f, err = os.Create(path)
		}
		if err == nil {
			err = errors.Join(h.WriteJSON(f), f.Close())
		}
		if assert.NoError(t, err, "writing the history") {
			t.Logf("history written to %s", path)
		}
	}
	viaWS := 0
	for _, op := range h.Ops() {
		if op.Client > cfg.clients {
			viaWS += len(op.Jobs)
		}
	}
	t.Logf("history of %s (seed %d, %d clients, %d subscribers, %d instances): %s (%d to subscribers); checked in %s",
		ran.Round(time.Second), cfg.seed, cfg.clients, cfg.subscribers, len(d.addrs), r.Summary(), viaWS, time.Since(checkStart).Round(time.Millisecond))
	if testing.Verbose() {
		logFaultEffects(t, h)
	}
	if len(r.Anomalies) > 0 {
		// The faults' times, which the anomalies' operations are read
		// against (a CI run keeps no dump).
		var faults []string
		for _, f := range h.Faults() {
			faults = append(faults, fmt.Sprintf("%s %d at %s", f.Kind, f.Instance, f.At.Format("15:04:05.000")))
		}
		t.Logf("faults: %s", strings.Join(faults, "; "))
	}
	// How much the local store's allowance for writes a kill -9 loses
	// was needed: the anomalies the history has without it.
	strict := -1
	if allow.AsyncWriteWindow > 0 {
		noWindow := allow
		noWindow.AsyncWriteWindow = 0
		strict = len(history.Check(h, noWindow).Anomalies)
		t.Logf("without the allowance for async writes lost by a kill -9: %d anomalies", strict)
	}
	// How much the allowance for delays counted on a jumped instance's
	// clock was needed.
	if allow.DelayOnInstanceClock && r.Faults[history.FaultClock] > 0 {
		noClock := allow
		noClock.DelayOnInstanceClock = false
		t.Logf("without the allowance for delays counted on a jumped clock: %d anomalies", len(history.Check(h, noClock).Anomalies))
	}
	if path := os.Getenv("DELAYQ_HISTORY_REPORT"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		// Clock faults come in pairs: a jump and the return.
		_, _ = fmt.Fprintf(f, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", t.Name(), ran.Round(time.Second), cfg.seed,
			r.Ops, r.Indeterminate, r.Faults[history.FaultKill], r.Faults[history.FaultStop], r.Faults[history.FaultPartition],
			r.Faults[history.FaultLatency], r.Faults[history.FaultClock]/2, r.Faults[history.FaultBackendKill], r.Jobs, r.Deliveries, len(r.Anomalies), strict)
		require.NoError(t, f.Close())
	}
	return r
}

// buildMutants builds the delayq binary with the delayq_mutants tag
// (mutants.go), without -race: its runs are about the bug, not races.
var buildMutants = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "delayq-mutants")
	out, err := exec.Command("go", "build", "-tags", "delayq_mutants", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build -tags delayq_mutants: %w\n%s", err, out)
	}
	return bin, nil
})

// TestE2EHistoryMutants shows the checker's strength: each mutant, a bug
// built into a test-only binary, is caught by a short run of the CI seed
// on the local default with its faults; the control, the same binary
// without a bug, is not.
func TestE2EHistoryMutants(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds and runs the binary")
	}
	bin, err := buildMutants()
	require.NoError(t, err)
	cfg := historyEnv(t)
	cfg.duration, cfg.faultEvery, cfg.stopFor = 10*time.Second, 3*time.Second, 2*time.Second
	// The bugs are the store's: HTTP clients alone find them. Subscribers
	// would take the jobs promptly, and their deliveries' claims are only
	// bounded below by their last settle, which leaves fewer early
	// retries to see.
	cfg.subscribers = 0
	for _, tc := range []struct {
		mutant string
		want   history.AnomalyKind // "": none
	}{
		{"none", ""},
		{"ack-ignores-lease", history.AnomalyNotLinearizable},
		{"claim-ignores-pause", history.AnomalyPaused},
		{"claim-ignores-cancel", history.AnomalyAfterCancel},
		{"attempt-not-incremented", history.AnomalyAttempt},
		{"retry-before-run-at", history.AnomalyEarly},
		{"push-before-durable", history.AnomalyLost},
	} {
		t.Run(tc.mutant, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d := newHistoryDeployment(t, bin, []string{"DELAYQ_MUTANT=" + tc.mutant}, 1, func(int) []string {
				return []string{"--backend", backendLocal, "--data", dir, "--nats-listen", "off"}
			})
			start := time.Now()
			r := runHistory(t, d, cfg, history.LocalAllowances())
			kinds := map[history.AnomalyKind]int{}
			for _, a := range r.Anomalies {
				if kinds[a.Kind]++; kinds[a.Kind] == 1 && testing.Verbose() {
					t.Logf("first %s", a)
				}
			}
			t.Logf("mutant %s: anomalies %v in %s", tc.mutant, kinds, time.Since(start).Round(time.Second))
			if tc.want == "" {
				requireNoAnomalies(t, r)
				return
			}
			require.NotZero(t, kinds[tc.want], "mutant %s: want a %q anomaly", tc.mutant, tc.want)
		})
	}
}

// logFaultEffects logs, for each fault that lasts (a SIGSTOP, a partition,
// latency), what the operations sent to its instance meanwhile got: that
// the fault bit.
func logFaultEffects(t *testing.T, h *history.History) {
	ends := map[history.FaultKind]history.FaultKind{
		history.FaultStop: history.FaultCont, history.FaultPartition: history.FaultHeal, history.FaultLatency: history.FaultLatencyEnd,
	}
	faults, ops := h.Faults(), h.Ops()
	for i, f := range faults {
		end, ok := ends[f.Kind]
		if !ok {
			continue
		}
		until := time.Time{}
		for _, g := range faults[i+1:] {
			if g.Kind == end && g.Instance == f.Instance {
				until = g.At
				break
			}
		}
		var n, failed, indeterminate int
		var slowest time.Duration
		for _, op := range ops {
			if op.Instance != f.Instance || op.Call.Before(f.At) || !op.Call.Before(until) {
				continue
			}
			n++
			switch {
			case op.Indeterminate():
				indeterminate++
			case !op.OK():
				failed++
			}
			if !op.Return.IsZero() {
				slowest = max(slowest, op.Return.Sub(op.Call))
			}
		}
		t.Logf("%s of instance %d for %s: %d operations sent to it, %d indeterminate, %d refused, slowest answer %s",
			f.Kind, f.Instance, until.Sub(f.At).Round(time.Millisecond), n, indeterminate, failed, slowest.Round(time.Millisecond))
	}
}
