package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/telemetry"
	"github.com/delayq/delayq/transports/httptransport"
)

// breakerFlags are the --breaker-* flags of `delayq serve`.
type breakerFlags struct {
	// Failures in a row that open the store breaker; 0 turns the rule off.
	Failures int
	// FailureRatio of the calls within Window that opens it; 0 is off.
	FailureRatio float64
	// MinRequests before FailureRatio applies.
	MinRequests int
	// Window of FailureRatio and of failures in a row.
	Window time.Duration
	// OpenTimeout is how long it stays open before probing.
	OpenTimeout time.Duration
	// HalfOpenRequests are the probes at once, and the successes that close it.
	HalfOpenRequests int
	// CallTimeout bounds each store call.
	CallTimeout time.Duration
	// EndpointFailures in a row open a delivery endpoint's breaker.
	EndpointFailures int
	// EndpointOpenTimeout is how long an endpoint's breaker stays open.
	EndpointOpenTimeout time.Duration
}

// defaultBreakerFlags returns the breaker package's defaults.
func defaultBreakerFlags() breakerFlags {
	return breakerFlags{
		Failures:            breaker.ConsecutiveFailuresDefault,
		MinRequests:         breaker.MinRequestsDefault,
		Window:              breaker.WindowDefault,
		OpenTimeout:         breaker.OpenTimeoutDefault,
		HalfOpenRequests:    breaker.HalfOpenMaxRequestsDefault,
		CallTimeout:         breaker.CallTimeoutDefault,
		EndpointFailures:    breaker.ConsecutiveFailuresDefault,
		EndpointOpenTimeout: breaker.EndpointOpenTimeoutDefault,
	}
}

// addFlags defines the --breaker-* flags; the caller gives them their
// environment twins.
func (b *breakerFlags) addFlags(fs *pflag.FlagSet) {
	fs.Var(&nonNegativeIntValue{p: &b.Failures}, "breaker-failures", "store failures in a row (within --breaker-window) that open the circuit breaker; 0 turns the rule off")
	fs.Var(&ratioValue{p: &b.FailureRatio}, "breaker-failure-ratio", "share of store calls (0 to 1) failing within --breaker-window that opens the circuit breaker; 0 turns the rule off")
	fs.Var(&positiveIntValue{p: &b.MinRequests}, "breaker-min-requests", "store calls within --breaker-window before --breaker-failure-ratio applies")
	fs.Var(&positiveDurationValue{p: &b.Window}, "breaker-window", "rolling window of the breaker's failure counts")
	fs.Var(&positiveDurationValue{p: &b.OpenTimeout}, "breaker-open-timeout", "how long the open breaker answers 503 at once before it probes the store")
	fs.Var(&positiveIntValue{p: &b.HalfOpenRequests}, "breaker-half-open-requests", "probe calls at once while half-open, and successes in a row that close the breaker")
	fs.Var(&positiveDurationValue{p: &b.CallTimeout}, "breaker-call-timeout", "bound of one store call (a claim: beyond its wait); running out counts as a failure")
	fs.Var(&positiveIntValue{p: &b.EndpointFailures}, "breaker-endpoint-failures", "failed deliveries in a row that open a delivery endpoint's (webhook host's) breaker")
	fs.Var(&positiveDurationValue{p: &b.EndpointOpenTimeout}, "breaker-endpoint-open-timeout", "how long an endpoint's open breaker fails its deliveries at once before it probes")
}

// store returns the store breaker's configuration. Errors: a usage error
// when no rule would open it.
func (b *breakerFlags) store(log *slog.Logger) (breaker.Config, error) {
	cfg := breaker.Config{
		ConsecutiveFailures: b.Failures,
		FailureRatio:        b.FailureRatio,
		MinRequests:         b.MinRequests,
		Window:              b.Window,
		OpenTimeout:         b.OpenTimeout,
		HalfOpenMaxRequests: b.HalfOpenRequests,
		CallTimeout:         b.CallTimeout,
		Logger:              log,
	}
	if b.Failures == 0 {
		if b.FailureRatio == 0 {
			return cfg, usageError(errors.New("--breaker-failures 0 turns off the only rule that opens the breaker: set --breaker-failure-ratio too"))
		}
		cfg.ConsecutiveFailures = -1
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		return cfg, usageError(err)
	}
	return cfg, nil
}

