package breaker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/delayq/delayq/core"
)

// ErrOpen is returned, at once and without calling through, while a breaker
// is open or its half-open probes are all taken. It wraps
// core.ErrUnavailable, so transports answer it as unavailable (HTTP 503
// with Retry-After).
var ErrOpen = fmt.Errorf("%w: circuit breaker open", core.ErrUnavailable)

// OpenError is the error of a delivery refused, unsent, because the
// circuit of its topic and endpoint is open or half-open with its probes
// taken. It matches ErrOpen (and so core.ErrUnavailable) and
// core.ErrNotSent, so the engine retries the job after RetryAfter and never
// buries it for the refusal.
type OpenError struct {
	// Topic is the topic whose circuit refused the delivery; "" for the
	// circuit of an endpoint every topic shares (SharedEndpoint).
	Topic string
	// Endpoint is the circuit's endpoint: the URL host of the topic's
	// webhook, its NATS subject, or a job's own URL (JobEndpointOf).
	Endpoint string
	// Wait is how long until the circuit lets a probe through, or, while
	// it is half-open with its probes taken, OpenTimeout.
	Wait time.Duration
	// HalfOpen is true when the circuit is half-open with its probes
	// taken.
	HalfOpen bool
}

// Error implements error. It says the delivery was not sent and when it is
// retried; the engine records it as the job's last_error.
func (e *OpenError) Error() string {
	of := fmt.Sprintf("endpoint %s of topic %q", e.Endpoint, e.Topic)
	if e.Topic == "" {
		of = fmt.Sprintf("endpoint %s of every topic", e.Endpoint)
	}
	if e.HalfOpen {
		return fmt.Sprintf("not sent: circuit breaker half-open, probes taken, for %s; retried in %s", of, e.Wait.Round(time.Millisecond))
	}
	return fmt.Sprintf("not sent: circuit breaker open for %s after failures there; retried in %s", of, e.Wait.Round(time.Millisecond))
}

// Unwrap returns ErrOpen.
func (e *OpenError) Unwrap() error { return ErrOpen }

// Is reports whether target is core.ErrNotSent: the delivery never reached
// the endpoint.
func (e *OpenError) Is(target error) bool { return target == core.ErrNotSent }

// RetryAfter returns Wait: the engine retries the job then.
func (e *OpenError) RetryAfter() time.Duration { return e.Wait }

// IsInfrastructure reports whether err says the backend could not be reached
// or did not answer in time: core.ErrUnavailable (but not core.ErrClosed,
// nor core.ErrStorageFull: a full backend answers, and serves all but
// puts), a
// context deadline, a network error, a refused, reset or broken connection,
// or an unexpected end of the stream. It is the default
// Config.IsFailureFunc of a store breaker.
func IsInfrastructure(err error) bool {
	if err == nil || errors.Is(err, core.ErrClosed) || errors.Is(err, core.ErrStorageFull) {
		return false
	}
	if errors.Is(err, core.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// Outcomes handed to gobreaker: nil is a success, errFailure counts,
// errIgnored does not count either way.
var (
	errFailure = errors.New("breaker: failure")
	errIgnored = errors.New("breaker: not counted")
)

// errNothingClaimed marks a claim that found no job inside Store.ClaimJobs,
// so that it is not counted; it never leaves the package.
var errNothingClaimed = errors.New("breaker: nothing claimed")

// errCallerFailed marks an export stopped by the caller's fn inside
// Store.ExportJobs, so that it is not counted; it never leaves the package.
var errCallerFailed = errors.New("breaker: the caller's callback failed")

// circuit is one gobreaker breaker with the time it last opened.
//
// Its time is the real clock, not a core.Clock: gobreaker v2.4.0 reads
// time.Now itself (generations, the open timeout, the window's buckets) and
// takes no clock in its Settings, so openedAt reads the same wall clock
// for Retry-After to agree with when gobreaker half-opens. Tests of the
// breaker's timing therefore use short timeouts and wait for the state,
// never a fake clock.
type circuit struct {
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	cfg      Config
	openedAt atomic.Int64 // unix nanoseconds of the last opening
}

// newCircuit returns a closed breaker named name with cfg's thresholds;
// cfg has its defaults filled. The breaker runs on the wall clock (see
// circuit).
func newCircuit(name string, cfg Config) *circuit {
	c := &circuit{cfg: cfg}
	c.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         name,
		MaxRequests:  uint32(cfg.HalfOpenMaxRequests),
		Interval:     cfg.Window,
		BucketPeriod: cfg.Window / windowBuckets,
		Timeout:      cfg.OpenTimeout,
		ReadyToTrip:  cfg.readyToTrip,
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded:   func(err error) bool { return err == errIgnored },
		OnStateChange: func(name string, from, to gobreaker.State) {
			c.changed(name, fromGobreaker(from), fromGobreaker(to))
		},
	})
	return c
}

// changed logs a change of state and calls the hook; gobreaker's lock is
// held.
func (c *circuit) changed(name string, from, to State) {
	switch to {
	case StateOpen:
		c.openedAt.Store(time.Now().UnixNano()) // gobreaker's clock: see circuit
		c.cfg.Logger.Warn("breaker: open: calls fail at once until probes succeed",
			"breaker", name, "from", from.String(), "open_for", c.cfg.OpenTimeout)
	case StateHalfOpen:
		c.cfg.Logger.Info("breaker: half-open: probing", "breaker", name)
	case StateClosed:
		c.cfg.Logger.Info("breaker: closed: calls go through again", "breaker", name)
	}
	if c.cfg.OnStateChangeFunc != nil {
		c.cfg.OnStateChangeFunc(name, from, to)
	}
}

// state returns the breaker's state; an open breaker whose timeout passed
// turns half-open here.
func (c *circuit) state() State { return fromGobreaker(c.cb.State()) }

// openFor returns how long an open breaker stays open, zero when it is not
// open.
func (c *circuit) openFor() time.Duration {
	if c.state() != StateOpen {
		return 0
	}
	left := time.Until(time.Unix(0, c.openedAt.Load()).Add(c.cfg.OpenTimeout)) // gobreaker's clock
	return max(left, time.Millisecond)
}

// probesLeft returns how many more probes a half-open breaker lets
// through.
func (c *circuit) probesLeft() int {
	counts := c.cb.Counts()
	used := int(counts.Requests) - int(counts.TotalExclusions)
	return max(c.cfg.HalfOpenMaxRequests-max(used, 0), 0)
}

// allow asks for a call. It returns the func that reports the call's outcome
// or, when the breaker refuses the call, an error.
func (c *circuit) allow() (func(outcome error), error) {
	done, err := c.cb.Allow()
	if err != nil {
		return nil, err
	}
	return done, nil
}

// outcome classifies the error of a call made for a caller whose context is
// ctx: nil for a success, errIgnored for the caller's cancellation and a
// closed store, errFailure when isFailure says so, else nil (the backend
// answered).
func outcome(ctx context.Context, err error, isFailure func(error) bool) error {
	switch {
	case err == nil:
		return nil
	case err == errNothingClaimed || err == errCallerFailed || errors.Is(err, core.ErrClosed):
		return errIgnored
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		// The caller gave up; a deadline of the caller's that ran out in
		// the backend still counts.
		return errIgnored
	case isFailure(err):
		return errFailure
	}
	return nil
}
