// Command delayq is the delayq binary: `delayq serve` runs the delay-queue
// service, and the client commands (`push`, `get`, `cancel`, `topics`) talk
// to a running service over its HTTP API.
//
// `delayq serve` with no flags keeps jobs durably in an embedded NATS
// JetStream server under ./delayq-data and answers HTTP on 127.0.0.1:8080.
// `--backend nats` points it at an external NATS cluster instead,
// `--backend redis` at Redis, and `--backend memory` keeps jobs in memory
// only (for trials and tests).
//
// NATS intake (delayq.push.<topic>, delayq.cancel) and delivery (topics of
// delivery type nats) work on every backend: on the NATS backend's server,
// and for redis and memory on an in-process NATS server (package
// natsserver, as the embedded backend's) that serve starts on
// --nats-listen, with JetStream files in <data>/nats (redis) or a
// temporary directory (memory), or on the NATS that --nats-url names
// (instances sharing a Redis must share one NATS). `--nats-listen off`
// turns NATS off on every backend. A backend's branch of openStore gets its
// NATS from startNATS.
//
// Every flag of serve, and the client commands' --server and --token, has
// an environment twin: DELAYQ_ followed by the flag name upper-cased with
// dashes turned into underscores (DELAYQ_HTTP, DELAYQ_NATS_URL,
// DELAYQ_SERVER). A flag given on the command line wins over its twin.
//
// Exit codes: 0 on success (including a shutdown by SIGINT or SIGTERM), 1
// when the service fails or the server answers an error (printed as
// `delayq: <code>: <message>`), 2 for a usage error: an unknown flag, a bad
// flag or environment value, a missing argument.
//
// This package holds only flags, configuration and wiring; the behaviour
// lives in core, the backends and the transports.
package main
