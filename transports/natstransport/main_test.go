package natstransport_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/natsstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopServers()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// The package's NATS servers, started on first use and shared by every
// test; each test uses subjects of its own.
var (
	embeddedOnce sync.Once
	embedded     *natsstore.Embedded
	embeddedDir  string
	embeddedErr  error

	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error

	externalsMu sync.Mutex
	externals   = map[string]*externalServer{}
)

// sharedEmbedded returns the package's in-process nats-server with
// JetStream, listening on a free loopback port.
func sharedEmbedded(t testing.TB) *natsstore.Embedded {
	t.Helper()
	embeddedOnce.Do(func() {
		embeddedDir, embeddedErr = os.MkdirTemp("", "natstransport-test-*")
		if embeddedErr != nil {
			return
		}
		embedded, embeddedErr = natsstore.StartEmbedded(natsstore.EmbeddedConfig{DataDir: embeddedDir, Listen: "127.0.0.1:-1"})
	})
	require.NoError(t, embeddedErr)
	return embedded
}

// externalServer is a nats-server in a process of its own.
type externalServer struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed when the process exited
}

// sharedExternal returns a separate nats-server process, with JetStream
// when js is set, started once per test run.
func sharedExternal(t testing.TB, js bool) *externalServer {
	t.Helper()
	key := fmt.Sprint(js)
	externalsMu.Lock()
	defer externalsMu.Unlock()
	if srv := externals[key]; srv != nil {
		return srv
	}
	bin := natsServerBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	args := []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port)}
	if js {
		dir, err := os.MkdirTemp(binDir, "js-*")
		require.NoError(t, err)
		args = append(args, "-js", "-sd", dir)
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	srv := &externalServer{cmd: cmd, url: fmt.Sprintf("nats://127.0.0.1:%d", port), done: make(chan struct{})}
	externals[key] = srv
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

// natsServerBinary builds nats-server from the module's own dependency,
// once per test run (the go build cache keeps it between runs).
func natsServerBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "natstransport-bin-*")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "nats-server")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/nats-io/nats-server/v2")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build nats-server: %w\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// stopServers stops every server the tests started and removes their
// files.
func stopServers() {
	externalsMu.Lock()
	for _, srv := range externals {
		_ = srv.cmd.Process.Kill()
		<-srv.done
	}
	externalsMu.Unlock()
	if embedded != nil {
		embedded.Shutdown()
	}
	for _, dir := range []string{embeddedDir, binDir} {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
}
