package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/telemetry"
	"github.com/delayq/delayq/transports/httptransport"
	"github.com/delayq/delayq/transports/webhook"
)

// ackStore signals each ack after the stores below it recorded it.
type ackStore struct {
	core.Store
	acked chan string
}

func (s *ackStore) AckJob(ctx context.Context, p *core.AckJobParams) (core.SettleResult, error) {
	res, err := s.Store.AckJob(ctx, p)
	if err == nil {
		s.acked <- p.ID
	}
	return res, err
}

// testBundle is the service as `delayq serve` wires it, over memstore:
// engine -> telemetry store -> breaker -> memstore, and telemetry deliverer
// -> endpoint breakers -> webhook, served by httptransport with /metrics.
type testBundle struct {
	api      *httptest.Server
	hook     *httptest.Server
	received chan http.Header // headers of every webhook request
	acked    chan string
	engine   *core.Engine
}

// setup wires the service; wrap, when set, wraps memstore under the breaker.
func setup(t *testing.T, cfg telemetry.Config, metrics http.Handler, wrap ...func(core.Store) core.Store) *testBundle {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	b := &testBundle{received: make(chan http.Header, 1000), acked: make(chan string, 1000)}
	b.hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.received <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(b.hook.Close)

	var mem core.Store = memstore.New(memstore.Config{})
	for _, w := range wrap {
		mem = w(mem)
	}
	br := breaker.New(mem, breaker.Config{Logger: quiet, OpenTimeout: time.Hour})
	store, err := telemetry.NewStore(br, cfg)
	require.NoError(t, err)
	hooks := webhook.New(webhook.Config{Logger: quiet})
	t.Cleanup(hooks.CloseIdleConnections)
	endpoints := breaker.NewDeliverer(hooks, breaker.DelivererConfig{Config: breaker.Config{Logger: quiet}})
	deliverer, err := telemetry.NewDeliverer(endpoints, cfg)
	require.NoError(t, err)
	unregister, err := telemetry.ObserveBreakers(cfg, br, endpoints)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, unregister()) })

	engine, err := core.NewEngine(core.EngineConfig{
		Store:      &ackStore{Store: store, acked: b.acked},
		Logger:     quiet,
		Deliverers: map[string]core.Deliverer{core.DeliveryWebhook: deliverer},
	})
	require.NoError(t, err)
	b.engine = engine
	ctx := context.Background()
	require.NoError(t, engine.Start(ctx))
	srv := httptransport.New(httptransport.Config{Engine: engine, Logger: quiet})
	if metrics != nil {
		srv.Handle("GET /metrics", metrics)
	}
	b.api = httptest.NewServer(srv)
	t.Cleanup(func() {
		b.api.Close()
		require.NoError(t, engine.Stop(ctx))
		require.NoError(t, store.Close())
	})
	require.NoError(t, engine.PutTopic(ctx, &core.Topic{
		Name:     "orders.close",
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: b.hook.URL + "/hook"},
	}))
	return b
}

// push posts one job and returns its id.
func (b *testBundle) push(t *testing.T, body string, header http.Header) string {
	t.Helper()
	resp := b.post(t, body, header)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	id := resp.Header.Get("Location")
	require.NotEmpty(t, id)
	return id[len("/v1/jobs/"):]
}

// post posts one job and returns the answer, its body read.
func (b *testBundle) post(t *testing.T, body string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.api.URL+"/v1/jobs", bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

// waitAcked waits for n acks.
func (b *testBundle) waitAcked(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		select {
		case id := <-b.acked:
			ids = append(ids, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d jobs acked", len(ids), n)
		}
	}
	return ids
}
