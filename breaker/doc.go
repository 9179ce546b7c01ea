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
// NewDeliverer wraps a core.Deliverer with a breaker (a circuit) per topic
// and endpoint: the host of the topic's webhook URL, or its NATS subject
// (EndpointFunc), and for a job with its own URL, that URL's
// scheme://host/path within the topic (JobEndpointOf). No two topics
// share a circuit, so what one topic or job chose (its timeout, its path,
// its condition) opens no breaker of another topic, even on the same
// host:port; a dead host opens the circuit of each topic that fails
// there. The exception is a wrapped deliverer that is a SharedEndpoint (a
// Kafka cluster, down for every topic at once): its topics share one
// circuit, so that every topic fails fast once the cluster is down; such
// a deliverer marks the failures that are a topic's own as
// core.ErrInvalidArgument, which IsEndpointFailure does not count.
// Circuits are bounded by DelivererConfig.MaxCircuits, since jobs'
// URLs are chosen by whoever pushes: idle closed circuits are forgotten
// first.
//
// The Deliverer is a core.DeliveryGate: while a topic's circuit is open
// the engine's dispatcher claims nothing for the topic and waits for the
// probe time, and while it is half-open claims only as many jobs as probes
// are left. A delivery refused anyway (a job's own URL, a race) fails at
// once with an *OpenError, which matches core.ErrNotSent: the engine
// retries the job when the circuit lets a probe through (RetryAfter) and
// never buries it for the refusal: a job goes dead only on a failed
// attempt that was sent. No connection, timeout or delivery slot is spent
// on a failing endpoint, and the refusal gives the job's attempt back
// (core.RetryJobParams.Unsent).
//
// # Time
//
// Breakers run on the wall clock, not on an injected core.Clock:
// gobreaker v2.4.0 reads time.Now itself and offers no way to give it a
// clock, so the open timeout, the window and the Retry-After the breaker
// reports all follow real time, also in tests. The waits the Deliverer
// names to the engine's dispatcher (DeliveryAdmits) are wall time too: an
// engine on a fake clock waits them out on its own clock, or until one of
// its deliveries ends.
package breaker
