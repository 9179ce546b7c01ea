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
// Request bodies must be UTF-8, as JSON text is: a body with invalid bytes
// is answered 400 as a whole rather than stored raw or altered. A job's
// ttr and max_attempts, when present, must be in range (a zero is refused,
// not taken as the default); when absent they take the topic's.
//
// # Errors
//
// Every answer that is not 2xx has the body
//
//	{"error": {"code": "...", "message": "...", "field": "..."}}
//
// with the code and status chosen by one table shared by every transport
// (see wire.ToError), plus method_not_allowed of this package:
// invalid_argument 400, unauthenticated 401, permission_denied 403,
// not_found 404, method_not_allowed 405, conflict 409
// (with the existing job under "job" when known), too_large 413,
// unavailable 503 (with Retry-After) and internal 500. Internal errors are
// logged and never shown to clients.
//
// # Access control
//
// With Config.Tokens holding any token, every request but GET /healthz,
// GET /readyz and GET /metrics (unless Config.ProtectMetrics) needs
// `Authorization: Bearer <token>`. A missing, malformed or unknown token is
// answered 401 unauthenticated with `WWW-Authenticate: Bearer`; a path
// without a route needs a valid token too. A token without the route's
// scope is answered 403 permission_denied: push for creating, replacing,
// batching and cancelling jobs; consume for claim, ack, nack, touch and
// WebSocket subscribe; push or consume for getting a job; admin for
// everything else (topic configuration, listing topics, dead jobs,
// requeue), and admin grants push and consume too. A token restricted to
// topic patterns is also answered 403 for a topic none of them matches:
// the topic of the body for create and replace, of each job of a batch (that
// job fails alone), of the path for topic routes, and, for routes given a
// job id, the topic of the stored job (read first; an unknown id is left to
// the route, so it answers 404 or, for PUT, creates the job in the body's
// topic). GET /v1/topics lists only the topics such a token may use. Such a
// token may name as a NATS topic's delivery.subject only
// delayq.deliver.<topic> of a topic it may use, or a subject matched by
// Config.NATSDeliverySubjects. Denials
// are logged at info level with the token's name, never its secret. Without
// tokens the API is open.
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
