package telemetry

import (
	"cmp"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/delayq/delayq/core"
)

// scope is the instrumentation scope of delayq's tracer and meter.
const scope = "github.com/delayq/delayq/telemetry"

// CountsTTLDefault is how old the job counts behind delayq_jobs may be
// unless Config.CountsTTL says otherwise.
const CountsTTLDefault = 10 * time.Second

// Config configures the decorators. Zero fields take their defaults.
type Config struct {
	// TracerProvider makes the spans. A noop provider
	// (go.opentelemetry.io/otel/trace/noop) turns tracing off.
	//
	// Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments.
	//
	// Defaults to otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Clock measures lateness and the duration of deliveries, and ages the
	// job counts (CountsTTL); use the store's clock. Spans are timed by the
	// tracer provider, on the real clock.
	//
	// Defaults to the real clock.
	Clock core.Clock
	// CountsTTL is how old the job counts reported by delayq_jobs may be:
	// a scrape reuses counts younger than this, such as those the engine
	// read moments ago, and otherwise lists topics itself.
	//
	// Defaults to CountsTTLDefault (10s).
	CountsTTL time.Duration
	// Logger receives failures to read counts.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c Config) WithDefaults() Config {
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.Clock == nil {
		c.Clock = core.RealClock()
	}
	c.CountsTTL = cmp.Or(c.CountsTTL, CountsTTLDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// tracer returns the tracer of c, nil when tracing is off.
func (c Config) tracer() trace.Tracer {
	if _, off := c.TracerProvider.(noop.TracerProvider); off {
		return nil
	}
	return c.TracerProvider.Tracer(scope)
}
