package redisstore

import (
	"testing"

	"github.com/delayq/delayq/core/storetest"
)

// BenchmarkListJobs lists pages of 1000 scheduled jobs of a topic with
// DELAYQ_BENCH_LIST_PENDING pending (default 100 000; docs/benchmarks.md
// gives the figures for a million), on a standalone server of its own with
// AOF everysec (a 3-master cluster with DELAYQ_BENCH_CLUSTER=1):
//
//	DELAYQ_BENCH_LIST_PENDING=1000000 go test -run '^$' -bench ListJobs -benchtime 20x ./backends/redisstore/
func BenchmarkListJobs(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_LIST_PENDING", 100_000)
	storetest.ListBench(b, openStore(b, benchURL(b, "everysec"), "bench", benchShards), n)
}
