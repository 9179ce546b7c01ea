// Package client is the Go client of delayq, a delay-queue service: it
// schedules jobs ("close order 42 in 30 minutes") and consumes them over
// the service's HTTP and WebSocket API, as docs/api.md describes it, with
// typed errors, so that a Go service need not write its own HTTP calls.
//
// It is a module of its own (github.com/delayq/delayq/client) whose only
// dependency is github.com/coder/websocket: importing it brings none of the
// server's dependencies.
//
// # Producing
//
// New makes a Client for a service's URL, with an optional bearer token
// and TLS configuration. Push creates a job (PushBatch many, Replace
// creates or replaces one by id); Get, Cancel, CancelByKey and FindByKey
// read and cancel them.
//
// # Consuming
//
// Subscribe takes a topic's deliveries over a WebSocket and runs a
// HandlerFunc for each, up to a concurrency, keeping each lease alive
// while its handler runs, acking or nacking by the handler's result and
// reconnecting when the connection drops. Claim takes deliveries by pull,
// settled with Ack, Nack and Touch, or AckBatch and NackBatch for many.
//
// # Receiving webhooks
//
// A WebhookReceiver is the http.Handler of a topic's delivery.url: it
// verifies each request's signature (Delayq-Signature or the Standard
// Webhooks headers, with any of the secrets of a rotation, within a
// tolerance of its signing time) and runs the same HandlerFunc as
// Subscribe: nil acks, RetryIn asks for a later retry, and StopRetries
// makes the job dead at once (Delayq-No-Retry).
//
// # Administration
//
// Topics are configured with PutTopic (or PutTopicJSON, from the JSON
// body of the HTTP API), read with GetTopic and ListTopics,
// dropped with DeleteTopic, paused and resumed with PauseTopic and
// ResumeTopic. ListDead and Requeue handle dead jobs; Export and Import
// move jobs between deployments. Schedules are set with PutSchedule (or
// PutScheduleJSON), read with GetSchedule and ListSchedules, and deleted
// with DeleteSchedule.
//
// WithRawAnswer keeps the service's answer byte for byte besides the
// decoded value, for tools that pass the service's JSON on.
//
// # Errors
//
// Every call takes a context. An error answer of the service is an
// *APIError (status, code, message, the field at fault, the existing job
// of an id in use, Retry-After); it matches the sentinels ErrNotFound,
// ErrConflict, ErrInvalidArgument, ErrUnauthenticated, ErrPermissionDenied,
// ErrRateLimited, ErrUnavailable and ErrLeaseLost with errors.Is. A request
// that got no answer matches ErrUnavailable. The client does not retry on
// its own.
package client
