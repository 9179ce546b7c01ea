package keyring_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
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
// of a job scanned. The engine's --max-body is DELAYQ_BENCH_SEARCH_MAX_BODY
// bytes (1 MiB, the default), which sets how many jobs a read of the
// store takes (16 MiB of it).
//
//	go test -run '^$' -bench Search -benchtime 5x ./keyring/
func BenchmarkSearch(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_SEARCH", 10_000)
	maxBody := storetest.EnvInt("DELAYQ_BENCH_SEARCH_MAX_BODY", 1<<20)
	ring := mustParse(b, ringBoth)
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
				engine, err := core.NewEngine(core.EngineConfig{Store: store, Logger: slog.New(slog.DiscardHandler),
					Limits: core.Limits{MaxBodyBytes: maxBody}, Deliverers: map[string]core.Deliverer{}})
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

// BenchmarkOpenBody measures the decryption of one stored body, as every
// read of a job with encryption at rest pays it.
//
//	go test -run '^$' -bench OpenBody ./keyring/
func BenchmarkOpenBody(b *testing.B) {
	ring := mustParse(b, ringBoth)
	for _, size := range []int{100, 4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			body := json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)
			sealed := ring.SealBody("job-1", body)
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := ring.OpenBody("job-1", sealed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
