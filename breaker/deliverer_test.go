package breaker_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/transports/webhook"
)

// fakeDeliverer fails every delivery to a host in dead and counts the
// deliveries that reach it by host.
type fakeDeliverer struct {
	mu    sync.Mutex
	dead  map[string]error
	calls map[string]int
}

func newFakeDeliverer() *fakeDeliverer {
	return &fakeDeliverer{dead: map[string]error{}, calls: map[string]int{}}
}

func (f *fakeDeliverer) ValidateTopic(*core.Topic) error { return nil }

func (f *fakeDeliverer) Deliver(ctx context.Context, p *core.DeliverParams) error {
	u, _ := url.Parse(cmp.Or(p.Job.URL, p.Topic.Delivery.URL))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[u.Host]++
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delivery interrupted: %w", err)
	}
	return f.dead[u.Host]
}

func (f *fakeDeliverer) setDead(host string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead[host] = err
}

func (f *fakeDeliverer) callsTo(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[host]
}

// statusErr is an answer with an HTTP status, as webhook.StatusError.
type statusErr int

func (e statusErr) Error() string   { return fmt.Sprintf("status %d", int(e)) }
func (e statusErr) StatusCode() int { return int(e) }

func webhookTopic(name, host string) *core.Topic {
	t := core.Topic{Name: name, Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://" + host + "/hook"}}.WithDefaults()
	return &t
}

func TestDelivererEndpointsApart(t *testing.T) {
	t.Parallel()
	inner := newFakeDeliverer()
	inner.setDead("dead.test", errors.New("request failed: connection refused"))
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 3, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	ctx := context.Background()
	dead, live, sameHost := webhookTopic("a", "dead.test"), webhookTopic("b", "live.test:8080"), webhookTopic("c", "dead.test")
	job := &core.Job{ID: "j", Attempt: 1}

	for range 3 {
		require.ErrorContains(t, d.Deliver(ctx, &core.DeliverParams{Topic: dead, Job: job}), "connection refused")
		require.NoError(t, d.Deliver(ctx, &core.DeliverParams{Topic: live, Job: job}))
	}
	require.Equal(t, breaker.StateOpen, d.State("dead.test"))
	require.Equal(t, breaker.StateClosed, d.State("live.test:8080"))
	for _, topic := range []*core.Topic{dead, sameHost} {
		start := time.Now()
		err := d.Deliver(ctx, &core.DeliverParams{Topic: topic, Job: job})
		require.Less(t, time.Since(start), 50*time.Millisecond)
		require.ErrorIs(t, err, breaker.ErrOpen)
		require.ErrorIs(t, err, core.ErrUnavailable)
		oe, ok := errors.AsType[*breaker.OpenError](err)
		require.True(t, ok)
		require.Equal(t, "dead.test", oe.Endpoint)
		require.Greater(t, oe.RetryAfter(), 59*time.Minute, "retried no sooner than the breaker half-opens")
		require.LessOrEqual(t, oe.RetryAfter(), time.Hour)
	}
	require.Equal(t, 3, inner.callsTo("dead.test"), "deliveries failed fast without reaching the endpoint")
	require.NoError(t, d.Deliver(ctx, &core.DeliverParams{Topic: live, Job: job}))
	require.Equal(t, 4, inner.callsTo("live.test:8080"))
	require.Equal(t, []breaker.EndpointState{
		{Endpoint: "dead.test", State: breaker.StateOpen},
		{Endpoint: "live.test:8080", State: breaker.StateClosed},
	}, d.States())
}

// TestDelivererJobURLEndpoint: a job with its own URL counts for that
// URL's host, not its topic's.
func TestDelivererJobURLEndpoint(t *testing.T) {
	t.Parallel()
	inner := newFakeDeliverer()
	inner.setDead("dead.test", errors.New("request failed: connection refused"))
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 2, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	ctx := context.Background()
	topic := webhookTopic("a", "live.test")
	topic.Delivery.AllowJobURL = true
	own := &core.Job{ID: "own", Attempt: 1, URL: "https://dead.test/own"}
	for range 2 {
		require.Error(t, d.Deliver(ctx, &core.DeliverParams{Topic: topic, Job: own}))
	}
	require.Equal(t, breaker.StateOpen, d.State("dead.test"))
	require.Equal(t, breaker.StateClosed, d.State("live.test"))
	require.NoError(t, d.Deliver(ctx, &core.DeliverParams{Topic: topic, Job: &core.Job{ID: "plain", Attempt: 1}}))
	require.Equal(t, "http://live.test/hook", topic.Delivery.URL, "the topic is not changed")
	// The inner deliverer checks no job URLs: refused, as by the engine.
	require.ErrorContains(t, d.ValidateJobURL("https://svc/"), "not available on this server")
}

func TestDelivererCounts(t *testing.T) {
	t.Parallel()
	inner := newFakeDeliverer()
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 2, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	topic := webhookTopic("a", "h.test")
	job := &core.Job{ID: "j", Attempt: 1}

	// Answers that refuse the request do not count.
	for _, code := range []int{301, 400, 404, 410} {
		inner.setDead("h.test", statusErr(code))
		require.Error(t, d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: job}))
	}
	// Nor does a delivery interrupted by its context.
	inner.setDead("h.test", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		require.ErrorIs(t, d.Deliver(ctx, &core.DeliverParams{Topic: topic, Job: job}), context.Canceled)
	}
	require.Equal(t, breaker.StateClosed, d.State("h.test"))
	// 429 and 5xx do.
	inner.setDead("h.test", statusErr(429))
	require.Error(t, d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: job}))
	inner.setDead("h.test", statusErr(503))
	require.Error(t, d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: job}))
	require.Equal(t, breaker.StateOpen, d.State("h.test"))
}

func TestEndpointOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, "svc:8443", breaker.EndpointOf(&core.Topic{Delivery: core.Delivery{Type: "webhook", URL: "https://svc:8443/a?b"}}))
	require.Equal(t, "nats:delayq.deliver.x", breaker.EndpointOf(&core.Topic{Delivery: core.Delivery{Type: "nats", Subject: "delayq.deliver.x"}}))
}

// TestDeadEndpointOverEngine runs an engine with one topic whose endpoint is
// dead and one whose endpoint answers: every job of the live topic is
// delivered, and every job of the dead one is retried after the breaker's
// open time, with one attempt used, though its backoff is 1ms.
func TestDeadEndpointOverEngine(t *testing.T) {
	t.Parallel()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	store := &storetest.SignalStore{Store: mem, Outcomes: make(chan storetest.Outcome, 100),
		Kinds: []storetest.OutcomeKind{storetest.OutcomeAck, storetest.OutcomeRetry}}
	inner := newFakeDeliverer()
	inner.setDead("dead.test", errors.New("timeout after 10s"))
	const openFor = 10 * time.Minute
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 3, OpenTimeout: openFor, Logger: slog.New(slog.DiscardHandler),
	}})
	engine, err := core.NewEngine(core.EngineConfig{
		Store:      store,
		Logger:     slog.New(slog.DiscardHandler),
		Deliverers: map[string]core.Deliverer{core.DeliveryWebhook: d},
	})
	require.NoError(t, err)
	ctx := context.Background()

	backoff := core.Backoff{Initial: time.Millisecond, Max: time.Hour, Jitter: -1}
	for _, tp := range []*core.Topic{webhookTopic("dead", "dead.test"), webhookTopic("live", "live.test")} {
		tp.Backoff, tp.Concurrency, tp.MaxAttempts = backoff, 1, 3
		require.NoError(t, engine.PutTopic(ctx, tp))
	}
	const n = 20
	ids := map[string]string{}
	for i := range n {
		for _, topic := range []string{"dead", "live"} {
			j, err := engine.Push(ctx, &core.PushParams{Topic: topic, Body: []byte(fmt.Sprint(i))})
			require.NoError(t, err)
			ids[j.ID] = topic
		}
	}
	// Every job is there before the first delivery, so that the three
	// that open the breaker are the first three in run_at order: with the
	// engine running during the pushes, the first job's retry, due 1ms
	// after its failure, could come before the second job and use all its
	// attempts on its own.
	require.NoError(t, engine.Start(ctx))
	t.Cleanup(func() { require.NoError(t, engine.Stop(ctx)) })
	start := time.Now()
	// The three deliveries that opened the breaker are retried after their
	// 1ms backoff and then fail fast too: n+3 retries in all.
	acks, retries := 0, 0
	for acks < n || retries < n+3 {
		select {
		case o := <-store.Outcomes:
			if o.Kind == storetest.OutcomeAck {
				require.Equal(t, "live", ids[o.ID])
				acks++
			} else {
				require.Equal(t, "dead", ids[o.ID])
				retries++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d acks and %d retries only", acks, retries)
		}
	}
	require.Equal(t, 3, inner.callsTo("dead.test"), "only the deliveries that opened the breaker reached the dead endpoint")
	require.Equal(t, n, inner.callsTo("live.test"))
	attempts := map[int]int{}
	for id, topic := range ids {
		j, err := engine.Get(ctx, id)
		require.NoError(t, err)
		if topic == "live" {
			require.Equal(t, core.StateDone, j.State)
			continue
		}
		attempts[j.Attempt]++
		require.Equal(t, core.StateScheduled, j.State)
		require.Contains(t, j.LastError, "circuit breaker open")
		require.WithinDuration(t, start.Add(openFor), j.RunAt, 10*time.Second, "retried when the breaker half-opens, not after the 1ms backoff")
	}
	require.Equal(t, map[int]int{1: n - 3, 2: 3}, attempts, "one attempt per failure: a failing endpoint uses an attempt per backoff step or per open period, whichever is longer")
}

