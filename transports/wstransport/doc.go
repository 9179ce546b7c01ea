// Package wstransport serves WebSocket subscribers of topics, as
// docs/api.md's "WebSocket subscribers" describes, over a core.Engine, with
// github.com/coder/websocket.
//
//	GET /v1/topics/{topic}/subscribe?prefetch=16
//
// upgrades to a WebSocket. Mount the Server on the HTTP API with Register
// (httptransport's Server.Handle) so that both share one listener. Before
// the upgrade, a bad topic or prefetch (an integer from 1 to PrefetchMax,
// default PrefetchDefault) or a request that is no WebSocket upgrade is
// answered 400, a browser's request from an origin other than the
// request's own host 403 permission_denied unless Config.OriginPatterns
// allows it, and a request while the server stops or already serves
// Config.MaxSubscribers (default 1024) 503 unavailable with Retry-After,
// with the HTTP API's JSON error body.
//
// # Frames
//
// Frames are JSON text messages. The server sends
//
//	{"type":"job","id":"01J...","topic":"orders.close","body":{"order":42},"attempt":1,
//	 "run_at":"2026-11-21T10:00:00.250Z","lease":"...","lease_expires_at":"2026-11-21T10:00:30.250Z"}
//
// for each delivery, the body byte for byte, and at most prefetch of them
// unacknowledged at once. The subscriber answers each with
//
//	{"type":"ack","id":"...","lease":"..."}
//	{"type":"nack","id":"...","lease":"...","delay":"10s","error":"why"}
//	{"type":"touch","id":"...","lease":"..."}
//
// where a nack's delay (a duration string or milliseconds) and error are
// optional; without a delay the topic's backoff applies. A touch is
// answered {"type":"touched","id":"...","lease_expires_at":"..."}; an ack or
// nack that succeeds is not answered. A frame that cannot be decoded or
// fails is answered
//
//	{"type":"error","code":"conflict","message":"...","field":"...","id":"..."}
//
// with the codes of the HTTP API (invalid_argument for a bad frame, conflict for a
// lost lease, not_found, unavailable), field naming the bad field and id
// the job of the frame when known; the connection stays open.
//
// A delivery whose job is cancelled while it runs (DELETE
// /v1/jobs/{id}?running=true through this instance) is told with
//
//	{"type":"cancelled","id":"..."}
//
// after which its credit is free and its ack or nack is answered with a
// conflict error frame.
//
// A frame larger than Config.MaxFrameBytes (the soft limit, 64 KiB) is
// read to its end and ignored: it is answered with an invalid_argument
// error frame that names the limit, has no id (the frame is not decoded)
// and repeats nothing of the frame, and the connection stays open. A
// connection holds at most MaxFrameBytes+1 bytes of any frame, in a buffer
// shared through a pool, so an oversized frame costs no more memory than
// one at the limit. A frame larger than Config.MaxFrameHardBytes (the hard
// cap, 1 MiB) closes the connection with status 1009 (message too big),
// and its deliveries are released as for any disconnect.
//
// # Credits and competing subscribers
//
// Each connection runs a claim loop that claims, with a long wait, as many
// due jobs as it has credit for (prefetch minus the deliveries it holds) and
// sends them. An ack, a nack, a lease that was lost (its ttr passed without
// a touch, or an ack answered conflict) gives the credit back. Several
// connections to one topic, on one instance or many, compete through the
// store: each delivery goes to one of them.
//
// A connection's ack, nack and touch frames of different jobs are handled
// at once (up to 64 at a time), so one slow store call holds up no other
// job; the frames of one job are handled in the order sent. The connection
// goes on reading while up to prefetch + 64 frames wait to be handled, so
// that a slow store does not keep a pong from being read and the ping from
// closing a subscriber whose acks wait.
//
// # Disconnects
//
// When a connection ends for any reason (closed by the subscriber, dropped,
// a failed write or ping, the server stopping), the frames it had sent are
// handled first, so an ack sent just before closing counts, and then every
// delivery it still held is released at once: nacked with delay 0 and
// last_error "subscriber disconnected", so it is due again with its attempt
// counted (and dead if that was its last attempt, as when a lease expires);
// a job claimed for it and never sent gets its attempt back. The claim
// loop, the prefetch credit and the release are core.Subscription's, the
// same as a gRPC Subscribe stream's.
//
// # Slow subscribers
//
// No lock is shared between connections, and every write has its own
// timeout (Config.WriteTimeout, 10s): a subscriber that does not read is
// disconnected, and its deliveries released, within that time, and never
// holds up other subscribers, other topics or the engine. Each connection
// is pinged every Config.PingInterval (20s) and closed when no pong comes
// within Config.PongTimeout (10s). Stop closes every connection with
// status 1001 and waits for their releases; call it before the engine and
// the store stop, since http.Server.Shutdown does not wait for hijacked
// connections.
//
// # Idle subscribers: what one instance holds
//
// Each open subscription costs two goroutines (its reader and its claim
// loop, parked in the store's claim), the HTTP connection's read and write
// buffers and one file descriptor and, while idle, only a ping every 20s
// and a new claim every 30s. So the number of idle subscribers one instance
// holds is bounded by memory and file descriptors (raise ulimit -n), not
// CPU, and Config.MaxSubscribers (delayq serve's --max-subscribers and
// --max-connections) must be raised to hold many. docs/benchmarks.md
// ("WebSocket subscribers") gives the memory per subscriber measured with
// loadtest/ws and TestIdleSubscribersMemory, with their commands.
package wstransport
