package wstransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/transports/httptransport"
	"github.com/delayq/delayq/transports/wstransport"
)

// testBundle is what a test drives: a real engine over memstore, with the
// HTTP API and the subscribe route on one test server.
type testBundle struct {
	store  *storetest.SignalStore
	engine *core.Engine
	ws     *wstransport.Server
	srv    *httptest.Server
	http   *http.Client
}

// setup starts a bundle; mods change the transport's configuration.
func setup(t *testing.T, mods ...func(*wstransport.Config)) *testBundle {
	t.Helper()
	return setupOver(t, func(s core.Store) core.Store { return s }, mods...)
}

// setupOver starts a bundle whose engine runs over wrap(memstore).
func setupOver(t *testing.T, wrap func(core.Store) core.Store, mods ...func(*wstransport.Config)) *testBundle {
	t.Helper()
	mem := memstore.New(memstore.Config{})
	store := &storetest.SignalStore{Store: wrap(mem), Outcomes: make(chan storetest.Outcome, 100_000),
		Kinds: []storetest.OutcomeKind{storetest.OutcomeAck, storetest.OutcomeRetry, storetest.OutcomeBury}}
	log := slog.New(slog.DiscardHandler)
	engine, err := core.NewEngine(core.EngineConfig{Store: store, Logger: log})
	require.NoError(t, err)
	cfg := wstransport.Config{Engine: engine, Logger: log}
	for _, m := range mods {
		m(&cfg)
	}
	ws, err := wstransport.New(cfg)
	require.NoError(t, err)
	api := httptransport.New(httptransport.Config{Engine: engine, Logger: log})
	ws.Register(api)
	srv := httptest.NewServer(api)
	b := &testBundle{store: store, engine: engine, ws: ws, srv: srv, http: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, ws.Stop(ctx))
		srv.Close()
		b.http.CloseIdleConnections()
		require.NoError(t, mem.Close())
	})
	return b
}

// push creates a due job with body on topic and returns its id.
func (b *testBundle) push(t *testing.T, topic, body string, mods ...func(*core.PushParams)) string {
	t.Helper()
	p := &core.PushParams{Topic: topic, Body: json.RawMessage(body)}
	for _, m := range mods {
		m(p)
	}
	j, err := b.engine.Push(context.Background(), p)
	require.NoError(t, err)
	return j.ID
}

// pushN creates n due jobs on topic and returns their ids.
func (b *testBundle) pushN(t *testing.T, topic string, n int, mods ...func(*core.PushParams)) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = b.push(t, topic, fmt.Sprintf(`{"n":%d}`, i), mods...)
	}
	return ids
}

func withTTR(d time.Duration) func(*core.PushParams) { return func(p *core.PushParams) { p.TTR = d } }

func withMaxAttempts(n int) func(*core.PushParams) {
	return func(p *core.PushParams) { p.MaxAttempts = n }
}

// job returns a job, which must exist.
func (b *testBundle) job(t *testing.T, id string) *core.Job {
	t.Helper()
	j, err := b.engine.Get(context.Background(), id)
	require.NoError(t, err)
	return j
}

// url returns the subscribe URL of topic with a raw query.
func (b *testBundle) url(topic, query string) string {
	u := "ws" + strings.TrimPrefix(b.srv.URL, "http") + "/v1/topics/" + topic + "/subscribe"
	if query != "" {
		u += "?" + query
	}
	return u
}

// client is a test subscriber. Unless started with read false, a goroutine
// reads its frames into frames.
type client struct {
	t      *testing.T
	conn   *websocket.Conn
	frames chan serverFrame
	// done is closed when the reader stopped; err says why.
	done chan struct{}
	err  error
}

