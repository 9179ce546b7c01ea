// Package auth holds delayq's API tokens: bearer tokens that an operator
// configures, each with a name, scopes (push, consume, admin) and optional
// topic patterns. A Tokens set authenticates a presented token by comparing
// SHA-256 digests in constant time and yields an Identity that transports
// ask whether a scope and a topic are granted.
//
// Topic patterns use NATS wildcards over the topic's dot-separated tokens:
// `*` matches exactly one token (`orders.*` matches `orders.close` but not
// `orders` or `orders.eu.close`), and `>` as the last token matches one or
// more tokens (`orders.>` matches `orders.close` and `orders.eu.close`). A
// token without patterns may use every topic.
//
// A token may carry an intake quota (intake_rate jobs per second, with a
// burst of intake_burst): a token bucket of golang.org/x/time/rate held by
// its Identity, so shared by every request of the token that this Tokens
// set authenticates, that is by one delayq instance. Identity.AllowIntake
// takes a request's jobs from it all or none.
//
// A token's secret is never part of an Identity; log its Name.
//
// It imports nothing of this module, so every transport may import it.
package auth
