package keyring_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/keyring"
)

// BenchmarkSearch measures a body search (contains, core's SearchJobs)
// over DELAYQ_BENCH_SEARCH scheduled jobs (10 000) of one topic, one in a
// hundred matching, walked page by page to its end, on the memory and the
// local store, without and with encryption at rest: ns/job is the cost
// of a job scanned.
//
//	go test -run '^$' -bench Search -benchtime 10x ./keyring/
func BenchmarkSearch(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_SEARCH", 10_000)
	ring := mustParse(b, testRing)
	for _, backend := range []string{"memory", "local"} {
		for _, sealed := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/sealed=%v", backend, sealed), func(b *testing.B) {
				var store core.Store
				if backend == "memory" {
					store = memstore.New(memstore.Config{})
				} else {
					s, err := pebblestore.Open(pebblestore.Config{Dir: b.TempDir()})
					require.NoError(b, err)
					store = s
				}
				b.Cleanup(func() { _ = store.Close() })
				if sealed {
					store = keyring.New(store, keyring.Config{Ring: ring})
				}
				engine, err := core.NewEngine(core.EngineConfig{Store: store, Logger: slog.New(slog.DiscardHandler), Deliverers: map[string]core.Deliverer{}})
				require.NoError(b, err)
				runAt := time.Now().Add(time.Hour)
				for start := 0; start < n; start += 1000 {
					jobs := make([]*core.Job, 0, 1000)
					for i := start; i < min(n, start+1000); i++ {
						j := storetest.NewJob("t", runAt)
						word := "nothing"
						if i%100 == 0 {
							word = "needle"
						}
						j.Body = json.RawMessage(fmt.Sprintf(`{"order":%d,"email":"customer-%d@example.com","note":"%s","items":[1,2,3,4,5,6,7,8]}`, i, i, word))
						jobs = append(jobs, j)
					}
					storetest.Put(b, b.Context(), store, jobs...)
				}
				b.ResetTimer()
				for b.Loop() {
					found, after := 0, ""
					for {
						page, err := engine.SearchJobs(b.Context(), &core.SearchJobsParams{
							ListJobsParams: core.ListJobsParams{Topic: "t", State: core.StateScheduled, Limit: core.ListLimitMax, After: after},
							Contains:       "needle", Scan: core.ListScanMax,
						})
						require.NoError(b, err)
						found += len(page.Jobs)
						if page.Next == "" {
							break
						}
						after = page.Next
					}
					require.Equal(b, n/100, found)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
			})
		}
	}
}
