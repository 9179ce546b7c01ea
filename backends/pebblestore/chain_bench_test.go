//go:build unix

package pebblestore_test

import (
	"fmt"
	"testing"

	"github.com/delayq/delayq/core/storetest"
)

// BenchmarkChainBurst runs storetest.ChainBurst of DELAYQ_BENCH_CHAIN jobs
// (default 20 000) over each store, without and with a next step, side by
// side, and reports the CPU per job of the whole:
//
//	DELAYQ_BENCH_CHAIN=20000 go test -run '^$' -bench '^BenchmarkChainBurst$' -benchtime 1x -count 3 ./backends/pebblestore/
func BenchmarkChainBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_CHAIN", 20_000)
	for _, st := range benchStores {
		for _, then := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/then=%t", st.name, then), func(b *testing.B) {
				s := st.open(b)
				cpu0 := cpuTime()
				burst, steps := storetest.ChainBurst(b, s, n, then)
				b.ReportMetric(burst.Seconds(), "burst_s")
				if then {
					b.ReportMetric(steps.Seconds(), "steps_after_s")
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(n), "cpu_us/job")
			})
		}
	}
}
