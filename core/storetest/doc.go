// Package storetest is the conformance suite of core.Store. Every backend's
// own tests call Run with a Harness that opens stores of that backend over a
// real server; a backend is done when it passes the whole suite.
//
// The suite runs every subtest in parallel, each in a namespace of its own,
// against the store's real clock: it compares times with tolerances, waits
// in ClaimJobs rather than sleeping, and keeps durations short (TTR 1s,
// run_at offsets of a few hundred ms) so that it finishes in seconds.
// Subtests mostly wait, but go test runs only GOMAXPROCS parallel subtests
// at once: on 2 cores the suite takes about 8s over memstore, and under 4s
// with -parallel 32.
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			Open: func(t *testing.T, ns string) core.Store { return open(t, ns) },
//			Durable: true,
//		})
//	}
package storetest
