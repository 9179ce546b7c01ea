package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/backends/redisstore/redistest"
	"github.com/delayq/delayq/internal/logproc"
)

// target is the delayq under measurement and what the harness knows of it.
type target struct {
	HTTPURL  string // base URL of the HTTP API
	NATSURL  string // where NATS intake listens; empty without it
	PprofURL string // base URL of /debug/pprof; empty when unknown
	// NATSUser and NATSPassword are the in-process NATS server's client
	// credentials; empty when the URL needs none or carries them.
	NATSUser, NATSPassword string
	// DelayqPID and BackendPID are the processes whose memory is read; 0
	// when unknown. With the local or jetstream backend both are delayq.
	DelayqPID  int
	BackendPID int
	// DataDirs hold the backend's files, for their size on disk.
	DataDirs []string
	// StoreDir is the directory of the jobs alone, within DataDirs, when
	// it is apart from other files (the local and jetstream backends).
	StoreDir string
}

// StoreDirs are the directories of the store's files: StoreDir, else
// DataDirs.
func (t *target) StoreDirs() []string {
	if t.StoreDir != "" {
		return []string{t.StoreDir}
	}
	return t.DataDirs
}

// env starts and stops the processes of a run: delayq and, for the nats
// and redis backends, the backend's server, each in a temporary
// directory.
type env struct {
	dir   string
	out   string // where the processes' logs are saved
	procs []*logproc.Proc
	names []string
	redis *redistest.Server
}

var (
	httpListening  = regexp.MustCompile(`msg="http listening" addr=(\S+)`)
	natsListening  = regexp.MustCompile(`msg="nats listening" url=(\S+)(?: .*user=(\S+) password_file=(\S+))?`)
	pprofListening = regexp.MustCompile(`msg="pprof listening" addr=(\S+)`)
	natsReady      = regexp.MustCompile(`Server is ready`)
)

// startEnv builds delayq (unless cfg.Delayq names a binary), starts the
// backend's server for cfg.Backend, then delayq on it, and returns the
// target. close stops them all and removes their files.
func startEnv(ctx context.Context, cfg *config, logf func(string, ...any)) (*target, *env, error) {
	dir, err := os.MkdirTemp("", "delayq-loadtest-*")
	if err != nil {
		return nil, nil, err
	}
	e := &env{dir: dir, out: cfg.Out}
	t, err := e.start(ctx, cfg, logf)
	if err != nil {
		e.close()
		return nil, nil, err
	}
	return t, e, nil
}

