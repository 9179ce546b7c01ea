package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/internal/looport"
	"github.com/delayq/delayq/transports/httptransport"
	"github.com/delayq/delayq/transports/wstransport"
)

// wsService is an engine over memstore served over HTTP with the subscribe
// route, on a loopback address that stays the same across restarts.
type wsService struct {
	t      *testing.T
	engine *core.Engine
	// store reports each ack and retry stored.
	store *storetest.SignalStore
	// seen holds the outcomes read so far: outcomes of different jobs come
	// in any order, so one waited for later may have been read already.
	seen map[storetest.Outcome]bool
	addr string
	srv  *http.Server
	ws   *wstransport.Server
	done chan struct{}
}

func startWSService(t *testing.T) *wsService {
	t.Helper()
	mem := memstore.New(memstore.Config{})
	store := &storetest.SignalStore{Store: mem, Outcomes: make(chan storetest.Outcome, 1024),
		Kinds: []storetest.OutcomeKind{storetest.OutcomeAck, storetest.OutcomeRetry}}
	engine, err := core.NewEngine(core.EngineConfig{Store: store, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	port, err := looport.Free(false) // a port no connection takes while the service is stopped
	require.NoError(t, err)
	s := &wsService{t: t, engine: engine, addr: "127.0.0.1:" + strconv.Itoa(port), store: store, seen: map[storetest.Outcome]bool{}}
	s.start()
	t.Cleanup(func() {
		s.stop()
		require.NoError(t, mem.Close())
	})
	return s
}

// start serves on s.addr.
func (s *wsService) start() {
	s.t.Helper()
	ln, err := net.Listen("tcp", s.addr)
	require.NoError(s.t, err)
	s.addr = ln.Addr().String()
	log := slog.New(slog.DiscardHandler)
	api := httptransport.New(httptransport.Config{Engine: s.engine, Logger: log})
	s.ws, err = wstransport.New(wstransport.Config{Engine: s.engine, Logger: log})
	require.NoError(s.t, err)
	s.ws.Register(api)
	s.srv = &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
}

// stop closes the server and every subscription; idempotent.
func (s *wsService) stop() {
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(s.t, s.srv.Shutdown(ctx))
	require.NoError(s.t, s.ws.Stop(ctx))
	<-s.done
	s.srv = nil
}

// waitOutcome waits for the stored outcome ("ack" or "retry") of job id.
func (s *wsService) waitOutcome(t *testing.T, kind storetest.OutcomeKind, id string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !s.seen[storetest.Outcome{Kind: kind, ID: id}] {
		select {
		case o := <-s.store.Outcomes:
			s.seen[o] = true
		case <-deadline:
			t.Fatalf("no %s of job %s within 10s", kind, id)
		}
	}
}

func (s *wsService) url() string { return "http://" + s.addr }

func (s *wsService) push(t *testing.T, topic, body string) string {
	t.Helper()
	j, err := s.engine.Push(context.Background(), &core.PushParams{Topic: topic, Body: json.RawMessage(body), TTR: time.Hour})
	require.NoError(t, err)
	return j.ID
}

func (s *wsService) state(t *testing.T, id string) core.State {
	t.Helper()
	j, err := s.engine.Get(context.Background(), id)
	require.NoError(t, err)
	return j.State
}

// lines collects what a command writes, line by line, safe for concurrent
// use.
type lines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	all  []string
	news chan string
}

func newLines() *lines { return &lines{news: make(chan string, 1024)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.all = append(l.all, line)
		l.news <- strings.TrimSuffix(line, "\n")
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "") + l.buf.String()
}

// next waits for the next line that contains substr.
func (l *lines) next(t *testing.T, substr string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line := <-l.news:
			if strings.Contains(line, substr) {
				return line
			}
		case <-deadline:
			t.Fatalf("no line with %q within %s; got:\n%s", substr, timeout, l.String())
		}
	}
}

// subscribeRun is `delayq subscribe` running in process.
type subscribeRun struct {
	stdout, stderr *lines
	cancel         context.CancelFunc
	code           chan int
}

