package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/telemetry"
)

// flakyStore fails PutJobs and Ping as unavailable while down.
type flakyStore struct {
	core.Store
	down atomic.Bool
}

func (s *flakyStore) PutJobs(ctx context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	if s.down.Load() {
		return nil, fmt.Errorf("fake: %w", core.ErrUnavailable)
	}
	return s.Store.PutJobs(ctx, p)
}

func (s *flakyStore) Ping(ctx context.Context) error {
	if s.down.Load() {
		return fmt.Errorf("fake: %w", core.ErrUnavailable)
	}
	return s.Store.Ping(ctx)
}

// TestMetricsWhileBreakerOpen checks what /metrics and /readyz show when the
// backend fails: intake outcomes unavailable then breaker_open, breaker
// state 2.
func TestMetricsWhileBreakerOpen(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	flaky := &flakyStore{}
	b := setup(t, p.Config(), p.MetricsHandler(), func(s core.Store) core.Store { flaky.Store = s; return flaky })
	flaky.down.Store(true)
	for range 5 { // ConsecutiveFailuresDefault
		require.Equal(t, http.StatusServiceUnavailable, b.post(t, `{"topic":"orders.close"}`, nil).StatusCode)
	}
	resp := b.post(t, `{"topic":"orders.close"}`, nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	ready, err := http.Get(b.api.URL + "/readyz")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, ready.Body)
	_ = ready.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, ready.StatusCode)

	families := scrape(t, b.api.URL)
	require.Equal(t, map[string]float64{
		"outcome=unavailable,queue=orders.close,transport=http":  5,
		"outcome=breaker_open,queue=orders.close,transport=http": 1,
	}, series(families, "delayq_intake_jobs_total"))
	require.Equal(t, map[string]float64{"": 2}, series(families, "delayq_breaker_state"))
}

// TestOTLPExport sets OTEL_EXPORTER_OTLP_ENDPOINT to a fake collector and
// checks that spans and metrics reach it on Shutdown. Not parallel: it sets
// the environment.
func TestOTLPExport(t *testing.T) {
	var (
		mu    sync.Mutex
		paths = map[string]int{}
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths[r.URL.Path]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv(telemetry.EnvOTLPEndpoint, collector.URL)
	ctx := context.Background()
	p, err := telemetry.Setup(ctx, telemetry.SetupConfig{})
	require.NoError(t, err)
	require.True(t, p.OTLP)
	_, isNoop := p.TracerProvider.(noop.TracerProvider)
	require.False(t, isNoop)
	_, span := p.TracerProvider.Tracer("test").Start(ctx, "span")
	span.End()
	subs, err := telemetry.NewSubscribers(p.Config())
	require.NoError(t, err)
	subs.Add("a", 1)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, p.Shutdown(sctx))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"/v1/traces": 1, "/v1/metrics": 1}, paths)
}
