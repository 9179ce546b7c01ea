// Package apicompat holds delayq's API compatibility gate, in its tests
// alone: nothing here is imported.
//
// The gate drives the real stack over the network, as delayq serve wires
// it for the API (httptransport, with wstransport and connecttransport
// mounted on it, served with HTTP/1.1 and h2c, the engine over memstore
// with a fake clock), through a scripted scenario, and compares what it
// sees with transcripts kept in testdata:
//
//   - http.txt: every route of the OpenAPI description, with a success and
//     each error class the route has; the test fails when openapi.json has
//     an operation that no step of the scenario covers;
//   - grpc.txt: every method of delayq.v1.DelayqService, the same way; the
//     test fails when the service has a method that no step covers;
//   - ws.txt: the frames of a WebSocket subscription;
//   - delayq.v1.binpb: the FileDescriptorSet of proto/delayq/v1 at the last
//     release, which the current generated descriptor must stay compatible
//     with (fields, messages, enums, methods removed, renumbered or
//     retyped fail; additions pass).
//
// Generated ids (ULIDs, and the cursors made of them) and leases are
// replaced in the transcripts by placeholders numbered in order of first
// appearance (<id-1>, <lease-1>), and times come from the fake clock, so a
// transcript is the same on every run. A test that finds a difference prints it line by line.
//
// A change of the API's behaviour that is meant is recorded by rewriting
// the files, which makes it visible in review, with a CHANGELOG line:
//
//	go test ./internal/apicompat -update        # the transcripts
//	go test ./internal/apicompat -run TestProtoCompatible -update-proto  # at a release
//
// The gate knows nothing of the transports' internals, only their
// constructors and what goes over the wire, so that it holds while they
// are rewritten.
package apicompat
