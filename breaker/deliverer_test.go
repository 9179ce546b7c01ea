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
	if err, ok := f.dead[u.Host+u.Path]; ok {
		return err
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

// sharedDeliverer is a fakeDeliverer whose topics all reach one
// endpoint, the host "cluster.test".
type sharedDeliverer struct{ *fakeDeliverer }

func (sharedDeliverer) SharedEndpoint(*core.Topic) string { return "cluster.test" }

// TestDelivererSharedEndpoint: the topics of a SharedEndpoint share one
// circuit, so failures of one topic there fail the others fast too.
func TestDelivererSharedEndpoint(t *testing.T) {
	t.Parallel()
	inner := newFakeDeliverer()
	inner.setDead("cluster.test", errors.New("brokers down"))
	d := breaker.NewDeliverer(sharedDeliverer{inner}, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 3, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	ctx := context.Background()
	a, b := webhookTopic("a", "cluster.test"), webhookTopic("b", "cluster.test")
	job := &core.Job{ID: "j", Attempt: 1}
	n, _ := d.DeliveryAdmits(b)
	require.Equal(t, -1, n, "closed: no bound")
	for range 3 {
		require.ErrorContains(t, d.Deliver(ctx, &core.DeliverParams{Topic: a, Job: job}), "brokers down")
	}
	require.Equal(t, breaker.StateOpen, d.State("", "cluster.test"))
	n, wait := d.DeliveryAdmits(b)
	require.Zero(t, n, "b never failed, and is held")
	require.Positive(t, wait)
	err := d.Deliver(ctx, &core.DeliverParams{Topic: b, Job: job})
	require.ErrorIs(t, err, breaker.ErrOpen)
	require.ErrorContains(t, err, "circuit breaker open for endpoint cluster.test of every topic")
	require.Equal(t, 3, inner.callsTo("cluster.test"), "b's delivery was not sent")
	require.Equal(t, []breaker.EndpointState{{Endpoint: "cluster.test", State: breaker.StateOpen}}, d.States())
}

func TestDelivererEndpointsApart(t *testing.T) {
	t.Parallel()
	inner := newFakeDeliverer()
	inner.setDead("dead.test", errors.New("request failed: connection refused"))
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 3, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	ctx := context.Background()
	dead, live := webhookTopic("a", "dead.test"), webhookTopic("b", "live.test:8080")
	job := &core.Job{ID: "j", Attempt: 1}

	for range 3 {
		require.ErrorContains(t, d.Deliver(ctx, &core.DeliverParams{Topic: dead, Job: job}), "connection refused")
		require.NoError(t, d.Deliver(ctx, &core.DeliverParams{Topic: live, Job: job}))
	}
	require.Equal(t, breaker.StateOpen, d.State("a", "dead.test"))
	require.Equal(t, breaker.StateClosed, d.State("b", "live.test:8080"))
	start := time.Now()
	err := d.Deliver(ctx, &core.DeliverParams{Topic: dead, Job: job})
	require.Less(t, time.Since(start), 50*time.Millisecond)
	require.ErrorIs(t, err, breaker.ErrOpen)
	require.ErrorIs(t, err, core.ErrUnavailable)
	require.ErrorIs(t, err, core.ErrNotSent)
	require.ErrorContains(t, err, `not sent: circuit breaker open for endpoint dead.test of topic "a"`)
	oe, ok := errors.AsType[*breaker.OpenError](err)
	require.True(t, ok)
	require.Equal(t, "dead.test", oe.Endpoint)
	require.Equal(t, "a", oe.Topic)
	require.Greater(t, oe.RetryAfter(), 59*time.Minute, "retried no sooner than the breaker half-opens")
	require.LessOrEqual(t, oe.RetryAfter(), time.Hour)
	require.Equal(t, 3, inner.callsTo("dead.test"), "deliveries failed fast without reaching the endpoint")
	require.NoError(t, d.Deliver(ctx, &core.DeliverParams{Topic: live, Job: job}))
	require.Equal(t, 4, inner.callsTo("live.test:8080"))
	require.Equal(t, []breaker.EndpointState{
		{Topic: "a", Endpoint: "dead.test", State: breaker.StateOpen},
		{Topic: "b", Endpoint: "live.test:8080", State: breaker.StateClosed},
	}, d.States())
}

// TestDelivererTopicsApart: a topic whose deliveries fail by its own
// choice (a 1ms timeout, a path that answers 503) opens its own circuit
// only; another topic on the same host and port goes on.
func TestDelivererTopicsApart(t *testing.T) {
	t.Parallel()
	inner := newFakeDeliverer()
	inner.setDead("shared.test:8080/bad", statusErr(503))
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 2, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	ctx := context.Background()
	bad, good := webhookTopic("bad", "shared.test:8080"), webhookTopic("good", "shared.test:8080")
	bad.Delivery.URL = "http://shared.test:8080/bad"
	job := &core.Job{ID: "j", Attempt: 1}
	for range 2 {
		require.Error(t, d.Deliver(ctx, &core.DeliverParams{Topic: bad, Job: job}))
	}
	require.ErrorIs(t, d.Deliver(ctx, &core.DeliverParams{Topic: bad, Job: job}), core.ErrNotSent)
	for range 5 {
		require.NoError(t, d.Deliver(ctx, &core.DeliverParams{Topic: good, Job: job}))
	}
	require.Equal(t, breaker.StateOpen, d.State("bad", "shared.test:8080"))
	require.Equal(t, breaker.StateClosed, d.State("good", "shared.test:8080"))
	n, _ := d.DeliveryAdmits(good)
	require.Equal(t, -1, n, "the healthy topic's deliveries are not held back")
}

// TestDelivererJobURLEndpoint: a job with its own URL counts for that
// URL's scheme, host and path within its topic, not for its topic's own
// endpoint nor for another path on the same host.
func TestDelivererJobURLEndpoint(t *testing.T) {
	t.Parallel()
	inner := newFakeDeliverer()
	inner.setDead("live.test/bad", statusErr(500))
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 2, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	ctx := context.Background()
	topic := webhookTopic("a", "live.test")
	topic.Delivery.AllowJobURL = true
	own := &core.Job{ID: "own", Attempt: 1, URL: "https://user:pw@live.test/bad?token=secret"}
	for range 2 {
		require.Error(t, d.Deliver(ctx, &core.DeliverParams{Topic: topic, Job: own}))
	}
	err := d.Deliver(ctx, &core.DeliverParams{Topic: topic, Job: own})
	require.ErrorIs(t, err, core.ErrNotSent)
	require.NotContains(t, err.Error(), "secret", "no query nor user in the circuit's name")
	require.NotContains(t, err.Error(), "pw")
	require.Equal(t, breaker.StateOpen, d.JobURLState("a", "https://live.test/bad"))
	require.Equal(t, breaker.StateClosed, d.State("a", "live.test"))
	require.NoError(t, d.Deliver(ctx, &core.DeliverParams{Topic: topic, Job: &core.Job{ID: "plain", Attempt: 1}}))
	require.NoError(t, d.Deliver(ctx, &core.DeliverParams{Topic: topic, Job: &core.Job{ID: "other", Attempt: 1, URL: "https://live.test/good"}}))
	n, _ := d.DeliveryAdmits(topic)
	require.Equal(t, -1, n, "a job's URL does not hold back the topic's own deliveries")
	require.Equal(t, "http://live.test/hook", topic.Delivery.URL, "the topic is not changed")
	// The inner deliverer checks no job URLs: refused, as by the engine.
	require.ErrorContains(t, d.ValidateJobURL("https://svc/"), "not available on this server")
}

// TestDelivererAdmits follows a topic's circuit through the gate the
// engine's dispatcher asks: any number while closed, none while open (and
// how long), the probes left while half-open.
func TestDelivererAdmits(t *testing.T) {
	t.Parallel()
	inner := &blockingDeliverer{fakeDeliverer: newFakeDeliverer(), release: make(chan struct{}), started: make(chan struct{}, 1)}
	inner.setDead("h.test", statusErr(503))
	const openFor = 50 * time.Millisecond
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{Config: breaker.Config{
		ConsecutiveFailures: 1, OpenTimeout: openFor, Logger: slog.New(slog.DiscardHandler),
	}})
	topic, job := webhookTopic("a", "h.test"), &core.Job{ID: "j", Attempt: 1}
	n, _ := d.DeliveryAdmits(topic)
	require.Equal(t, -1, n, "unused")

	close(inner.release)
	require.Error(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: job}))
	n, wait := d.DeliveryAdmits(topic)
	require.Zero(t, n, "open")
	require.Positive(t, wait)
	require.LessOrEqual(t, wait, openFor)

	require.Eventually(t, func() bool { return d.State("a", "h.test") == breaker.StateHalfOpen }, 10*time.Second, time.Millisecond)
	n, _ = d.DeliveryAdmits(topic)
	require.Equal(t, 1, n, "half-open: one probe")

	inner.setDead("h.test", nil)
	inner.release, inner.started = make(chan struct{}), make(chan struct{}, 1)
	probe := make(chan error)
	go func() { probe <- d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: job}) }()
	<-inner.started
	n, wait = d.DeliveryAdmits(topic)
	require.Zero(t, n, "the probe is taken")
	require.Equal(t, openFor, wait)
	err := d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: job})
	require.ErrorIs(t, err, core.ErrNotSent)
	require.ErrorContains(t, err, "circuit breaker half-open, probes taken")
	close(inner.release)
	require.NoError(t, <-probe)
	n, _ = d.DeliveryAdmits(topic)
	require.Equal(t, -1, n, "closed by the probe")
}

