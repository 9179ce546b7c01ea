//go:build unix

package pebblestore_test

import (
	"testing"

	"github.com/delayq/delayq/core/storetest"
)

// BenchmarkListJobs lists pages of 1000 scheduled jobs of a topic with
// DELAYQ_BENCH_LIST_PENDING pending (default 100 000; docs/benchmarks.md
// gives the figures for a million):
//
//	DELAYQ_BENCH_LIST_PENDING=1000000 go test -run '^$' -bench ListJobs -benchtime 20x ./backends/pebblestore/
func BenchmarkListJobs(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_LIST_PENDING", 100_000)
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) { storetest.ListBench(b, st.open(b), n) })
	}
}
