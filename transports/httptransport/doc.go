// Package httptransport serves the HTTP API of docs/api.md over a
// core.Engine: producing (create, replace, batch, get, cancel), consuming by
// pull (claim with a long wait, ack, nack, touch, requeue, and batches of
// acks and nacks), topic
// configuration, dead-job listing, export and import, the online backup
// (GET /v1/backup), the health probes and the API's OpenAPI description
// (GET /v1/openapi.json).
//
// A Server is an http.Handler built on net/http's ServeMux with method and
// pattern routing. Other transports mount their routes on it with
// Server.Handle (the WebSocket subscribe route, /metrics).
//
// # OpenAPI description
//
// openapi.json, embedded and served as it is by GET /v1/openapi.json (and
// returned by OpenAPI), describes every route in OpenAPI 3.1, those that
// delayq serve mounts with Handle included. The package's tests fail when
// a route (Server.Routes) has no operation or an operation no route, and
// validate every request and answer of the handler tests against it, so a
// route and its description change together.
//
// # Wire forms
//
// Request bodies are JSON objects sent with Content-Type application/json
// (any parameters, such as charset); POST /v1/import takes NDJSON with
// application/x-ndjson. A body of another type, or without a type unless
// it is declared empty, is answered 415 unsupported_media_type before it is
// read: browsers send form and text/plain bodies to any site without
// asking, JSON only after a CORS preflight this server never grants. They
// are decoded strictly: unknown fields, wrong types,
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
// unsupported_media_type 415, misdirected_request 421, rate_limited 429
// (with Retry-After, whole seconds until the quota allows the request),
// unavailable 503 (with Retry-After: 1) and internal 500. Internal errors are
// logged and never shown to clients.
//
// # Browsers
//
// Every request is checked before authentication. Its Host header, port
// aside, must be a host the server serves, so that a page of a DNS
// rebinding name cannot read the API: one that Config.AllowedHosts matches
// or, without it, when the request came in on a loopback address, localhost
// or a loopback address (127.0.0.0/8, ::1); other hosts are answered 421
// misdirected_request. Without AllowedHosts a request on another address
// may name any host. GET /healthz and GET /readyz are exempt: probes name
// the address. RequireHost gives the same check to a handler served on a
// listener of its own, such as the profiling endpoints. Then net/http's CrossOriginProtection refuses a browser's
// cross-origin request that is not GET, HEAD or OPTIONS (by Sec-Fetch-Site,
// or an Origin that does not match Host) with 403 permission_denied,
// unless its origin is one of Config.TrustedOrigins. Requests without
// those headers, as curl and programs send, pass.
//
// # Access control
//
// With Config.Tokens holding any token, every request but GET /healthz,
// GET /readyz, GET /v1/openapi.json and GET /metrics (unless
// Config.ProtectMetrics) needs
// `Authorization: Bearer <token>`. A missing, malformed or unknown token is
// answered 401 unauthenticated with `WWW-Authenticate: Bearer`; a path
// without a route needs a valid token too. A token without the route's
// scope is answered 403 permission_denied: push for creating, replacing,
// batching and cancelling jobs; consume for claim, ack, nack, touch, the
// batches of acks and nacks and WebSocket subscribe; push or consume for getting a job; admin for
// everything else (topic configuration, listing topics, dead jobs,
// requeue, export, import, backup), and admin grants push and consume too. A token restricted to
// topic patterns is also answered 403 for a topic none of them matches:
// the topic of the body for create and replace, of each job of a batch (that
// job fails alone), of the path for topic routes, and, for routes given a
// job id, the topic of the stored job (read first; an unknown id is left to
// the route, so it answers 404 or, for PUT, creates the job in the body's
// topic), as for each item of POST /v1/acks and POST /v1/nacks (that item
// fails alone, with the error the route of its job id would give). GET /v1/topics lists only the topics such a token may use, and
// GET /v1/export only their jobs; GET /v1/backup, which holds every
// topic's jobs, refuses such a token. Such a
// token may name as a NATS topic's delivery.subject only
// delayq.deliver.<topic> of a topic it may use, or a subject matched by
// Config.NATSDeliverySubjects. Denials
// are logged at info level with the token's name, never its secret. Without
// tokens the API is open.
//
// The server authenticates the token; what it may do is decided by package
// service: each route maps to a service.Op (Server.Op), whose entry in the
// service's table names its scopes, and the handlers call
// service.Service, which checks topics, jobs and quotas, so that the gRPC
// API, which calls the same service, answers alike. Routes mounted with
// Handle have the topic of their path checked by the service before they
// run.
//
// # Batches
//
// POST /v1/jobs/batch answers 200 with one result per job, in order; each
// job succeeds or fails on its own, including a job object that fails to
// decode. Only when every job failed with a server-side error (the backend
// is down) does the whole batch get that error's status, so that clients
// retry it as one.
//
// POST /v1/acks and POST /v1/nacks settle many deliveries at once, each item
// as POST /v1/jobs/{id}/ack or /nack would, with the same answer rules:
// 200 with {"id"} or {"id", "error"} per item, in order. The acks go to
// Engine.AckBatch and are written together; nacks, the failure path, go to
// Engine.Nack one by one. Each list holds 1 to the engine's MaxBatch items
// (400 empty, 413 longer), like a batch of jobs.
//
// # Limits
//
// A single job request is bounded by the engine's Limits.MaxBodyBytes plus
// room for the envelope, a batch request by Config.MaxRequestBytes and any
// other request by a small fixed bound (256 KiB); a larger request gets
// 413. A body is buffered as it arrives, never to its declared length up
// front.
//
// The server sets each request's deadlines itself, so the http.Server needs
// no ReadTimeout or WriteTimeout (which would cut claims, exports and
// WebSocket subscribers): a body must arrive within Config.BodyReadTimeout
// (30s) of the handler's start, else 400 and the connection is closed (an
// import's each read within it); an answer must be written within
// Config.WriteTimeout (30s), a claim's counted from the end of its wait, an
// export's from each flush, a backup's from each write.
//
// # Backups
//
// GET /v1/backup has Config.Backup (by default Engine.Checkpoint, see
// core.Checkpointer) write a consistent copy of the store's data into a new
// directory under Config.BackupDir, streams that directory as a tar
// archive (application/x-tar, not compressed: the store's files mostly
// are), and removes it whatever happens: sent, failed, the client gone or
// the server stopping. One backup runs at a time; another is answered 409
// conflict meanwhile rather than 429, since no quota is at stake and it
// lasts as long as the first one's download, not a rate's second. A backend
// without the capability answers 501 unimplemented.
//
// A token with an intake quota (see package auth) may create or replace
// jobs at its rate: each job of a create, replace or batch counts, and a
// request over the quota is refused whole, storing nothing, with 429
// rate_limited and Retry-After; a batch larger than the token's burst,
// which no wait would allow, gets 413 too_large on jobs. Quotas are kept in
// memory, per instance. Imports are not counted.
package httptransport
