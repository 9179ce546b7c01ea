package breaker

import (
	"cmp"
	"errors"
	"log/slog"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Defaults of Config.
const (
	// ConsecutiveFailuresDefault is how many infrastructure failures in a
	// row open the breaker unless Config.ConsecutiveFailures says
	// otherwise.
	ConsecutiveFailuresDefault = 5
	// MinRequestsDefault is how many calls the window must hold before
	// Config.FailureRatio applies.
	MinRequestsDefault = 20
	// WindowDefault is the rolling window of Config.FailureRatio.
	WindowDefault = 10 * time.Second
	// OpenTimeoutDefault is how long the breaker stays open before it lets
	// probes through.
	OpenTimeoutDefault = 5 * time.Second
	// HalfOpenMaxRequestsDefault is how many probes run at once while
	// half-open, and how many successes in a row close the breaker.
	HalfOpenMaxRequestsDefault = 1
	// CallTimeoutDefault bounds one store call (ClaimJobs: beyond its Wait).
	CallTimeoutDefault = 5 * time.Second
	// EndpointOpenTimeoutDefault is OpenTimeout of an endpoint's breaker
	// unless DelivererConfig says otherwise: webhooks that fail tend to
	// stay down longer than a store that flaps.
	EndpointOpenTimeoutDefault = 10 * time.Second
)

// windowBuckets is how many buckets the rolling window has: the window
// moves in steps of Window/windowBuckets.
const windowBuckets = 10

// Config configures a breaker. Zero fields take their defaults.
type Config struct {
	// Name names the breaker in logs.
	//
	// Defaults to "store".
	Name string
	// ConsecutiveFailures opens the breaker after this many infrastructure
	// failures in a row, with no success between them, within Window. A
	// negative value
	// turns the rule off (FailureRatio must then be set).
	//
	// Defaults to ConsecutiveFailuresDefault (5).
	ConsecutiveFailures int
	// FailureRatio opens the breaker when, over the last Window, at least
	// MinRequests calls ended and this fraction of them (0 to 1) failed.
	// Either rule opens it.
	//
	// Defaults to 0: the rule is off.
	FailureRatio float64
	// MinRequests is how many calls must have ended within Window before
	// FailureRatio applies.
	//
	// Defaults to MinRequestsDefault (20).
	MinRequests int
	// Window is the rolling window over which FailureRatio is measured, in
	// ten steps; older outcomes are forgotten.
	//
	// Defaults to WindowDefault (10s).
	Window time.Duration
	// OpenTimeout is how long the breaker stays open, answering ErrOpen,
	// before it lets probes through (half-open).
	//
	// Defaults to OpenTimeoutDefault (5s).
	OpenTimeout time.Duration
	// HalfOpenMaxRequests is how many probe calls may run at once while the
	// breaker is half-open; other calls get ErrOpen. That many successes in
	// a row close the breaker; one failure opens it again.
	//
	// Defaults to HalfOpenMaxRequestsDefault (1).
	HalfOpenMaxRequests int
	// CallTimeout bounds each store call, ClaimJobs beyond its Wait. A call
	// that runs out of it fails with a deadline error, which counts. It
	// keeps a backend that hangs instead of failing (a NATS connection
	// buffering while it reconnects) from holding intake requests without
	// ever opening the breaker. A negative value sets no bound. Endpoint
	// breakers ignore it: the deliverer bounds its attempts itself.
	//
	// Defaults to CallTimeoutDefault (5s).
	CallTimeout time.Duration
	// IsFailureFunc reports whether an error counts as a failure. It is
	// called only with errors that are not the caller's cancellation and
	// not core.ErrClosed.
	//
	// Defaults to IsInfrastructure for a store, and for an endpoint to
	// every error but an answer with a 4xx status other than 408 and 429.
	IsFailureFunc func(err error) bool
	// OnStateChangeFunc, when set, is called on every change of state with
	// the breaker's name (an endpoint's key). It runs while the breaker's
	// lock is held: it must be quick and must not call the breaker.
	OnStateChangeFunc func(name string, from, to State)
	// Logger receives state changes: a warning when the breaker opens,
	// info when it closes.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c Config) WithDefaults() Config {
	c.Name = cmp.Or(c.Name, "store")
	c.ConsecutiveFailures = cmp.Or(c.ConsecutiveFailures, ConsecutiveFailuresDefault)
	c.MinRequests = cmp.Or(c.MinRequests, MinRequestsDefault)
	c.Window = cmp.Or(c.Window, WindowDefault)
	c.OpenTimeout = cmp.Or(c.OpenTimeout, OpenTimeoutDefault)
	c.HalfOpenMaxRequests = cmp.Or(c.HalfOpenMaxRequests, HalfOpenMaxRequestsDefault)
	c.CallTimeout = cmp.Or(c.CallTimeout, CallTimeoutDefault)
	if c.IsFailureFunc == nil {
		c.IsFailureFunc = IsInfrastructure
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate checks a configuration with defaults filled and names the bad
// field.
func (c Config) Validate() error {
	switch {
	case c.FailureRatio < 0 || c.FailureRatio > 1:
		return errors.New("breaker: FailureRatio must be between 0 and 1")
	case c.ConsecutiveFailures < 0 && c.FailureRatio == 0:
		return errors.New("breaker: ConsecutiveFailures is off and FailureRatio is 0: nothing would open the breaker")
	case c.MinRequests < 1:
		return errors.New("breaker: MinRequests must be at least 1")
	case c.Window < windowBuckets*time.Millisecond:
		return errors.New("breaker: Window must be at least 10ms")
	case c.OpenTimeout <= 0:
		return errors.New("breaker: OpenTimeout must be positive")
	case c.HalfOpenMaxRequests < 1:
		return errors.New("breaker: HalfOpenMaxRequests must be at least 1")
	}
	return nil
}

// readyToTrip is gobreaker's ReadyToTrip for c.
func (c Config) readyToTrip(counts gobreaker.Counts) bool {
	if c.ConsecutiveFailures > 0 && counts.ConsecutiveFailures >= uint32(c.ConsecutiveFailures) {
		return true
	}
	ended := counts.TotalSuccesses + counts.TotalFailures
	return c.FailureRatio > 0 && ended >= uint32(c.MinRequests) &&
		float64(counts.TotalFailures) >= c.FailureRatio*float64(ended)
}

// State is a breaker's state.
type State int

// The states of a breaker, in the order of their metric value.
const (
	// StateClosed lets every call through and counts failures.
	StateClosed State = iota
	// StateHalfOpen lets a few probe calls through.
	StateHalfOpen
	// StateOpen answers ErrOpen without calling through.
	StateOpen
)

// String returns closed, half-open or open.
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	}
	return "unknown"
}

func fromGobreaker(s gobreaker.State) State {
	switch s {
	case gobreaker.StateHalfOpen:
		return StateHalfOpen
	case gobreaker.StateOpen:
		return StateOpen
	}
	return StateClosed
}