func (e *env) start(ctx context.Context, cfg *config, logf func(string, ...any)) (*target, error) {
	bin := cfg.Delayq
	if bin == "" {
		bin = filepath.Join(e.dir, "delayq")
		logf("building delayq")
		if err := goBuild(ctx, bin, "github.com/delayq/delayq/cmd/delayq"); err != nil {
			return nil, err
		}
	}
	t := &target{}
	// info, for the lines that name the listening addresses.
	args := []string{"serve", "--backend", cfg.Backend, "--http", "127.0.0.1:0", "--log-level", "info"}
	if cfg.Profile {
		args = append(args, "--pprof", "127.0.0.1:0")
	}
	if cfg.Encrypt {
		// A fresh key, as an operator's key file holds it.
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		keys := filepath.Join(e.dir, "encryption-keys")
		if err := os.WriteFile(keys, []byte("k1 "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--encryption-keys", keys)
	}
	if cfg.has("retention") || cfg.has("soak") {
		args = append(args, "--retention", cfg.Retention.String())
		if cfg.RetentionMaxJobs > 0 {
			args = append(args, "--retention-max-jobs", strconv.FormatInt(cfg.RetentionMaxJobs, 10))
		}
	}
	switch cfg.Backend {
	case "local", "jetstream":
		data := filepath.Join(e.dir, "data")
		t.DataDirs = []string{data}
		t.StoreDir = filepath.Join(data, cfg.Backend)
		args = append(args, "--data", data, "--nats-listen", "127.0.0.1:-1")
	case "nats":
		url, pid, data, err := e.startNATS(ctx, logf)
		if err != nil {
			return nil, err
		}
		t.NATSURL, t.BackendPID, t.DataDirs = url, pid, []string{data}
		args = append(args, "--nats-url", url)
	case "redis":
		data := filepath.Join(e.dir, "redis")
		logf("starting redis-server (appendonly, appendfsync everysec) %s", strings.Join(cfg.RedisArgs, " "))
		rs, err := redistest.StartServer(redistest.Options{Dir: data, AppendFsync: "everysec", Args: cfg.RedisArgs})
		if err != nil {
			return nil, err
		}
		e.redis = rs
		t.BackendPID, t.DataDirs = rs.PID(), []string{data}
		// No NATS intake here: the harness measures these backends over
		// HTTP, as it did before they had NATS.
		args = append(args, "--redis-url", rs.URL(), "--nats-listen", "off")
	case "memory":
		args = append(args, "--nats-listen", "off")
	default:
		return nil, fmt.Errorf("unknown backend %q: local, jetstream, nats, redis or memory", cfg.Backend)
	}
	logf("starting delayq serve --backend %s", cfg.Backend)
	p, seen, err := logproc.Start(ctx, exec.Command(bin, args...), time.Minute, httpListening, natsListening, pprofListening)
	if err != nil {
		return nil, err
	}
	e.procs, e.names = append(e.procs, p), append(e.names, "delayq")
	for _, m := range seen {
		switch {
		case strings.HasPrefix(m[0], `msg="http`):
			t.HTTPURL = "http://" + m[1]
		case strings.HasPrefix(m[0], `msg="nats`):
			t.NATSURL, t.NATSUser = m[1], m[2]
			if m[3] != "" {
				pw, err := os.ReadFile(m[3])
				if err != nil {
					return nil, fmt.Errorf("nats client password: %w", err)
				}
				t.NATSPassword = strings.TrimSpace(string(pw))
			}
		case strings.HasPrefix(m[0], `msg="pprof`):
			t.PprofURL = "http://" + m[1]
		}
	}
	t.DelayqPID = p.PID()
	if inProcess(cfg.Backend) {
		t.BackendPID = t.DelayqPID
	}
	return t, waitReady(ctx, t.HTTPURL)
}

// inProcess reports whether backend keeps jobs inside the delayq process.
func inProcess(backend string) bool { return backend == "local" || backend == "jetstream" }

// startNATS runs a separate nats-server with JetStream, built from the
// module's own nats-server dependency so its version is the embedded
// one's, syncing its files every second like the jetstream backend.
func (e *env) startNATS(ctx context.Context, logf func(string, ...any)) (url string, pid int, data string, err error) {
	bin := filepath.Join(e.dir, "nats-server")
	logf("building nats-server")
	if err := goBuild(ctx, bin, "github.com/nats-io/nats-server/v2"); err != nil {
		return "", 0, "", err
	}
	port, err := freePort()
	if err != nil {
		return "", 0, "", err
	}
	data = filepath.Join(e.dir, "nats")
	conf := filepath.Join(e.dir, "nats.conf")
	text := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n  sync_interval: \"1s\"\n}\n", port, data)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return "", 0, "", err
	}
	logf("starting nats-server on 127.0.0.1:%d", port)
	p, _, err := logproc.Start(ctx, exec.Command(bin, "-c", conf), time.Minute, natsReady)
	if err != nil {
		return "", 0, "", err
	}
	e.procs, e.names = append(e.procs, p), append(e.names, "nats-server")
	return "nats://127.0.0.1:" + strconv.Itoa(port), p.PID(), data, nil
}

// stop stops the processes, delayq first, so it flushes to a backend
// still running, and keeps their files. Stopping again does nothing.
func (e *env) stop() {
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].Stop(30 * time.Second)
	}
}

// close stops the processes, saves each one's log beside the report and
// removes their files.
func (e *env) close() {
	e.stop()
	for i := range e.procs {
		_ = os.WriteFile(filepath.Join(e.out, e.names[i]+".log"), []byte(e.procs[i].Log()), 0o644)
	}
	if e.redis != nil {
		e.redis.Kill()
	}
	_ = os.RemoveAll(e.dir)
}

// goBuild builds pkg into out, from the module the harness runs in.
func goBuild(ctx context.Context, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls /readyz until it answers 200: the backend answers.
func waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/readyz not 200 after 30s (last error: %v)", base, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rss returns the resident memory of process pid in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
}

// diskUsage is the size of the files under dirs, in bytes.
func diskUsage(dirs []string) int64 {
	var n int64
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(_ string, de fs.DirEntry, err error) error {
			if err == nil && !de.IsDir() {
				if fi, err := de.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
	}
	return n
}

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ), 100 on
// every Linux that Go supports.
const clockTicks = 100

// cpuTime returns the CPU time (user and system) process pid has used.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis (utime and stime are the 14th
	// and 15th of the line, the 12th and 13th after it).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc/" + strconv.Itoa(pid) + "/stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// cpuMeter measures how many cores each process of a run used in a phase:
// the one near 1 (Redis) or near the machine's count is what limits it.
type cpuMeter struct {
	names []string
	pids  []int
}

