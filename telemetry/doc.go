// Package telemetry gives delayq OpenTelemetry traces and metrics as
// decorators, so that no other package imports OTel: a core.Store decorator
// (NewStore) that traces pushes and claims and measures intake, lateness,
// attempts and jobs by state; a core.Deliverer decorator (NewDeliverer) that
// traces deliveries and passes their trace context on; gauges of the
// breakers (ObserveBreakers) and of WebSocket subscribers (Subscribers).
// Setup builds the providers: metrics exported in Prometheus format for GET
// /metrics, and OTLP over HTTP for traces and metrics when
// OTEL_EXPORTER_OTLP_ENDPOINT is set.
//
// Providers are injected through Config; nil means the global ones. A noop
// TracerProvider turns tracing off entirely (jobs keep the traceparent their
// push came with).
//
// # Traces
//
// A job's trace is the trace of its push request: its traceparent header,
// which the HTTP and NATS transports put into core.Job.TraceParent. The
// store decorator starts a producer span "push <topic>" per PutJobs (per
// distinct parent), child of the request's span when the context has one,
// else of the job's traceparent, and stores the push span's context as the
// job's traceparent. Each claim gets a span "claim <topic>" that starts when
// the job became due (run_at) and ends when it was claimed, so its length is
// the job's lateness; the claimed job carries the claim span's context. The
// deliverer decorator starts a consumer span "deliver <topic>" for each
// attempt, child of that, and hands the job on with the delivery span's
// context, so a webhook's traceparent header (or a NATS delivery's) names the
// delivery span in the push's trace.
//
// # Metrics
//
// Names are prefixed delayq_ and attributes are queue (the topic),
// transport and outcome (and state for jobs by state); job ids go on spans
// only. docs/operations.md lists every metric with what it means and the
// alerts worth setting.
package telemetry
