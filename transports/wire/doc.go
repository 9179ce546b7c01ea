// Package wire holds the wire forms that delayq's transports share, so that
// the HTTP API, WebSocket frames, NATS messages and Kafka records decode
// jobs (JobRequest), durations, times and trace context the same way and show deliveries alike: durations are Go
// duration strings ("1500ms", "2h") or integers of milliseconds, times are
// RFC 3339 with an optional fraction (shown with milliseconds in UTC), and a
// job's body is kept and shown byte for byte. Errors get the same codes,
// statuses and client messages everywhere from one table (see ToError).
//
// Of this module it imports only core, so every transport and the service
// package (which makes the checks of a token) may import it; the
// transports never import each other.
package wire
