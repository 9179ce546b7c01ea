package wstransport_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// TestIdleSubscribersMemory measures what idle subscribers cost the server
// in Go memory: DELAYQ_WS_IDLE=N opens N idle subscriptions (spread over
// 100 topics) from a child process, so that only the server's side is
// counted, and reports heap and stack per subscriber after a GC. It is
// skipped unless DELAYQ_WS_IDLE is set:
//
//	DELAYQ_WS_IDLE=10000 go test -run TestIdleSubscribersMemory -v ./transports/wstransport
func TestIdleSubscribersMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DELAYQ_WS_IDLE"))
	if n <= 0 {
		t.Skip("set DELAYQ_WS_IDLE=N to measure N idle subscribers")
	}
	b := setup(t)
	before := memSnapshot()

	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleSubscribersClients$", "-test.v")
	cmd.Env = append(os.Environ(), "DELAYQ_WS_IDLE_CLIENTS="+strconv.Itoa(n), "DELAYQ_WS_IDLE_URL="+b.url("%s", "prefetch=16"))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	ready := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "clients ready") {
			ready = true
			break
		}
	}
	require.True(t, ready, "the client process did not get ready")
	opened := time.Since(start)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	require.Equal(t, n, b.ws.Subscribers())
	after := memSnapshot()
	if path := os.Getenv("DELAYQ_WS_IDLE_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		require.NoError(t, err)
		require.NoError(t, pprof.Lookup("heap").WriteTo(f, 0))
		require.NoError(t, f.Close())
	}

	per := func(a, b uint64) float64 { return float64(int64(a)-int64(b)) / float64(n) / 1024 }
	t.Logf("%d idle subscribers opened in %s", n, opened.Round(time.Millisecond))
	t.Logf("per subscriber: heap in use %.1f KiB, stacks %.1f KiB, goroutines %.2f; total Go memory (heap+stacks) %.1f MiB for %d",
		per(after.heap, before.heap), per(after.stack, before.stack), float64(after.goroutines-before.goroutines)/float64(n),
		float64(after.heap+after.stack)/(1<<20), n)
}

type mem struct {
	heap, stack uint64
	goroutines  int
}

func memSnapshot() mem {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mem{heap: ms.HeapInuse, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

// TestIdleSubscribersClients is the client process of
// TestIdleSubscribersMemory: it opens the connections, reads them (so pings
// are answered) and holds them until its standard input closes.
func TestIdleSubscribersClients(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DELAYQ_WS_IDLE_CLIENTS"))
	if n <= 0 {
		t.Skip("the client process of TestIdleSubscribersMemory")
	}
	url := os.Getenv("DELAYQ_WS_IDLE_URL")
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	conns := make([]*websocket.Conn, n)
	var (
		wg      sync.WaitGroup
		readers sync.WaitGroup
		next    = make(chan int)
	)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				c, _, err := websocket.Dial(ctx, strings.Replace(url, "%s", fmt.Sprintf("wsidle.t%d", i%100), 1), &websocket.DialOptions{HTTPClient: hc})
				cancel()
				if err != nil {
					t.Errorf("dial %d: %v", i, err)
					continue
				}
				conns[i] = c
				readers.Go(func() {
					for {
						if _, _, err := c.Read(context.Background()); err != nil {
							return
						}
					}
				})
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	fmt.Println("clients ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		if c != nil {
			_ = c.CloseNow()
		}
	}
	readers.Wait()
}
