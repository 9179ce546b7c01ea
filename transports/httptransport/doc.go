// Package httptransport serves the HTTP API of shared/API.md over a
// core.Engine: producing (create, replace, batch, get, cancel), consuming by
// pull (claim with a long wait, ack, nack, touch, requeue), topic
// configuration, dead-job listing and the health probes.
//
// A Server is an http.Handler built on net/http's ServeMux with method and
// pattern routing. Other transports mount their routes on it with
// Server.Handle (the WebSocket subscribe route, /metrics).
//
// # Wire forms
//
// Requests are JSON objects decoded strictly: unknown fields, wrong types,
// trailing data, bad durations and bad times are answered 400 with the
// offending field named. Durations are Go duration strings ("1500ms") or
// integers of milliseconds; times are RFC 3339 with an optional fraction.
// Answers give times as RFC 3339 with milliseconds in UTC and durations as
// Go duration strings. A job's body is kept and answered byte for byte.
//
// # Errors
//
// Every answer that is not 2xx has the body
//
//	{"error": {"code": "...", "message": "...", "field": "..."}}
//
// with the code and status chosen by one table shared by every transport
// (see wire.ToError), plus method_not_allowed of this package:
// invalid_argument 400, not_found 404, method_not_allowed 405, conflict 409
// (with the existing job under "job" when known), too_large 413,
// unavailable 503 (with Retry-After) and internal 500. Internal errors are
// logged and never shown to clients.
//
// # Batches
//
// POST /v1/jobs/batch answers 200 with one result per job, in order; each
// job succeeds or fails on its own, including a job object that fails to
// decode. Only when every job failed with a server-side error (the backend
// is down) does the whole batch get that error's status, so that clients
// retry it as one.
//
// # Limits
//
// A single job request is bounded by the engine's Limits.MaxBodyBytes plus
// room for the envelope, a batch request by Config.MaxRequestBytes and any
// other request by a small fixed bound; a larger request gets 413. Because a
// claim may wait up to core.ClaimWaitLimit, the http.Server's WriteTimeout
// must be longer than that.
package httptransport
