package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/telemetry"
)

// TestStore runs the conformance suite over memstore behind the store
// decorator with metrics on and tracing off: metrics change nothing. (With
// tracing on, the decorator stores the push span's traceparent, which the
// suite would see as a changed job.)
func TestStore(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	cfg := telemetry.Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: p.MeterProvider}
	var (
		mu     sync.Mutex
		stores = map[string]*memstore.Store{}
	)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, ns string) core.Store {
			mu.Lock()
			defer mu.Unlock()
			s, ok := stores[ns]
			if !ok {
				s = memstore.New(memstore.Config{})
				stores[ns] = s
			}
			ts, err := telemetry.NewStore(s, cfg)
			require.NoError(t, err)
			return ts
		},
	})
}

// scrape reads /metrics and returns the metric families by name.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return parse(t, resp.Body)
}

// parse reads the Prometheus text format.
func parse(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	require.NoError(t, err)
	return families
}

// labels renders a metric's labels as a=b,c=d in name order.
func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

// series returns the values of a family by labels: counters and gauges by
// value, histograms by sample count.
func series(families map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		switch {
		case m.Histogram != nil:
			out[labels(m)] = float64(m.Histogram.GetSampleCount())
		case m.Counter != nil:
			out[labels(m)] = m.Counter.GetValue()
		case m.Gauge != nil:
			out[labels(m)] = m.Gauge.GetValue()
		}
	}
	return out
}

// TestMetricsAfterDeliveries scrapes /metrics before and after deliveries:
// the lateness histogram's count moves by the jobs delivered, with buckets
// fine enough to tell 1 ms from 5 ms, and intake, attempts, jobs by state,
// breaker state and paused topics are there.
func TestMetricsAfterDeliveries(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	require.False(t, p.OTLP)
	b := setup(t, p.Config(), p.MetricsHandler())

	const lateness = "delayq_lateness_seconds"
	const key = "queue=orders.close,transport=webhook"
	before := series(scrape(t, b.api.URL), lateness)[key]
	const n = 25
	for i := range n {
		b.push(t, fmt.Sprintf(`{"topic":"orders.close","body":{"n":%d}}`, i), nil)
	}
	b.waitAcked(t, n)
	families := scrape(t, b.api.URL)
	require.Equal(t, before+n, series(families, lateness)[key], "lateness count moved by the jobs delivered")

	h := families[lateness].GetMetric()[0].GetHistogram()
	var bounds []float64
	for _, bk := range h.GetBucket() {
		bounds = append(bounds, bk.GetUpperBound())
	}
	require.Subset(t, bounds, []float64{0.001, 0.002, 0.003, 0.004, 0.005})
	t.Logf("lateness of %d deliveries over memstore: sum %.6fs, buckets %v", n, h.GetSampleSum(), h.GetBucket()[:8])

	require.Equal(t, map[string]float64{"outcome=accepted,queue=orders.close,transport=http": n},
		series(families, "delayq_intake_jobs_total"))
	require.Equal(t, map[string]float64{"outcome=ok,queue=orders.close,transport=webhook": n},
		series(families, "delayq_attempts_total"))
	require.Equal(t, float64(n), series(families, "delayq_delivery_duration_seconds")["outcome=ok,queue=orders.close,transport=webhook"])
	jobs := series(families, "delayq_jobs")
	for _, state := range core.States {
		require.Contains(t, jobs, "queue=orders.close,state="+string(state))
	}
	require.Equal(t, map[string]float64{"": 0}, series(families, "delayq_breaker_state"))
	require.Equal(t, map[string]float64{"": 0}, series(families, "delayq_breaker_open_endpoints"))
	require.Contains(t, families, "go_goroutines")
	require.Equal(t, map[string]float64{"queue=orders.close": 0}, series(families, "delayq_topic_paused"))

	require.NoError(t, b.engine.SetTopicPaused(t.Context(), "orders.held", true))
	require.Equal(t, map[string]float64{"queue=orders.close": 0, "queue=orders.held": 1},
		series(scrape(t, b.api.URL), "delayq_topic_paused"), "a pause shows at the next scrape")

	// Three due jobs of a topic allowed one an hour: a claim takes one,
	// two wait on the limit.
	require.NoError(t, b.engine.PutTopic(t.Context(), &core.Topic{Name: "orders.slow", Rate: core.Rate{Limit: 1, Period: time.Hour}}))
	for range 3 {
		_, err := b.engine.Push(t.Context(), &core.PushParams{Topic: "orders.slow"})
		require.NoError(t, err)
	}
	claimed, err := b.engine.Claim(t.Context(), &core.ClaimJobsParams{Topic: "orders.slow", Max: 3})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, map[string]float64{"queue=orders.close": 0, "queue=orders.held": 0, "queue=orders.slow": 2},
		series(scrape(t, b.api.URL), "delayq_rate_limited_jobs"))
}

