package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// EnvOTLPEndpoint is the environment variable that turns OTLP export on.
// The exporters read it and the other OTEL_EXPORTER_OTLP_* variables
// (headers, per-signal endpoints, timeouts) themselves.
const EnvOTLPEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// SetupConfig configures Setup. Zero fields take their defaults.
type SetupConfig struct {
	// ServiceName is the service.name of the resource, unless
	// OTEL_SERVICE_NAME says otherwise.
	//
	// Defaults to "delayq".
	ServiceName string
	// ServiceVersion is the service.version of the resource, if set.
	ServiceVersion string
	// Getenv reads EnvOTLPEndpoint.
	//
	// Defaults to os.Getenv.
	Getenv func(string) string
	// Logger receives the errors of the OTel SDK (failed exports).
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Providers are the tracer and meter providers Setup built, with the
// Prometheus registry that GET /metrics serves. Shut them down on exit.
type Providers struct {
	// TracerProvider exports spans over OTLP when EnvOTLPEndpoint is set;
	// otherwise it is a noop provider, and tracing is off.
	TracerProvider trace.TracerProvider
	// MeterProvider is read by GET /metrics and, when EnvOTLPEndpoint is
	// set, exported over OTLP every minute.
	MeterProvider metric.MeterProvider
	// OTLP reports whether spans and metrics are exported over OTLP.
	OTLP bool

	registry *prometheus.Registry
	mu       sync.Mutex
	shutdown []func(context.Context) error
}

// Setup builds the providers: a meter provider with a Prometheus exporter
// on a registry of its own (with the Go runtime and process collectors),
// and, when EnvOTLPEndpoint is set, OTLP/HTTP exporters of spans (batched)
// and metrics (every 60s, or OTEL_METRIC_EXPORT_INTERVAL). It sets the
// OTel error handler to log through cfg.Logger and the global propagator to
// W3C trace context and baggage; it sets no global provider. Errors: an
// exporter that cannot be built from the OTEL_* environment.
func Setup(ctx context.Context, cfg SetupConfig) (*Providers, error) {
	cfg.ServiceName = cmp.Or(cfg.ServiceName, "delayq")
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	log := cmp.Or(cfg.Logger, slog.Default())
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry: otel", "err", err) }))

	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	// Attributes first, so that OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override them.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}

	p := &Providers{registry: prometheus.NewRegistry()}
	p.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promExporter, err := otelprom.New(otelprom.WithRegisterer(p.registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	readers := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(promExporter)}

	p.TracerProvider = noop.NewTracerProvider()
	if cfg.Getenv(EnvOTLPEndpoint) != "" {
		p.OTLP = true
		spans, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: otlp trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
		p.TracerProvider = tp
		p.shutdown = append(p.shutdown, tp.Shutdown)
		metrics, err := otlpmetrichttp.New(ctx)
		if err != nil {
			_ = p.Shutdown(ctx)
			return nil, fmt.Errorf("telemetry: otlp metric exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)))
	}
	mp := sdkmetric.NewMeterProvider(readers...)
	p.MeterProvider = mp
	p.shutdown = append(p.shutdown, mp.Shutdown)
	otel.SetTextMapPropagator(propagator)
	return p, nil
}

// Config returns a decorator configuration with p's providers.
func (p *Providers) Config() Config {
	return Config{TracerProvider: p.TracerProvider, MeterProvider: p.MeterProvider}
}

// MetricsHandler serves the metrics in the Prometheus text format, for GET
// /metrics.
func (p *Providers) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{})
}

// TopicMetricsHandler serves the metrics as MetricsHandler does, but asks
// topicsFunc, for each request, which topics it may see: when topicsFunc
// returns nil, every series; otherwise only the series whose queue label
// is a topic it allows. Series without a queue label (the process and Go
// runtime, breakers by endpoint, schedules by name) are instance-wide or
// name what another topic configured, so such a request gets none of
// them; a family left without series is left out.
func (p *Providers) TopicMetricsHandler(topicsFunc func(r *http.Request) func(topic string) bool) http.Handler {
	all := p.MetricsHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allow := topicsFunc(r)
		if allow == nil {
			all.ServeHTTP(w, r)
			return
		}
		promhttp.HandlerFor(topicGatherer{g: p.registry, allow: allow}, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
}

// topicGatherer gathers from g only the series whose queue label allow
// accepts.
type topicGatherer struct {
	g     prometheus.Gatherer
	allow func(topic string) bool
}

// Gather implements prometheus.Gatherer.
func (t topicGatherer) Gather() ([]*dto.MetricFamily, error) {
	families, err := t.g.Gather()
	out := families[:0]
	for _, f := range families {
		metrics := f.Metric[:0]
		for _, m := range f.Metric {
			if t.allowed(m) {
				metrics = append(metrics, m)
			}
		}
		if len(metrics) > 0 {
			f.Metric = metrics
			out = append(out, f)
		}
	}
	return out, err
}

// allowed reports whether m has a queue label that allow accepts.
func (t topicGatherer) allowed(m *dto.Metric) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == string(attrQueue) {
			return t.allow(l.GetValue())
		}
	}
	return false
}

// Gatherer returns the registry that MetricsHandler serves, for readers in
// the process such as the web UI's live statistics.
func (p *Providers) Gatherer() prometheus.Gatherer { return p.registry }

// Shutdown flushes what the OTLP exporters hold and stops the providers,
// within ctx. Idempotent.
func (p *Providers) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	fs := p.shutdown
	p.shutdown = nil
	p.mu.Unlock()
	var errs []error
	for i := len(fs) - 1; i >= 0; i-- {
		errs = append(errs, fs[i](ctx))
	}
	return errors.Join(errs...)
}
