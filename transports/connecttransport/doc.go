// Package connecttransport serves delayq's gRPC API, the service
// delayq.v1.DelayqService of proto/delayq/v1/delayq.proto, over a
// core.Engine with connectrpc.com/connect: one handler answers the gRPC,
// gRPC-Web and Connect protocols, and gRPC server reflection (v1 and
// v1alpha, through connectrpc.com/grpcreflect) lets grpcurl and grpcui call
// it without the .proto file. Mount it on the HTTP API's listener with
// Register (httptransport's Server.HandleOwnAuth), so that one port serves
// HTTP/1.1, HTTP/2 with TLS and HTTP/2 without TLS (h2c, which gRPC clients
// speak to a plain listener) alike.
//
// # Operations
//
// Every method mirrors a route of the HTTP API (docs/api.md): it decodes
// its message, calls the method of service.Service that the route calls
// (with its topic checks, quotas and batch rules) and encodes the answer;
// the proto names each one's route. Export
// and Import are streams of batches of schedules and jobs; the backup and
// the health probes stay on HTTP. Messages carry the HTTP API's wire forms: durations
// and times are strings decoded by package wire, a job's body is one JSON
// value as text, kept byte for byte.
//
// # Access
//
// With tokens, every call needs the metadata `authorization: Bearer
// <token>` with the scope of its route (push, consume, admin; admin grants
// the others), and reflection a valid token of any scope: each procedure
// maps to a service.Op (Op), and service.Service.Authorize decides. No token or an
// unknown one is Unauthenticated, a token without the scope or the topic
// PermissionDenied. The Host and cross-origin checks of the HTTP API run
// before, and answer with its JSON error body.
//
// # Errors
//
// Errors map through one table (codeTable) from the codes of docs/api.md:
// invalid_argument InvalidArgument, unauthenticated Unauthenticated,
// permission_denied PermissionDenied, not_found NotFound, conflict Aborted,
// too_large and rate_limited ResourceExhausted, unavailable Unavailable,
// unimplemented Unimplemented, internal Internal. Each error of a handler
// carries a delayq.v1.Error detail with the HTTP code, message and field, the
// existing job of a conflict over an id (when the token may see its
// topic), and when to retry. Batches answer each item's error in its
// result, as the HTTP API does. Errors of the protocol (a malformed or
// oversized message) are connect-go's own, without the detail.
//
// # Subscribe
//
// Subscribe is the WebSocket subscriber as a server stream, on the same
// claim loop (core.Subscription): it sends due jobs while it has credit
// (prefetch minus the deliveries it holds), and the caller settles each
// with the unary Ack, Nack or Touch, on any connection. Settling through
// any transport of this instance gives credit back at once; through
// another instance when the stream reads back the deliveries it has held
// for Config.Recheck (every Config.Recheck), which also tells the cancel
// of a running job made through another instance;
// a lost lease when it expires. When a stream ends, what it held is
// released at once for redelivery. Each send must be taken within
// Config.SendTimeout. Stop ends every stream and waits for the releases;
// call it before http.Server.Shutdown, which would wait for the streams,
// and before the engine stops.
package connecttransport
