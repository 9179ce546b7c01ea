// Package breaker keeps delayq answering when what it depends on fails: a
// circuit breaker (github.com/sony/gobreaker/v2) around the store, and one
// around each delivery endpoint.
//
// # Store
//
// New wraps any core.Store. While the backend answers, calls pass through
// and their outcomes are counted. Only infrastructure failures count
// (IsInfrastructure): core.ErrUnavailable, a deadline that ran out in the
// backend, connection errors. An answer the backend gave (ErrNotFound,
// ErrConflict, ErrLeaseLost, validation), a caller that cancelled its
// context, a closed store (core.ErrClosed) and a full one
// (core.ErrStorageFull: it refuses puts but serves the rest) never count. When the
// failures reach a threshold (Config.ConsecutiveFailures in a row, or
// Config.FailureRatio of the calls over Config.Window), the breaker opens:
// for Config.OpenTimeout every call returns ErrOpen at once, without
// reaching the backend. ErrOpen wraps core.ErrUnavailable, so intake answers
// 503 unavailable with Retry-After, /readyz (Ping) answers 503, and the
// engine's dispatch loops back off as they do on any claim error. Then the
// breaker is half-open: up to Config.HalfOpenMaxRequests calls go through
// as probes; that many successes in a row close it, one failure opens it
// again for another OpenTimeout.
//
// A backend that hangs rather than fails (a NATS connection buffering
// publishes while it reconnects never answers them) would hold every call
// without a failure to count, so each call gets a deadline,
// Config.CallTimeout (ClaimJobs: its Wait plus CallTimeout), and running out
// of it counts as a failure.
//
// A claim that waited and found nothing proves nothing about the backend (a
// store may wait on local state while its server is away) and is not
// counted either way; a claim that returned jobs is a success. While the
// breaker is not closed, ClaimJobs first probes with Ping, so a long claim
// never holds a half-open probe slot through its wait.
//
// # Endpoints
//
// NewDeliverer wraps a core.Deliverer with a breaker per endpoint (the host
// of a webhook URL, by default). While an endpoint's breaker is open, its
// deliveries fail at once with an *OpenError that asks the engine to wait
// until the breaker half-opens (RetryAfter), so the attempt is retried by
// the topic's backoff, no sooner than the breaker lets a probe through: one
// dead endpoint costs its jobs an attempt per backoff step, as a failing
// attempt would, but no connection, timeout or delivery slot, and other
// endpoints and topics go on.
//
// # Time
//
// Breakers run on the wall clock, not on an injected core.Clock:
// gobreaker v2.4.0 reads time.Now itself and offers no way to give it a
// clock, so the open timeout, the window and the Retry-After the breaker
// reports all follow real time, also in tests.
package breaker
