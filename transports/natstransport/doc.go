// Package natstransport is delayq's NATS transport, as docs/api.md's NATS
// section describes: an Intake that takes jobs and cancels from NATS subjects, and a
// Deliverer that publishes the due jobs of topics configured with
// {"delivery": {"type": "nats"}} on a subject. Both work on any *nats.Conn:
// an in-process connection to delayq's own server (natsserver's
// Embedded.Connect: the jetstream backend's server, or the one `delayq
// serve` starts for the other backends) or a connection to a NATS
// cluster.
//
// # Intake
//
// A message on delayq.push.<topic> creates a job of that topic. Its payload
// is the job's body, kept byte for byte; it must be one JSON value (an empty
// payload is null). Headers, matched in any case:
//
//	Delayq-Delay         a Go duration ("500ms", "15m") or milliseconds ("1500")
//	Delayq-Run-At        RFC 3339 with an optional fraction; exclusive with Delayq-Delay
//	Delayq-Id            the job's id (default: a new one)
//	Delayq-TTR           time to run, a duration as Delayq-Delay
//	Delayq-Max-Attempts  the attempt limit
//	Delayq-Key           business key
//	Delayq-Backoff-Delays the job's own retry delays, durations, comma-separated
//	Delayq-Priority      -10 (most urgent) to 10
//	Delayq-Url           the job's own webhook URL (delivery.allow_job_url)
//	Delayq-Expires-At    when the job expires, as Delayq-Run-At
//	Delayq-Expires-In    its expiry as a duration from run_at; exclusive with Delayq-Expires-At
//	traceparent          W3C trace context, carried into deliveries
//
// Any other Delayq-* header is refused, so that a misspelt one is not
// silently ignored; other headers are. With a reply subject (nats request)
// the answer is the created job,
//
//	{"id":"01J...","topic":"orders.close","run_at":"2026-11-21T10:00:00.250Z","state":"scheduled"}
//
// or an error with the codes of the HTTP API and field naming the header
// ("payload" for the body, "subject" for the topic):
//
//	{"error":{"code":"invalid_argument","message":"...","field":"Delayq-Delay"}}
//
// A request on delayq.cancel with a job's id as payload cancels it and is
// answered {} or an error (not_found, or conflict while the job is being
// delivered). A message whose reply subject is delayq's own (under the
// delayq. prefix, a $ subject, or the connection's own inbox prefix) is
// dropped unanswered and logged, so that no producer can make delayq write
// its answer into the store or forge an answer to delayq's own requests.
//
// The subscriptions are in a queue group, so that several delayq instances
// on one NATS cluster share the messages, each going to one instance.
// Messages that arrive together are pushed as one batch through
// service.Service.PushBatch, with the API's batch rules (the intake has no
// tokens, so no quota or topic check refuses it)
// (IntakeConfig.MaxBatch, by IntakeConfig.Workers workers). A message
// published without a reply subject is fire-and-forget, as core NATS is: it
// is lost if no instance listens or the subscription's buffer overflows,
// and a refused message is only logged. Use a request to know that a job
// was stored. Stop drains the subscriptions: every message received is
// handled and answered.
//
// # Delivery
//
// For a topic configured with {"delivery": {"type": "nats", "subject": S}}
// (S defaults to delayq.deliver.<topic>), each due job is published on S
// with the body as payload and the headers
//
//	Delayq-Id       the job's id; receivers deduplicate by it (delivery is at least once)
//	Delayq-Attempt  the 1-based attempt
//	Delayq-Run-At   run_at, RFC 3339 with milliseconds in UTC
//	Delayq-Topic    the topic
//	traceparent     the push's trace context, when it had one
//
// When a JetStream stream holds S (looked up once per subject and cached
// for DelivererConfig.StreamCacheTTL), the job is published through
// JetStream and the stream's PubAck completes the delivery: a stream that
// refuses the message (full, say) fails the attempt, which is retried by
// the topic's backoff and dead after max_attempts. Otherwise a core publish
// completes it once a flush confirms that the server has the message;
// whether any subscriber got it is not known, as with any core NATS
// publish. delivery.timeout (default 10s) bounds each attempt.
//
// ValidateTopic refuses a subject that cannot be published to (wildcards,
// empty tokens, spaces), the $ system subjects ($JS, $KV, $SYS...), _INBOX
// and the connection's own inbox prefix (replies), and, under the delayq.
// prefix, any subject outside delayq.deliver., so that deliveries never
// feed intake or the store's own subjects or forge replies. Every topic is
// checked, whoever configures it (the API, open or with any token, or the
// configuration file).
package natstransport