// TestTopicLag reads how long a topic's oldest due job has waited: a job
// due 90 s ago on a paused topic, none on a topic without due jobs.
func TestTopicLag(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	b := setup(t, p.Config(), p.MetricsHandler())
	require.NoError(t, b.engine.SetTopicPaused(t.Context(), "orders.held", true))
	due := time.Now().Add(-90 * time.Second)
	for _, at := range []time.Time{due.Add(30 * time.Second), due, time.Now().Add(time.Hour)} {
		_, err := b.engine.Push(t.Context(), &core.PushParams{Topic: "orders.held", RunAt: &at})
		require.NoError(t, err)
	}
	lags := series(scrape(t, b.api.URL), "delayq_topic_lag_seconds")
	require.Contains(t, lags, "queue=orders.close")
	require.Equal(t, float64(0), lags["queue=orders.close"])
	require.GreaterOrEqual(t, lags["queue=orders.held"], 90.0)
	require.Less(t, lags["queue=orders.held"], 120.0)
}

// TestSettleLabelsFromStore settles, through one store decorator, jobs
// claimed through another over the same backend (two instances): each
// attempt is labelled with the job's topic, which the store returns, and
// the transport the call came through; a settle that fails counts nothing.
func TestSettleLabelsFromStore(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, mem.Close()) })
	claimer, err := telemetry.NewStore(mem, p.Config())
	require.NoError(t, err)
	settler, err := telemetry.NewStore(mem, p.Config())
	require.NoError(t, err)

	const topic = "orders.pay"
	httpCtx := core.WithTransport(t.Context(), core.TransportHTTP)
	wsCtx := core.WithTransport(t.Context(), core.TransportWebSocket)
	_, err = claimer.PutJobs(httpCtx, &core.PutJobsParams{Jobs: []*core.Job{
		storetest.DueJob(topic), storetest.DueJob(topic), storetest.DueJob(topic), storetest.DueJob(topic)}})
	require.NoError(t, err)
	jobs, err := claimer.ClaimJobs(httpCtx, &core.ClaimJobsParams{Topic: topic, Max: 4})
	require.NoError(t, err)
	require.Len(t, jobs, 4)

	_, err = settler.AckJob(httpCtx, &core.AckJobParams{ID: jobs[0].ID, Lease: "wrong"})
	require.ErrorIs(t, err, core.ErrLeaseLost)
	res, err := settler.AckJob(httpCtx, &core.AckJobParams{ID: jobs[0].ID, Lease: jobs[0].Lease})
	require.NoError(t, err)
	require.Equal(t, core.SettleResult{Topic: topic, Attempt: 1, State: core.StateDone}, res, "the store's result passed on")
	_, err = settler.RetryJob(wsCtx, &core.RetryJobParams{ID: jobs[1].ID, Lease: jobs[1].Lease, Error: "nack"})
	require.NoError(t, err)
	_, err = settler.BuryJob(httpCtx, &core.BuryJobParams{ID: jobs[2].ID, Lease: jobs[2].Lease, Error: "poison"})
	require.NoError(t, err)
	_, err = settler.RetryJob(httpCtx, &core.RetryJobParams{ID: jobs[3].ID, Lease: jobs[3].Lease, Error: "abandoned", Unsent: true})
	require.NoError(t, err)

	families := parse(t, strings.NewReader(httptestRecorder(t, p.MetricsHandler())))
	require.Equal(t, map[string]float64{
		"outcome=ok,queue=orders.pay,transport=http":          1,
		"outcome=failed,queue=orders.pay,transport=websocket": 1,
		"outcome=dead,queue=orders.pay,transport=http":        1,
		"outcome=released,queue=orders.pay,transport=http":    1,
	}, series(families, "delayq_attempts_total"))
	require.Equal(t, map[string]float64{"queue=orders.pay,transport=http": 1}, series(families, "delayq_dead_jobs_total"))
}

