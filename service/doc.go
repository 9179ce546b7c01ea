// Package service is delayq's API policy, in one place between the
// transports and core.Engine: what each operation asks of a token (Op and
// its table, Authorize), which topics and jobs a token may use (AllowTopic,
// AllowJob), intake quotas, batch bounds and the rule that a batch whose
// every item failed server-side fails as a whole, and the messages of
// lease and not-found errors. httptransport, connecttransport and the NATS
// intake decode a request, call one method of Service with core's
// parameters, and encode what it returns, so that the HTTP API, gRPC and
// NATS answer alike and an access check is written once.
//
// The caller's identity travels in the context (WithIdentity,
// IdentityFrom): a transport authenticates the bearer token in its own
// protocol and puts the *auth.Identity there; a nil identity (the API
// without tokens, the NATS intake) may do everything.
//
// It imports core, auth and transports/wire (the error forms), and never a
// transport.
package service