// TestWebhookStatusErrors checks the classification of the webhook
// deliverer's answers: a refused request is not an endpoint failure.
func TestWebhookStatusErrors(t *testing.T) {
	t.Parallel()
	for code, failure := range map[int]bool{301: false, 400: false, 404: false, 408: true, 429: true, 500: true, 503: true} {
		err := fmt.Errorf("attempt: %w", &webhook.StatusError{Status: code})
		require.Equal(t, failure, breaker.IsEndpointFailure(err), "status %d", code)
	}
	// A condition over an answer counts as the answer's status would.
	for code, failure := range map[int]bool{200: false, 204: false, 404: false, 429: true, 503: true} {
		err := &webhook.ConditionError{Status: code, Condition: "false"}
		require.Equal(t, failure, breaker.IsEndpointFailure(err), "condition over status %d", code)
	}
	require.True(t, breaker.IsEndpointFailure(errors.New("request failed: connection refused")))
	require.False(t, breaker.IsEndpointFailure(fmt.Errorf("%w: condition no longer compiles", core.ErrInvalidArgument)))
}

// TestConditionFalseDoesNotTripHost checks that a topic whose
// delivery.success never holds does not open the breaker of its host for
// the other topics there: the endpoint answered, so it is up. A dead host
// still trips once for all of its topics.
func TestConditionFalseDoesNotTripHost(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	wh := webhook.New(webhook.Config{})
	t.Cleanup(wh.CloseIdleConnections)
	d := breaker.NewDeliverer(wh, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 2, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	host := strings.TrimPrefix(srv.URL, "http://")
	never, healthy := webhookTopic("never", host), webhookTopic("healthy", host)
	never.Delivery.Success = "false"
	for _, tp := range []*core.Topic{never, healthy} {
		require.NoError(t, d.ValidateTopic(tp))
	}
	job := &core.Job{ID: "j", Topic: "never", Body: []byte(`1`), Attempt: 1}

	for range 10 {
		require.ErrorContains(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: never, Job: job}), "condition false")
	}
	require.Equal(t, breaker.StateClosed, d.State(host))
	require.NoError(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: healthy, Job: job}))

	// The host going away trips its breaker for both topics.
	srv.Close()
	for range 2 {
		require.ErrorContains(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: healthy, Job: job}), "request failed")
	}
	require.Equal(t, breaker.StateOpen, d.State(host))
	require.ErrorIs(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: never, Job: job}), breaker.ErrOpen)
}

// TestDelivererNilParams checks that params without a topic or a job are
// refused with ErrInvalidArgument, without reaching the wrapped deliverer
// or counting against an endpoint.
func TestDelivererNilParams(t *testing.T) {
	t.Parallel()
	inner := newFakeDeliverer()
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 1, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	topic, job := webhookTopic("a", "h.test"), &core.Job{ID: "j", Attempt: 1}
	for _, p := range []*core.DeliverParams{nil, {Job: job}, {Topic: topic}} {
		require.ErrorIs(t, d.Deliver(t.Context(), p), core.ErrInvalidArgument)
	}
	require.Zero(t, inner.callsTo("h.test"))
	require.NoError(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: job}))
	require.Equal(t, breaker.StateClosed, d.State("h.test"), "the refused calls counted no failure")
}