// startSubscribe runs `delayq args...` in process until interrupted.
func startSubscribe(t *testing.T, env map[string]string, args ...string) *subscribeRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &subscribeRun{stdout: newLines(), stderr: newLines(), cancel: cancel, code: make(chan int, 1)}
	a := &app{
		stdin:  strings.NewReader(""),
		stdout: r.stdout,
		stderr: r.stderr,
		lookupEnv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		},
	}
	go func() { r.code <- a.run(ctx, args) }()
	t.Cleanup(func() {
		cancel()
		<-r.code
	})
	return r
}

// interrupt cancels the command's context, as SIGINT does, and returns its
// exit code.
func (r *subscribeRun) interrupt(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.code:
		r.code <- code
		return code
	case <-time.After(15 * time.Second):
		t.Fatal("subscribe did not exit within 15s of the interrupt")
	}
	return -1
}

// printed decodes a printed delivery line.
func printed(t *testing.T, line string) deliveryLine {
	t.Helper()
	var d deliveryLine
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&d), line)
	return d
}

func TestSubscribePrintsAndAcks(t *testing.T) {
	t.Parallel()
	svc := startWSService(t)
	run := startSubscribe(t, map[string]string{"DELAYQ_SERVER": svc.url()}, "subscribe", "orders.close", "--prefetch", "2")
	run.stderr.next(t, "subscribed to orders.close", 10*time.Second)

	ids := []string{
		svc.push(t, "orders.close", "{ \"order\" : 42,\n \"note\": \"<a&b>\" }"),
		svc.push(t, "orders.close", `"two"`),
		svc.push(t, "orders.close", `3`),
	}
	bodies := []string{`{"order":42,"note":"<a&b>"}`, `"two"`, `3`}
	for i, id := range ids {
		line := run.stdout.next(t, id, 10*time.Second)
		require.NotContains(t, line, "\n")
		d := printed(t, line)
		require.Equal(t, "orders.close", d.Topic)
		require.Equal(t, bodies[i], string(d.Body), "the body is compacted, not escaped")
		require.Equal(t, 1, d.Attempt)
		require.NotEmpty(t, d.Lease)
		require.NotEmpty(t, d.RunAt)
		require.NotEmpty(t, d.LeaseExpiresAt)
	}
	for _, id := range ids {
		svc.waitOutcome(t, "ack", id)
		require.Equal(t, core.StateDone, svc.state(t, id), "acknowledged once printed")
	}
	require.Equal(t, exitOK, run.interrupt(t), run.stderr.String())
}

func TestSubscribeNoAck(t *testing.T) {
	t.Parallel()
	svc := startWSService(t)
	run := startSubscribe(t, nil, "subscribe", "peek", "--no-ack", "--server", svc.url())
	id := svc.push(t, "peek", `{}`)
	printed(t, run.stdout.next(t, id, 10*time.Second))
	require.Equal(t, core.StateReserved, svc.state(t, id), "held, not acknowledged")
	// Exiting hands the delivery back at once.
	require.Equal(t, exitOK, run.interrupt(t))
	svc.waitOutcome(t, "retry", id)
	j, err := svc.engine.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, core.StateReady, j.State)
	require.Equal(t, "subscriber disconnected", j.LastError)
}

func TestSubscribeReconnects(t *testing.T) {
	t.Parallel()
	svc := startWSService(t)
	run := startSubscribe(t, nil, "subscribe", "again", "--server", svc.url())
	run.stderr.next(t, "subscribed to again", 10*time.Second)
	first := svc.push(t, "again", `1`)
	run.stdout.next(t, first, 10*time.Second)

	// The server goes away and comes back on the same address.
	svc.stop()
	run.stderr.next(t, "reconnecting in", 10*time.Second)
	svc.start()
	run.stderr.next(t, "subscribed to again", 30*time.Second)
	second := svc.push(t, "again", `2`)
	run.stdout.next(t, second, 10*time.Second)
	svc.waitOutcome(t, "ack", first)
	svc.waitOutcome(t, "ack", second)
	require.Equal(t, exitOK, run.interrupt(t))
}

