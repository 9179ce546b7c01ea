// Package natstest runs real nats-server processes for tests: a server in
// a process of its own on a loopback port, optionally with JetStream in a
// directory of the caller's, that a test can kill with SIGKILL and start
// again on the same port and directory.
//
// The nats-server binary is built once per test process from the module's
// own github.com/nats-io/nats-server/v2 dependency, with the go command on
// PATH (the go build cache keeps it between runs), so no install is needed.
// Servers are killed by process id when stopped, by Cleanup at the end of
// the run, and (on Linux) when the test process dies.
//
// ClientConn and RequireViolation check what a client user may do on a
// server (the in-process one of natsserver included): connect as that
// user, then wait for the permission violation an act should cause.
package natstest

import (
	"bufio"
	"fmt"
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

// ReadyTimeout bounds how long Start waits for a server to be ready.
const ReadyTimeout = 60 * time.Second

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error

	serversMu sync.Mutex
	servers   []*Server
)

// Binary returns the path of a nats-server binary built from the module's
// nats-server dependency with `go build`, once per test process, into a
// temporary directory that Cleanup removes. It fails tb if the build fails.
func Binary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "natstest-bin-*")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "nats-server")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("natstest: go build nats-server: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binPath
}

// Options configure a server.
type Options struct {
	// Dir is the JetStream store directory: when set, the server runs with
	// JetStream storing there; when empty, without JetStream.
	Dir string
	// Port is the loopback port to listen on; 0 picks a free one.
	Port int
	// Args are more nats-server arguments.
	Args []string
}

// Server is a nats-server process listening on 127.0.0.1.
type Server struct {
	opts Options // Port resolved
	args []string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process ended
	tail func() string // the last lines of its log
}

// Start starts nats-server with opts and returns once it logged "Server is
// ready", failing tb if it exits first or is not ready within ReadyTimeout.
// The server is not stopped when tb ends: the caller kills it, or Cleanup
// does at the end of the run.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	bin := Binary(tb)
	pick := opts.Port == 0
	for attempt := 1; ; attempt++ {
		o := opts
		if pick {
			o.Port = freePort(tb)
		}
		s, err := start(bin, o)
		if err == nil {
			return s
		}
		if !pick || attempt == 3 || !s.exited() { // a picked port may be taken before the server binds it
			tb.Fatal(err)
		}
	}
}

func start(bin string, opts Options) (*Server, error) {
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(opts.Port)}
	if opts.Dir != "" {
		args = append(args, "-js", "-sd", opts.Dir)
	}
	args = append(args, opts.Args...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = sysProcAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("natstest: start nats-server: %w", err)
	}
	s := &Server{opts: opts, args: args, cmd: cmd, done: make(chan struct{})}
	serversMu.Lock()
	servers = append(servers, s)
	serversMu.Unlock()
	ready := make(chan struct{})
	var tailMu sync.Mutex
	var tail []string // the last lines of stderr, for errors
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			tailMu.Lock()
			if tail = append(tail, line); len(tail) > 20 {
				tail = tail[1:]
			}
			tailMu.Unlock()
			if !signalled && strings.Contains(line, "Server is ready") {
				close(ready)
				signalled = true
			}
		}
		_ = cmd.Wait()
		close(s.done)
	}()
	logTail := func() string {
		tailMu.Lock()
		defer tailMu.Unlock()
		return strings.Join(tail, "\n")
	}
	s.tail = logTail
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		return s, fmt.Errorf("natstest: nats-server %v exited before it was ready:\n%s", args, logTail())
	case <-time.After(ReadyTimeout):
		s.Kill()
		return s, fmt.Errorf("natstest: nats-server %v not ready after %s:\n%s", args, ReadyTimeout, logTail())
	}
}

func (s *Server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// URL returns nats://127.0.0.1:Port.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.opts.Port) }

// Port returns the port the server listens on.
func (s *Server) Port() int { return s.opts.Port }

// Kill kills the server with SIGKILL, by its process id, and waits for it
// to end. Idempotent.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Restart starts a new server with the same options, port and store
// directory, after Kill, and returns it once it is ready, failing tb
// otherwise. s itself stays killed.
func (s *Server) Restart(tb testing.TB) *Server {
	tb.Helper()
	if !s.exited() {
		tb.Fatalf("natstest: nats-server on port %d is still running", s.opts.Port)
	}
	return Start(tb, s.opts)
}

// Cleanup kills every server Start started that is still running and
// removes the binary Binary built. Call it from TestMain after m.Run.
func Cleanup() {
	serversMu.Lock()
	for _, s := range servers {
		s.Kill()
	}
	servers = nil
	serversMu.Unlock()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// freePort returns a loopback port that was free a moment ago, below the
// ephemeral range, so that a server restarted on it finds it free.
func freePort(tb testing.TB) int {
	tb.Helper()
	port, err := looport.Free(false)
	if err != nil {
		tb.Fatalf("natstest: free port: %v", err)
	}
	return port
}