// blockingDeliverer is a fakeDeliverer whose deliveries signal started and
// wait for release.
type blockingDeliverer struct {
	*fakeDeliverer
	started chan struct{}
	release chan struct{}
}

func (b *blockingDeliverer) Deliver(ctx context.Context, p *core.DeliverParams) error {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-b.release
	return b.fakeDeliverer.Deliver(ctx, p)
}

// TestDelivererBounded: jobs' own URLs, chosen by whoever pushes, keep no
// more than MaxCircuits circuits, and the closed ones go first, so an open
// topic circuit is kept.
func TestDelivererBounded(t *testing.T) {
	t.Parallel()
	inner := newFakeDeliverer()
	inner.setDead("h.test", statusErr(503))
	d := breaker.NewDeliverer(inner, breaker.DelivererConfig{MaxCircuits: 3, Config: breaker.Config{
		ConsecutiveFailures: 1, OpenTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}})
	topic := webhookTopic("a", "h.test")
	require.Error(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: &core.Job{ID: "j", Attempt: 1}}))
	for i := range 100 {
		job := &core.Job{ID: "j", Attempt: 1, URL: fmt.Sprintf("https://job.test/%d", i)}
		require.NoError(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: job}))
		require.LessOrEqual(t, d.Len(), 3)
	}
	require.Equal(t, breaker.StateOpen, d.State("a", "h.test"), "the open circuit outlived the closed ones")
	require.Equal(t, breaker.StateClosed, d.JobURLState("a", "https://job.test/99"))
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
	require.Equal(t, breaker.StateClosed, d.State("a", "h.test"))
	// 429 and 5xx do.
	inner.setDead("h.test", statusErr(429))
	require.Error(t, d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: job}))
	inner.setDead("h.test", statusErr(503))
	require.Error(t, d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: job}))
	require.Equal(t, breaker.StateOpen, d.State("a", "h.test"))
}

func TestEndpointOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, "svc:8443", breaker.EndpointOf(&core.Topic{Delivery: core.Delivery{Type: "webhook", URL: "https://svc:8443/a?b"}}))
	require.Equal(t, "nats:delayq.deliver.x", breaker.EndpointOf(&core.Topic{Delivery: core.Delivery{Type: "nats", Subject: "delayq.deliver.x"}}))
}

// TestDeadEndpointOverEngine runs an engine with one topic whose endpoint is
// dead and one whose endpoint answers: every job of the live topic is
// delivered, and once the dead topic's circuit opens its dispatcher claims
// nothing more, so no job of it spends an attempt on a refusal.
func TestDeadEndpointOverEngine(t *testing.T) {
	t.Parallel()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	store := &storetest.SignalStore{Store: mem, Outcomes: make(chan storetest.Outcome, 100),
		Kinds: []storetest.OutcomeKind{storetest.OutcomeAck, storetest.OutcomeRetry, storetest.OutcomeBury}}
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
	deadTopic := webhookTopic("dead", "dead.test")
	for _, tp := range []*core.Topic{deadTopic, webhookTopic("live", "live.test")} {
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
	// after its failure, could come before the second job.
	require.NoError(t, engine.Start(ctx))
	t.Cleanup(func() { require.NoError(t, engine.Stop(ctx)) })
	acks, retries := 0, 0
	for acks < n || retries < 3 {
		select {
		case o := <-store.Outcomes:
			switch o.Kind {
			case storetest.OutcomeAck:
				require.Equal(t, "live", ids[o.ID])
				acks++
			case storetest.OutcomeRetry:
				require.Equal(t, "dead", ids[o.ID])
				retries++
			default:
				t.Fatalf("job %s buried", o.ID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d acks and %d retries only", acks, retries)
		}
	}
	require.Equal(t, 3, inner.callsTo("dead.test"), "only the deliveries that opened the breaker were made")
	require.Equal(t, n, inner.callsTo("live.test"))
	admits, wait := d.DeliveryAdmits(deadTopic)
	require.Zero(t, admits)
	require.Greater(t, wait, openFor-time.Minute)
	attempts := map[int]int{}
	for id, topic := range ids {
		j, err := engine.Get(ctx, id)
		require.NoError(t, err)
		if topic == "live" {
			require.Equal(t, core.StateDone, j.State)
			continue
		}
		attempts[j.Attempt]++
		require.NotContains(t, j.LastError, "not sent", "no job was claimed only to be refused")
	}
	require.Equal(t, map[int]int{0: n - 3, 1: 3}, attempts, "the jobs that opened the breaker spent an attempt each, the others none")
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
// delivery.success never holds does not open its circuit: the endpoint
// answered, so it is up. A dead host trips the circuit of each topic that
// fails there, and no other.
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
	require.Equal(t, breaker.StateClosed, d.State("never", host))
	require.NoError(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: healthy, Job: job}))

	// The host going away trips the circuit of the topic that failed there.
	srv.Close()
	for range 2 {
		require.ErrorContains(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: healthy, Job: job}), "request failed")
	}
	require.Equal(t, breaker.StateOpen, d.State("healthy", host))
	require.ErrorIs(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: healthy, Job: job}), breaker.ErrOpen)
	require.ErrorContains(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: never, Job: job}), "request failed",
		"another topic finds out for itself")
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
	require.Equal(t, breaker.StateClosed, d.State("a", "h.test"), "the refused calls counted no failure")
}