// observability is what `delayq serve` adds around the store and the
// deliverers: the store breaker, a breaker per delivery endpoint, and the
// OpenTelemetry decorators with their providers.
type observability struct {
	providers *telemetry.Providers
	tcfg      telemetry.Config
	breaker   *breaker.Store
	endpoints []*breaker.Deliverer
	log       *slog.Logger
}

// observe sets up telemetry (OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set)
// and wraps store: engine -> telemetry -> breaker -> store. The caller
// shuts the result down before it closes the store.
func observe(ctx context.Context, cfg *serveConfig, log *slog.Logger, store core.Store) (*observability, core.Store, error) {
	bcfg, err := cfg.Breaker.store(log)
	if err != nil {
		return nil, nil, err
	}
	providers, err := telemetry.Setup(ctx, telemetry.SetupConfig{Logger: log})
	if err != nil {
		return nil, nil, err
	}
	o := &observability{providers: providers, log: log}
	o.tcfg = providers.Config()
	o.tcfg.Clock, o.tcfg.Logger = core.RealClock(), log
	o.breaker = breaker.New(store, bcfg)
	wrapped, err := telemetry.NewStore(o.breaker, o.tcfg)
	if err != nil {
		o.shutdown()
		return nil, nil, err
	}
	if providers.OTLP {
		log.Info("exporting traces and metrics over OTLP", "endpoint", telemetry.EnvOTLPEndpoint)
	}
	return o, wrapped, nil
}

// deliverers wraps each deliverer: telemetry -> endpoint breakers ->
// deliverer, and reports the breakers' states.
func (o *observability) deliverers(cfg *serveConfig, ds map[string]core.Deliverer) error {
	for typ, d := range ds {
		endpoints := breaker.NewDeliverer(d, breaker.DelivererConfig{Config: breaker.Config{
			ConsecutiveFailures: cfg.Breaker.EndpointFailures,
			OpenTimeout:         cfg.Breaker.EndpointOpenTimeout,
			Logger:              o.log,
		}})
		traced, err := telemetry.NewDeliverer(endpoints, o.tcfg)
		if err != nil {
			return err
		}
		o.endpoints = append(o.endpoints, endpoints)
		ds[typ] = traced
	}
	_, err := telemetry.ObserveBreakers(o.tcfg, o.breaker, o.endpoints...)
	return err
}

// subscribers returns the hook of the delayq_websocket_subscribers gauge,
// nil (no gauge) if it cannot be made.
func (o *observability) subscribers() func(topic string, delta int) {
	g, err := telemetry.NewSubscribers(o.tcfg)
	if err != nil {
		o.log.Warn("no websocket subscribers gauge", "err", err)
		return nil
	}
	return g.Add
}

// metrics serves GET /metrics: to a token restricted to topics (with
// --metrics-auth) only its topics' series, to others every series.
func (o *observability) metrics() http.Handler {
	return o.providers.TopicMetricsHandler(func(r *http.Request) func(topic string) bool {
		id := httptransport.IdentityFrom(r.Context())
		if id == nil || !id.Restricted() {
			return nil
		}
		return id.AllowsTopic
	})
}

// shutdown flushes the OTLP exporters, within 5s.
func (o *observability) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.providers.Shutdown(ctx); err != nil {
		o.log.Warn("telemetry shutdown", "err", err)
	}
}

// nonNegativeIntValue is an int flag that must be at least 0.
type nonNegativeIntValue struct{ p *int }

func (v *nonNegativeIntValue) String() string { return strconv.Itoa(*v.p) }
func (v *nonNegativeIntValue) Type() string   { return "int" }
func (v *nonNegativeIntValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return errors.New("want a whole number of at least 0")
	}
	*v.p = n
	return nil
}

// ratioValue is a float flag from 0 to 1.
type ratioValue struct{ p *float64 }

func (v *ratioValue) String() string { return strconv.FormatFloat(*v.p, 'g', -1, 64) }
func (v *ratioValue) Type() string   { return "ratio" }
func (v *ratioValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1 {
		return fmt.Errorf("want a number from 0 to 1, such as 0.5")
	}
	*v.p = f
	return nil
}
