package natsstore

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopExternals()
	if embeddedSrv != nil {
		embeddedSrv.Shutdown()
	}
	if embeddedDir != "" {
		_ = os.RemoveAll(embeddedDir)
	}
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// A nats-server binary built once per test run from the module's own
// nats-server dependency, so "external" tests talk to a separate process.
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error

	externalsMu sync.Mutex
	externals   []*externalServer

	sharedExternalOnce sync.Once
	sharedExternalSrv  *externalServer
	sharedExternalErr  error
)

// natsServerBinary builds nats-server (cached by the go build cache).
func natsServerBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "natsstore-bin-*")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "nats-server")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binPath, "github.com/nats-io/nats-server/v2")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build nats-server: %w\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// externalServer is a nats-server in a process of its own.
type externalServer struct {
	cmd  *exec.Cmd
	url  string
	port int
	dir  string
	args []string
	done chan struct{} // closed when the process exited
}

// startExternal starts nats-server with JetStream in dir on a free port
// (or on port, when not 0) and waits until it is ready.
func startExternal(t testing.TB, dir string, port int, extra ...string) *externalServer {
	t.Helper()
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port = l.Addr().(*net.TCPAddr).Port
		require.NoError(t, l.Close())
	}
	args := append([]string{"-js", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-sd", dir}, extra...)
	cmd := exec.Command(natsServerBinary(t), args...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	srv := &externalServer{cmd: cmd, url: fmt.Sprintf("nats://127.0.0.1:%d", port), port: port, dir: dir, args: args, done: make(chan struct{})}
	externalsMu.Lock()
	externals = append(externals, srv)
	externalsMu.Unlock()
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
		close(srv.done)
	}()
	select {
	case <-ready:
	case <-srv.done:
		t.Fatalf("nats-server %v exited before it was ready", args)
	case <-time.After(60 * time.Second):
		t.Fatalf("nats-server %v not ready after 60s", args)
	}
	return srv
}

// kill sends SIGKILL to the server process and waits until it is gone.
func (e *externalServer) kill() {
	_ = e.cmd.Process.Kill()
	<-e.done
}

// stopExternals kills every server process the tests started.
func stopExternals() {
	externalsMu.Lock()
	defer externalsMu.Unlock()
	for _, e := range externals {
		e.kill()
	}
	externals = nil
}

// sharedExternal returns the package's shared separate-process server.
func sharedExternal(t testing.TB) *externalServer {
	t.Helper()
	sharedExternalOnce.Do(func() {
		var dir string
		dir, sharedExternalErr = os.MkdirTemp(binDirOrTemp(t), "external-*")
		if sharedExternalErr != nil {
			return
		}
		sharedExternalSrv = startExternal(t, dir, 0)
	})
	require.NoError(t, sharedExternalErr)
	require.NotNil(t, sharedExternalSrv)
	return sharedExternalSrv
}

func binDirOrTemp(t testing.TB) string {
	natsServerBinary(t)
	return binDir
}

// connectURL connects to url, closed at cleanup.
func connectURL(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// TestExternalProcess runs a few focused checks against the separate
// nats-server process.
func TestExternalProcess(t *testing.T) {
	t.Parallel()
	srv := sharedExternal(t)
	nc := connectURL(t, srv.url)
	s := openStore(t, nc, uniquePrefix())
	j := job("ext", 0)
	put(t, s, j)
	got := claim(t, s, "ext", 1, 5*time.Second)
	require.Len(t, got, 1)
	require.Equal(t, j.ID, got[0].ID)
	require.NoError(t, s.Ping(context.Background()))
}