// serverFrame is a frame the server sent, decoded, with its raw form.
type serverFrame struct {
	Type           string          `json:"type"`
	ID             string          `json:"id"`
	Topic          string          `json:"topic"`
	Body           json.RawMessage `json:"body"`
	Attempt        int             `json:"attempt"`
	RunAt          time.Time       `json:"run_at"`
	Lease          string          `json:"lease"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	Code           string          `json:"code"`
	Message        string          `json:"message"`
	Field          string          `json:"field"`
	raw            []byte
}

// subscribe connects a reading client to topic.
func (b *testBundle) subscribe(t *testing.T, topic string, prefetch int) *client {
	t.Helper()
	return b.dial(t, topic, prefetch, true)
}

// dial connects a client; with read false nothing reads its connection, as
// a stuck subscriber.
func (b *testBundle) dial(t *testing.T, topic string, prefetch int, read bool) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, res, err := websocket.Dial(ctx, b.url(topic, fmt.Sprintf("prefetch=%d", prefetch)), &websocket.DialOptions{HTTPClient: b.http})
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
	conn.SetReadLimit(-1)
	c := &client{t: t, conn: conn, frames: make(chan serverFrame, 4096), done: make(chan struct{})}
	t.Cleanup(func() {
		_ = conn.CloseNow()
		if read {
			<-c.done
		}
	})
	if read {
		go c.read()
	} else {
		close(c.done)
	}
	return c
}

func (c *client) read() {
	defer close(c.done)
	for {
		_, data, err := c.conn.Read(context.Background())
		if err != nil {
			c.err = err
			return
		}
		var f serverFrame
		if err := json.Unmarshal(data, &f); err != nil {
			c.err = fmt.Errorf("bad frame %q: %w", data, err)
			return
		}
		f.raw = data
		c.frames <- f
	}
}

// next returns the next frame, failing the test when none comes within
// timeout.
func (c *client) next(timeout time.Duration) serverFrame {
	c.t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-c.done:
		select {
		case f := <-c.frames:
			return f
		default:
		}
		c.t.Fatalf("connection ended while waiting for a frame: %v", c.err)
	case <-time.After(timeout):
		c.t.Fatalf("no frame within %s", timeout)
	}
	return serverFrame{}
}

// nextJob returns the next frame, which must be a job.
func (c *client) nextJob(timeout time.Duration) serverFrame {
	c.t.Helper()
	f := c.next(timeout)
	require.Equal(c.t, "job", f.Type, "frame %s", f.raw)
	return f
}

// ackNext takes the next n frames, which must be jobs, then acknowledges
// each.
func (c *client) ackNext(n int) {
	c.t.Helper()
	frames := make([]serverFrame, n)
	for i := range frames {
		frames[i] = c.nextJob(5 * time.Second)
	}
	for _, f := range frames {
		c.ack(f)
	}
}

// nextError returns the next frame, which must be an error with code.
func (c *client) nextError(code string) serverFrame {
	c.t.Helper()
	f := c.next(5 * time.Second)
	require.Equal(c.t, "error", f.Type, "frame %s", f.raw)
	require.Equal(c.t, code, f.Code, "frame %s", f.raw)
	require.NotEmpty(c.t, f.Message)
	return f
}

// send writes a text frame: a string as is, anything else as JSON.
func (c *client) send(v any) {
	c.t.Helper()
	require.NoError(c.t, c.trySend(v))
}

func (c *client) trySend(v any) error {
	data, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		data = string(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.conn.Write(ctx, websocket.MessageText, []byte(data))
}

func (c *client) ack(f serverFrame) {
	c.t.Helper()
	c.send(map[string]string{"type": "ack", "id": f.ID, "lease": f.Lease})
}

// closeStatus waits for the connection to end and returns its close status.
func (c *client) closeStatus(timeout time.Duration) websocket.StatusCode {
	c.t.Helper()
	select {
	case <-c.done:
		return websocket.CloseStatus(c.err)
	case <-time.After(timeout):
		c.t.Fatalf("the connection did not end within %s", timeout)
	}
	return 0
}

// answer is an HTTP answer read whole.
type answer struct {
	status int
	header http.Header
	body   map[string]any
}

// get sends a plain GET to path with headers.
func (b *testBundle) get(t *testing.T, method, path string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := b.http.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	a := answer{status: res.StatusCode, header: res.Header}
	require.NoError(t, json.Unmarshal(data, &a.body), "%s", data)
	return a
}

// requireErrorBody checks a JSON error answer.
func requireErrorBody(t *testing.T, a answer, status int, code, field string) {
	t.Helper()
	require.Equal(t, status, a.status, "%v", a.body)
	e, ok := a.body["error"].(map[string]any)
	require.True(t, ok, "%v", a.body)
	require.Equal(t, code, e["code"])
	require.Equal(t, field, e["field"])
	require.NotEmpty(t, e["message"])
}
