// Command delayq is the delayq binary: `delayq serve` runs the delay-queue
// service, `delayq version` prints its build (internal/buildinfo), and the
// client commands (`push`, `get`, `cancel`, `topics`,
// `subscribe`, `claim`, `ack`, `nack`, `export`, `import`, `backup`) talk to
// a running service over its HTTP API through the Go client
// (github.com/delayq/delayq/client; client.go), but for `subscribe`, whose
// print-then-ack and --no-ack the client's Subscribe cannot express, and
// `backup`, which it has no call for. They print the service's JSON as it
// came, or tables with --output table (output.go). `ack` and `nack` take
// many ID LEASE pairs and send them in one request (POST /v1/acks,
// /v1/nacks).
//
// `delayq serve` with no flags keeps jobs durably in a local Pebble
// database under ./delayq-data/local (--backend local, package
// backends/pebblestore) and answers HTTP on 127.0.0.1:8080. One process
// opens a data directory at a time. `--backend jetstream` keeps them in
// NATS JetStream on an in-process server under --data instead
// (`embedded` is a deprecated name of it), `--backend nats` on an external
// NATS cluster, `--backend redis` in Redis, and `--backend memory` in
// memory only (for trials and tests). The data directory's FORMAT file
// names the backend whose jobs it holds (datadir.go): local and jetstream
// refuse a directory of the other, saying how to move its jobs with
// `delayq export` and `delayq import`.
//
// `delayq backup DIR` takes an online backup of the local backend (GET
// /v1/backup, backup.go): serve makes a checkpoint of its database under
// <data>/backup-tmp (emptied at start) with FORMAT beside it, the API streams
// it as a tar archive, and the command unpacks it into DIR, new or empty, as
// a data directory serve starts on as it is. The other backends answer 501.
//
// --sync is "always" or an interval. The local backend fsyncs creates,
// replaces, cancels, requeues, imports and topic changes before it answers
// either way, and claims, acks, retries, buries and touches in the
// background right after they are written, or before it answers with
// "always". For the jetstream backend and the in-process NATS server it is
// JetStream's sync interval.
//
// NATS intake (delayq.push.<topic>, delayq.cancel) and delivery (topics of
// delivery type nats) work on every backend: on the NATS backends' server,
// and for local, redis and memory on an in-process NATS server (package
// natsserver, as the jetstream backend's) that serve starts on
// --nats-listen, with JetStream files in <data>/nats (local, redis) or a
// temporary directory (memory), or on the NATS that --nats-url names
// (instances sharing a Redis must share one NATS). `--nats-listen off`
// turns NATS off on every backend. A backend's branch of openStore gets its
// NATS from startNATS.
//
// Every flag of serve, and the client commands' --server, --token and
// --output, has an environment twin: DELAYQ_ followed by the flag name upper-cased with
// dashes turned into underscores (DELAYQ_HTTP, DELAYQ_NATS_URL,
// DELAYQ_SERVER). A flag given on the command line wins over its twin.
//
// Exit codes: 0 on success (including a shutdown by SIGINT or SIGTERM), 1
// when the service fails or the server answers an error (printed as
// `delayq: <code>: <message>`), 2 for a usage error: an unknown flag, a bad
// flag or environment value, a missing argument.
//
// This package holds only flags, configuration, the data directory's check
// and wiring; the behaviour lives in core, the backends and the transports.
package main
