package webhook

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// breakerBundle is an engine over memstore delivering through endpoint
// breakers to one receiver, whose paths answer: /ok 200, /fail 503, /slow
// only once the client gave up.
type breakerBundle struct {
	engine   *core.Engine
	store    *storetest.SignalStore
	breakers *breaker.Deliverer
	// url is the receiver's base URL; host its host:port.
	url, host string

	mu sync.Mutex
	// sent records, by job id, the Delayq-Attempt of every request the
	// receiver saw.
	sent map[string][]string
}

func setupBreakerEngine(t *testing.T, openFor time.Duration) *breakerBundle {
	t.Helper()
	b := &breakerBundle{sent: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		b.sent[r.Header.Get("Delayq-Id")] = append(b.sent[r.Header.Get("Delayq-Id")], r.Header.Get("Delayq-Attempt"))
		b.mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/slow":
			<-r.Context().Done() // the topic's 1ms timeout gives up first
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	b.url, b.host = srv.URL, strings.TrimPrefix(srv.URL, "http://")

	mem := memstore.New(memstore.Config{})
	b.store = &storetest.SignalStore{Store: mem, Outcomes: make(chan storetest.Outcome, 1000),
		Kinds: []storetest.OutcomeKind{storetest.OutcomeAck, storetest.OutcomeBury}}
	wh := New(Config{})
	t.Cleanup(wh.CloseIdleConnections)
	b.breakers = breaker.NewDeliverer(wh, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 3, OpenTimeout: openFor, Logger: slog.New(slog.DiscardHandler),
	}})
	engine, err := core.NewEngine(core.EngineConfig{
		Store:      b.store,
		Logger:     slog.New(slog.DiscardHandler),
		Deliverers: map[string]core.Deliverer{core.DeliveryWebhook: b.breakers},
	})
	require.NoError(t, err)
	b.engine = engine
	require.NoError(t, engine.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, engine.Stop(ctx))
		require.NoError(t, mem.Close())
	})
	return b
}

// topic configures a webhook topic posting to path on the receiver.
func (b *breakerBundle) topic(t *testing.T, name, path string, mod func(*core.Topic)) {
	t.Helper()
	tp := &core.Topic{Name: name, MaxAttempts: 3,
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: b.url + path},
		Backoff:  core.Backoff{Initial: time.Millisecond, Max: time.Millisecond, Factor: 1, Jitter: -1}}
	if mod != nil {
		mod(tp)
	}
	require.NoError(t, b.engine.PutTopic(context.Background(), tp))
}

func (b *breakerBundle) push(t *testing.T, p core.PushParams) string {
	t.Helper()
	j, err := b.engine.Push(context.Background(), &p)
	require.NoError(t, err)
	return j.ID
}

// acked waits for the acks of ids, failing on any bury among them, and
// returns how many other jobs were buried meanwhile.
func (b *breakerBundle) acked(t *testing.T, ids []string) (buried int) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		o := recv(t, b.store.Outcomes)
		if o.Kind == storetest.OutcomeBury {
			require.False(t, want[o.ID], "job %s buried", o.ID)
			buried++
			continue
		}
		delete(want, o.ID)
	}
	return buried
}

func (b *breakerBundle) sentTo(id string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.sent[id]...)
}

// TestBreakerTopicOwnFailures: a topic that fails by its own choice (a 1ms
// timeout, a path that answers 503) opens its own circuit only: the jobs
// of a healthy topic on the same host and port, one attempt each, are all
// delivered.
func TestBreakerTopicOwnFailures(t *testing.T) {
	t.Parallel()
	for name, mod := range map[string]func(*core.Topic){
		"Timeout1ms":  func(tp *core.Topic) { tp.Delivery.URL += "slow"; tp.Delivery.Timeout = time.Millisecond },
		"FailingPath": func(tp *core.Topic) { tp.Delivery.URL += "fail" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupBreakerEngine(t, time.Hour)
			b.topic(t, "bad", "/", mod)
			b.topic(t, "healthy", "/ok", func(tp *core.Topic) { tp.MaxAttempts = 1 })
			for i := range 3 {
				b.push(t, core.PushParams{Topic: "bad", Body: []byte(fmt.Sprint(i))})
			}
			require.Eventually(t, func() bool { return b.breakers.State("bad", b.host) == breaker.StateOpen },
				10*time.Second, time.Millisecond)

			var ids []string
			for i := range 10 {
				ids = append(ids, b.push(t, core.PushParams{Topic: "healthy", Body: []byte(fmt.Sprint(i))}))
			}
			b.acked(t, ids)
			for _, id := range ids {
				require.Equal(t, []string{"1"}, b.sentTo(id))
			}
			require.Equal(t, breaker.StateClosed, b.breakers.State("healthy", b.host))
		})
	}
}

