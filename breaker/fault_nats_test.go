package breaker_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore"
	"github.com/delayq/delayq/core"
)

// TestFaultNATS runs the fault test over natsstore on a nats-server in a
// process of its own, killed with SIGKILL and restarted on the same port and
// store directory; the store's connection reconnects by itself.
func TestFaultNATS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fault test: skipped with -short")
	}
	dir := t.TempDir()
	srv := startNATS(t, dir, 0)
	t.Cleanup(func() { srv.kill() })
	runFault(t, faultBackend{
		name: "nats",
		open: func(t *testing.T) core.Store {
			nc, err := nats.Connect(srv.url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := natsstore.New(ctx, natsstore.Config{Conn: nc, Prefix: "fault", Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			return s
		},
		stop:  func(*testing.T) { srv.kill() },
		start: func(t *testing.T) { srv = startNATS(t, dir, srv.port) },
	})
}

// nats-server is built once per test run from the module's own dependency,
// with the go command that go test puts first on PATH.
var (
	natsBinOnce sync.Once
	natsBin     string
	natsBinErr  error
)

func natsServerBinary(t *testing.T) string {
	t.Helper()
	natsBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "breaker-nats-bin-*")
		if err != nil {
			natsBinErr = err
			return
		}
		natsBin = filepath.Join(dir, "nats-server")
		out, err := exec.Command("go", "build", "-o", natsBin, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			natsBinErr = fmt.Errorf("go build nats-server: %w\n%s", err, out)
		}
	})
	require.NoError(t, natsBinErr)
	return natsBin
}

// natsProcess is a nats-server process.
type natsProcess struct {
	cmd  *exec.Cmd
	url  string
	port int
	done chan struct{} // closed when the process exited
}

// startNATS starts nats-server with JetStream in dir on port (a free one
// when 0) and waits until it is ready.
func startNATS(t *testing.T, dir string, port int) *natsProcess {
	t.Helper()
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port = l.Addr().(*net.TCPAddr).Port
		require.NoError(t, l.Close())
	}
	cmd := exec.Command(natsServerBinary(t), "-js", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-sd", dir)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &natsProcess{cmd: cmd, url: fmt.Sprintf("nats://127.0.0.1:%d", port), port: port, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "Server is ready") {
				close(ready)
				signalled = true
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case <-ready:
	case <-p.done:
		t.Fatal("nats-server exited before it was ready")
	case <-time.After(60 * time.Second):
		p.kill()
		t.Fatal("nats-server not ready after 60s")
	}
	return p
}

// kill sends SIGKILL and waits for the process to end. Idempotent.
func (p *natsProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