func newCPUMeter(t *target) *cpuMeter {
	m := &cpuMeter{}
	add := func(name string, pid int) {
		if pid != 0 {
			m.names, m.pids = append(m.names, name), append(m.pids, pid)
		}
	}
	add("delayq", t.DelayqPID)
	if t.BackendPID != t.DelayqPID {
		add("backend server", t.BackendPID)
	}
	add("harness", os.Getpid())
	return m
}

// phaseCPU is the cores each process used in one phase.
type phaseCPU struct {
	Phase string             `json:"phase"`
	Cores map[string]float64 `json:"cores"`
}

// measure runs f and returns the cores each process used meanwhile;
// processes whose times cannot be read are left out.
func (m *cpuMeter) measure(phase string, f func()) phaseCPU {
	before := make([]time.Duration, len(m.pids))
	ok := make([]bool, len(m.pids))
	for i, pid := range m.pids {
		var err error
		before[i], err = cpuTime(pid)
		ok[i] = err == nil
	}
	start := time.Now()
	f()
	wall := time.Since(start)
	out := phaseCPU{Phase: phase, Cores: map[string]float64{}}
	for i, pid := range m.pids {
		if after, err := cpuTime(pid); err == nil && ok[i] {
			out.Cores[m.names[i]] = float64(after-before[i]) / float64(wall)
		}
	}
	return out
}

// serverCPU measures, from its start, the CPU time of a baseline's server
// and of the harness.
type serverCPU struct {
	pid              int // the server's; 0 when unknown
	server0, self0   time.Duration
	serverOK, selfOK bool
}

func startServerCPU(pid int) *serverCPU {
	m := &serverCPU{pid: pid}
	var err error
	m.self0, err = cpuTime(os.Getpid())
	m.selfOK = err == nil
	if pid != 0 {
		m.server0, err = cpuTime(pid)
		m.serverOK = err == nil
	}
	return m
}

// baseline is what a baseline (raw Redis, beanstalkd) measures of its
// burst, without delayq.
type baseline struct {
	// Server says which server ran and how it persists.
	Server    string `json:"server"`
	Jobs      int    `json:"jobs"`
	Consumers int    `json:"consumers"`
	// PushSeconds is how long the pushes took, before the due instant.
	PushSeconds float64 `json:"push_seconds"`
	// AckedAll is seconds from the due instant to the answer of the last
	// job's acknowledgement (beanstalkd: its delete).
	AckedAll  float64 `json:"acked_all_s"`
	PerSecond float64 `json:"per_second"`
	// serverFigures is the server's CPU from the due instant to the last
	// acknowledgement.
	serverFigures
	// Left is the jobs the server still held at the end, in any state: 0
	// when every job was acknowledged.
	Left     int64  `json:"left"`
	Errors   int64  `json:"errors"`
	FirstErr string `json:"first_error,omitempty"`
	Command  string `json:"command"`
}

// newBaseline starts the result of a baseline's burst of jobs for
// consumers, naming the harness's command line.
func newBaseline(jobs, consumers int) baseline {
	return baseline{Jobs: jobs, Consumers: consumers, Command: strings.TrimSpace("go run ./loadtest " + strings.Join(os.Args[1:], " "))}
}

// serverFigures is what a baseline's server used from the due instant to
// the last acknowledgement: its CPU time (user and system, read from
// /proc/<pid>/stat, 10 ms resolution; CPUMeasured is false when its
// process could not be read), the cores and CPU per job that follow, and
// the cores the harness (the consumers' client) used over the same span
// on the same machine.
type serverFigures struct {
	CPUMeasured     bool    `json:"cpu_measured"`
	CPUSeconds      float64 `json:"cpu_s"`
	Cores           float64 `json:"cores"`
	CPUMicrosPerJob float64 `json:"cpu_us_per_job"`
	HarnessCores    float64 `json:"harness_cores"`
}

// figures returns what the server and the harness used since the start,
// over span, for jobs jobs.
func (m *serverCPU) figures(span time.Duration, jobs int) serverFigures {
	var f serverFigures
	if m.serverOK {
		if t, err := cpuTime(m.pid); err == nil {
			cpu := t - m.server0
			f.CPUMeasured = true
			f.CPUSeconds = cpu.Seconds()
			f.Cores = float64(cpu) / float64(span)
			f.CPUMicrosPerJob = float64(cpu.Microseconds()) / float64(jobs)
		}
	}
	if t, err := cpuTime(os.Getpid()); err == nil && m.selfOK {
		f.HarnessCores = float64(t-m.self0) / float64(span)
	}
	return f
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
}