// TestSubscribeCannotConnect: with nothing at --server, subscribe says
// once that it retries, then after a bounded number of attempts that it
// cannot connect, and exits 1, rather than reporting a subscription lost
// that never began and retrying for ever.
func TestSubscribeCannotConnect(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	res := runApp(t, nil, "", "subscribe", "later", "--server", "http://"+addr)
	require.Equal(t, exitError, res.code, res.stderr)
	require.Equal(t, 1, strings.Count(res.stderr, "retrying"), res.stderr)
	require.Contains(t, res.stderr, "delayq: cannot subscribe to later at http://"+addr+" yet: ")
	require.Contains(t, res.stderr, fmt.Sprintf("delayq: cannot connect to http://%s (--server, DELAYQ_SERVER) after %d attempts: ", addr, subscribeConnectAttempts))
	require.NotContains(t, res.stderr, "lost")
	require.Empty(t, res.stdout)
}

// TestSubscribeWaitsForTheServer: a server that comes up within the
// attempts is subscribed to.
func TestSubscribeWaitsForTheServer(t *testing.T) {
	t.Parallel()
	svc := startWSService(t)
	svc.stop()
	run := startSubscribe(t, nil, "subscribe", "later", "--server", svc.url())
	run.stderr.next(t, "cannot subscribe to later", 10*time.Second)
	svc.start()
	run.stderr.next(t, "subscribed to later", 10*time.Second)
	id := svc.push(t, "later", `1`)
	run.stdout.next(t, id, 10*time.Second)
	require.Equal(t, exitOK, run.interrupt(t), "an interrupt exits 0")
}

func TestSubscribeRefused(t *testing.T) {
	t.Parallel()
	svc := startWSService(t)
	res := runApp(t, nil, "", "subscribe", "bad..topic", "--server", svc.url())
	require.Equal(t, exitError, res.code)
	require.Contains(t, res.stderr, "invalid_argument")
	require.Contains(t, res.stderr, "topic")

	res = runApp(t, nil, "", "subscribe", "t", "--prefetch", "0", "--server", svc.url())
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "--prefetch")
	res = runApp(t, map[string]string{"DELAYQ_PREFETCH": "many"}, "", "subscribe", "t", "--server", svc.url())
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "DELAYQ_PREFETCH")
	res = runApp(t, nil, "", "subscribe", "--server", svc.url())
	require.Equal(t, exitUsage, res.code)
	res = runApp(t, nil, "", "subscribe", "t", "--server", "ftp://x")
	require.Equal(t, exitUsage, res.code)
}

func TestSubscribeStopsOnWriteFailure(t *testing.T) {
	t.Parallel()
	svc := startWSService(t)
	id := svc.push(t, "broken.pipe", `{}`)
	a := &app{
		stdin:     strings.NewReader(""),
		stdout:    failingWriter{},
		stderr:    newLines(),
		lookupEnv: func(string) (string, bool) { return "", false },
	}
	code := a.run(t.Context(), []string{"subscribe", "broken.pipe", "--server", svc.url()})
	require.Equal(t, exitError, code)
	svc.waitOutcome(t, "retry", id)
	j, err := svc.engine.Get(context.Background(), id)
	require.NoError(t, err)
	require.NotEqual(t, core.StateDone, j.State, "not acknowledged when it could not be printed")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestSubscribeURL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ws://127.0.0.1:8080/v1/topics/a.b/subscribe?prefetch=16", subscribeURL("http://127.0.0.1:8080", "a.b", 16))
	require.Equal(t, "wss://q.example/base/v1/topics/x/subscribe?prefetch=1", subscribeURL("https://q.example/base", "x", 1))
}

