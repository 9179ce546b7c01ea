// Package redistest starts real redis-server processes for tests: a
// standalone server, or a Redis Cluster of several masters made with
// `redis-cli --cluster create`, each on a free loopback port with its data
// in a directory of the caller's.
//
// Tests that need Redis call Require first: without redis-server on PATH
// it fails the test when CI=true and skips it otherwise, saying how to
// install it. Servers are killed by process id when stopped, and (on Linux)
// when the test process dies.
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/looport"
)

// Install says how to get redis-server, for skip and failure messages.
const Install = "install redis-server (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) " +
	"or set TEST_REDIS_URL to an external server"

// Available reports whether redis-server and redis-cli are on PATH.
func Available() error {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("redistest: %s is not on PATH", bin)
		}
	}
	return nil
}

// Require fails tb under CI (CI=true) and skips it elsewhere when
// redis-server or redis-cli is missing.
func Require(tb testing.TB) {
	tb.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%v: %s", err, Install)
		}
		tb.Skipf("%v: %s", err, Install)
	}
}

// Options configure a server.
type Options struct {
	// Dir is the server's data directory (AOF, nodes.conf, log). Required.
	Dir string
	// AppendFsync turns the append-only file on with this fsync policy:
	// "always" or "everysec". Empty means no persistence at all (no AOF,
	// no RDB snapshots).
	AppendFsync string
	// Args are more redis-server arguments, such as "--maxmemory", "1gb".
	Args []string
}

// Server is a redis-server process on a loopback port.
type Server struct {
	// Addr is host:port of the server.
	Addr string
	opts Options
	port int
	bin  string // redis-server or redis-sentinel
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd ended
}

// StartServer starts a standalone redis-server on a free loopback port and
// returns once it answers PING.
func StartServer(opts Options) (*Server, error) {
	return start(opts, false)
}

func start(opts Options, cluster bool) (*Server, error) {
	return startBin("redis-server", opts, cluster, nil)
}

// startBin starts bin with the common arguments, and the file of conf's
// lines (when given) as its configuration file.
func startBin(bin string, opts Options, cluster bool, conf func(port int) string) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("redistest: Options.Dir is required")
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // a free port may be taken before the server binds it
		port, err := looport.Free(cluster)
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), opts: opts, port: port, bin: bin}
		if conf != nil {
			// A Sentinel rewrites its configuration file: one per process.
			file := filepath.Join(opts.Dir, "sentinel.conf")
			if err := os.WriteFile(file, []byte(conf(port)), 0o644); err != nil {
				return nil, err
			}
			s.args = []string{file}
		}
		s.args = append(s.args,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
			"--dir", opts.Dir, "--logfile", "redis.log", "--daemonize", "no")
		if conf == nil {
			s.args = append(s.args, "--save", "")
		}
		switch opts.AppendFsync {
		case "":
			if conf == nil {
				s.args = append(s.args, "--appendonly", "no")
			}
		case "always", "everysec", "no":
			s.args = append(s.args, "--appendonly", "yes", "--appendfsync", opts.AppendFsync)
		default:
			return nil, fmt.Errorf("redistest: AppendFsync %q must be always, everysec or empty", opts.AppendFsync)
		}
		if cluster {
			s.args = append(s.args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "5000")
		}
		s.args = append(s.args, opts.Args...)
		if lastErr = s.Start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// Start starts the server again on its port and data directory after Kill
// or Shutdown, and returns once it answers PING (it has loaded its data).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		select {
		case <-s.exited:
		default:
			return errors.New("redistest: server already running")
		}
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.opts.Dir
	cmd.SysProcAttr = sysProcAttr()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if reply, err := s.Do("PING"); err == nil && reply == "PONG" {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redistest: %s on %s exited: %s%s", s.bin, s.Addr, out.String(), s.logTail())
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redistest: %s on %s did not answer: %s", s.bin, s.Addr, s.logTail())
		case <-tick.C:
		}
	}
}

// URL returns redis://Addr.
func (s *Server) URL() string { return "redis://" + s.Addr }

// PID returns the server's process id, 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	select {
	case <-s.exited:
		return 0
	default:
		return s.cmd.Process.Pid
	}
}

// Kill kills the server with SIGKILL, by its process id, and waits for it
// to end: what is not yet written (or fsynced, for a power cut) is lost.
// Idempotent.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Shutdown stops the server with SHUTDOWN (which writes and fsyncs the
// append-only file) and waits for it to end; it kills the server if it has
// not ended in 10s.
func (s *Server) Shutdown() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_, _ = s.Do("SHUTDOWN")
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		s.Kill()
	}
}

// Do sends one command over a fresh connection and returns the reply as
// text: a simple string, bulk string, integer, or the lines of an array.
func (s *Server) Do(args ...string) (string, error) {
	replies, err := s.doAll(args)
	if err != nil {
		return "", err
	}
	return replies[0], nil
}

// doAll sends commands over one fresh connection and returns their
// replies as Do does: for commands that must share a connection, such as a
// write and the WAIT that counts its replicas.
func (s *Server) doAll(cmds ...[]string) ([]string, error) {
	conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var out []byte
	for _, args := range cmds {
		out = append(out, encodeCommand(args...)...)
	}
	if _, err := conn.Write(out); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	replies := make([]string, len(cmds))
	for i := range replies {
		if replies[i], err = readReply(r); err != nil {
			return nil, err
		}
	}
	return replies, nil
}

// encodeCommand returns a command in Redis's protocol.
func encodeCommand(args ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return []byte(b.String())
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		var parts []string
		for range max(n, 0) {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}

// logTail returns the end of the server's log, for error messages.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.opts.Dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	// Servers are the masters.
	Servers []*Server
}

// StartCluster starts masters cluster-enabled servers, each in its own
// directory under opts.Dir, joins them with `redis-cli --cluster create
// ... --cluster-replicas 0 --cluster-yes`, and returns once every node
// reports cluster_state:ok with all 16384 slots served.
func StartCluster(masters int, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("redistest: Options.Dir is required")
	}
	c := &Cluster{}
	for i := range masters {
		o := opts
		o.Dir = filepath.Join(opts.Dir, "node"+strconv.Itoa(i))
		s, err := start(o, true)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	args := []string{"--cluster", "create"}
	for _, s := range c.Servers {
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %w: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if c.ok() {
			return c, nil
		}
		select {
		case <-ctx.Done():
			info, _ := c.Servers[0].Do("CLUSTER", "INFO")
			c.Stop()
			return nil, fmt.Errorf("redistest: cluster not ok after 30s: %s", info)
		case <-tick.C:
		}
	}
}

// ok reports whether every node says the cluster is ok with every slot
// served.
func (c *Cluster) ok() bool {
	for _, s := range c.Servers {
		info, err := s.Do("CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return false
		}
	}
	return true
}

// URL returns the cluster form redis+cluster://h1:p1,h2:p2,... that
// redisstore.ParseURL reads.
func (c *Cluster) URL() string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// Stop kills every node. Idempotent.
func (c *Cluster) Stop() {
	for _, s := range c.Servers {
		s.Kill()
	}
}