// TestSubscribersGauge checks the hook a WebSocket transport calls.
func TestSubscribersGauge(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	subs, err := telemetry.NewSubscribers(p.Config())
	require.NoError(t, err)
	var hook func(topic string, delta int) = subs.Add
	hook("a", 1)
	hook("a", 1)
	hook("b", 1)
	hook("a", -1)
	rec := httptestRecorder(t, p.MetricsHandler())
	families := parse(t, strings.NewReader(rec))
	require.Equal(t, map[string]float64{"queue=a": 1, "queue=b": 1}, series(families, "delayq_websocket_subscribers"))
}

// TestScheduleSlotsBlocked: a slot the engine reports (core.SlotObserver)
// fired with Blocked that created no job counts in delayq_schedule_slots_blocked_total; one that created its job
// counts as fired only.
func TestScheduleSlotsBlocked(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, mem.Close()) })
	s, err := telemetry.NewStore(mem, p.Config())
	require.NoError(t, err)
	ctx := t.Context()
	now := core.StoreTime(time.Now())
	held := storetest.NewJob("other", now.Add(time.Hour))
	slotJob := storetest.NewJob("reports", now)
	slotJob.ID = held.ID
	s.ObserveSlot(ctx, &core.FireScheduleParams{Name: "nightly", Slot: now, Job: slotJob, Blocked: true}, false)
	next := storetest.NewJob("reports", now.Add(time.Hour))
	s.ObserveSlot(ctx, &core.FireScheduleParams{Name: "nightly", Slot: now.Add(time.Hour), Job: next}, true)

	families := parse(t, strings.NewReader(httptestRecorder(t, p.MetricsHandler())))
	require.Equal(t, map[string]float64{"schedule=nightly": 1}, series(families, "delayq_schedule_slots_blocked_total"))
	require.Equal(t, map[string]float64{"schedule=nightly": 1}, series(families, "delayq_schedule_slots_fired_total"))
}

// TestTopicMetricsHandler checks the view of a token restricted to topics:
// only series whose queue it allows, no instance-wide series, and every
// series when the request is not restricted.
func TestTopicMetricsHandler(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	subs, err := telemetry.NewSubscribers(p.Config())
	require.NoError(t, err)
	subs.Add("orders.close", 1)
	subs.Add("mail", 2)
	h := p.TopicMetricsHandler(func(r *http.Request) func(string) bool {
		if r.Header.Get("X-Restricted") == "" {
			return nil
		}
		return func(topic string) bool { return strings.HasPrefix(topic, "orders.") }
	})

	all := parse(t, strings.NewReader(httptestRecorder(t, h)))
	require.Equal(t, map[string]float64{"queue=orders.close": 1, "queue=mail": 2}, series(all, "delayq_websocket_subscribers"))
	require.Contains(t, all, "go_goroutines")

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("X-Restricted", "1")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	mine := parse(t, rec.Body)
	require.Equal(t, map[string]float64{"queue=orders.close": 1}, series(mine, "delayq_websocket_subscribers"))
	for name, f := range mine {
		for _, m := range f.GetMetric() {
			require.Contains(t, labels(m), "queue=orders.", "%s: only the token's topics", name)
		}
	}
	require.NotContains(t, mine, "go_goroutines", "instance-wide series are not a restricted token's")
}