// TestBreakerJobURLPath: jobs with their own url at a path that answers
// 503 open that url's circuit only: the topic's own deliveries go on, and
// the refused jobs wait for the probe time instead of going dead.
func TestBreakerJobURLPath(t *testing.T) {
	t.Parallel()
	b := setupBreakerEngine(t, time.Hour)
	b.topic(t, "hooks", "/ok", func(tp *core.Topic) { tp.Delivery.AllowJobURL = true; tp.MaxAttempts = 1 })
	var own []string
	for i := range 4 {
		own = append(own, b.push(t, core.PushParams{Topic: "hooks", URL: b.url + "/fail?i=" + fmt.Sprint(i), MaxAttempts: 3}))
	}
	require.Eventually(t, func() bool { return b.breakers.JobURLState("hooks", b.url+"/fail") == breaker.StateOpen },
		10*time.Second, time.Millisecond)

	var ids []string
	for i := range 10 {
		ids = append(ids, b.push(t, core.PushParams{Topic: "hooks", Body: []byte(fmt.Sprint(i))}))
	}
	b.acked(t, ids)
	require.Equal(t, breaker.StateClosed, b.breakers.State("hooks", b.host))
	// Every own-url job ends up waiting for its circuit's probe time, an
	// hour away; none goes dead unsent.
	require.Eventually(t, func() bool {
		for _, id := range own {
			j, err := b.engine.Get(context.Background(), id)
			require.NoError(t, err)
			require.NotEqual(t, core.StateDead, j.State, "job %s: %s", id, j.LastError)
			if j.State != core.StateScheduled || !strings.Contains(j.LastError, "not sent: circuit breaker open") {
				return false
			}
			require.Greater(t, time.Until(j.RunAt), 50*time.Minute, "retried at the probe time")
		}
		return true
	}, 10*time.Second, time.Millisecond)
}

// TestBreakerFailingNeighbour is the scenario as a new user would
// try it: one topic whose webhook answers 503 and one on the same host and
// port answering 200, with default concurrency. No job of the healthy topic
// spends an attempt on the other's breaker, and every job of the failing
// topic goes dead only after its last attempt was sent.
func TestBreakerFailingNeighbour(t *testing.T) {
	t.Parallel()
	b := setupBreakerEngine(t, 50*time.Millisecond)
	b.topic(t, "failing", "/fail", nil)
	b.topic(t, "healthy", "/ok", nil)
	var failing, healthy []string
	for i := range 6 {
		failing = append(failing, b.push(t, core.PushParams{Topic: "failing", Body: []byte(fmt.Sprint(i))}))
		healthy = append(healthy, b.push(t, core.PushParams{Topic: "healthy", Body: []byte(fmt.Sprint(i))}))
	}
	buried := b.acked(t, healthy)
	b.store.Wait(t, storetest.OutcomeBury, len(failing)-buried, 30*time.Second)
	ctx := context.Background()
	for _, id := range healthy {
		j, err := b.engine.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, 1, j.Attempt, "job %s spent no attempt on a refusal", id)
		require.Equal(t, []string{"1"}, b.sentTo(id))
	}
	for _, id := range failing {
		j, err := b.engine.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, core.StateDead, j.State)
		require.Contains(t, j.LastError, "503", "job %s went dead on an answer, not on a refusal", id)
		sent := b.sentTo(id)
		require.NotEmpty(t, sent)
		require.Equal(t, fmt.Sprint(j.Attempt), sent[len(sent)-1], "job %s: its last attempt was sent", id)
	}
}