// TestE2ETransports runs `delayq serve` on the embedded default and checks
// the transports it wires: a NATS publish with Delayq-Delay reaches a NATS
// subscriber of the topic's delivery subject at its time, and the
// `delayq subscribe` binary prints a delivery, acks it and exits 0 on
// SIGINT.
func TestE2ETransports(t *testing.T) {
	t.Parallel()
	srv := startServer(t, defaultArgs(t.TempDir())...)
	api := newCaller(t, srv.HTTPURL)

	t.Run("NATSIntakeAndDelivery", func(t *testing.T) {
		t.Parallel()
		status, answer := api.call(http.MethodPut, "/v1/topics/e2e.nats", map[string]any{"delivery": map[string]any{"type": "nats"}})
		require.Equal(t, http.StatusOK, status, "%s", answer)
		nc := srv.natsClient(t)
		sub, err := nc.SubscribeSync("delayq.deliver.e2e.nats")
		require.NoError(t, err)
		require.NoError(t, nc.Flush())

		m := nats.NewMsg("delayq.push.e2e.nats")
		m.Data = []byte(`{"remind": 1}`)
		m.Header.Set("Delayq-Delay", "500ms")
		res, err := nc.RequestMsg(m, 10*time.Second)
		require.NoError(t, err)
		var pushed struct {
			ID    string    `json:"id"`
			RunAt time.Time `json:"run_at"`
		}
		require.NoError(t, json.Unmarshal(res.Data, &pushed), "%s", res.Data)
		require.NotEmpty(t, pushed.ID, "%s", res.Data)

		got, err := sub.NextMsg(15 * time.Second)
		require.NoError(t, err)
		at := time.Now()
		t.Logf("NATS delivery %s after run_at", at.Sub(pushed.RunAt))
		require.False(t, at.Before(pushed.RunAt), "delivered before its run_at")
		require.Less(t, at.Sub(pushed.RunAt), 1500*time.Millisecond)
		require.Equal(t, `{"remind": 1}`, string(got.Data))
		require.Equal(t, pushed.ID, got.Header.Get("Delayq-Id"))
		require.Equal(t, "1", got.Header.Get("Delayq-Attempt"))

		var job struct {
			State string `json:"state"`
		}
		require.Eventually(t, func() bool {
			api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
			return job.State == "done"
		}, 10*time.Second, 20*time.Millisecond, "state %q", job.State)

		// Cancel over NATS.
		m = nats.NewMsg("delayq.push.e2e.nats")
		m.Header.Set("Delayq-Delay", "1h")
		res, err = nc.RequestMsg(m, 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(res.Data, &pushed))
		res, err = nc.Request("delayq.cancel", []byte(pushed.ID), 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, "{}", string(res.Data))
	})

	t.Run("SubscribeBinary", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(binary(t), "subscribe", "e2e.ws", "--prefetch", "4")
		cmd.Env = append(childEnv(), "DELAYQ_SERVER="+srv.HTTPURL)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		out := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				out <- sc.Text()
			}
			exited <- cmd.Wait()
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})

		var pushed struct {
			ID string `json:"id"`
		}
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.ws", "body": map[string]int{"n": 1}}, http.StatusCreated, &pushed)
		select {
		case line := <-out:
			d := printed(t, line)
			require.Equal(t, pushed.ID, d.ID)
			require.JSONEq(t, `{"n":1}`, string(d.Body))
		case err := <-exited:
			t.Fatalf("subscribe exited: %v\n%s", err, stderr.String())
		case <-time.After(15 * time.Second):
			t.Fatalf("no delivery printed within 15s\n%s", stderr.String())
		}
		var job struct {
			State string `json:"state"`
		}
		require.Eventually(t, func() bool {
			api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
			return job.State == "done"
		}, 10*time.Second, 20*time.Millisecond, "state %q", job.State)

		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		select {
		case err := <-exited:
			require.NoError(t, err, "exit code 0 on SIGINT\n%s", stderr.String())
			exited <- nil
		case <-time.After(15 * time.Second):
			t.Fatal("subscribe did not exit within 15s of SIGINT")
		}
	})
}
