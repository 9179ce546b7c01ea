//go:build unix

package pebblestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// BenchmarkChainBurst runs a burst of DELAYQ_BENCH_CHAIN jobs (default
// 20 000) through the engine over each store, without and with a next
// step (core.Job.Then), side by side: pushed 100 a call, claimed and
// acknowledged 100 a call. It reports the burst (from the first push to
// the last ack), and with steps the time from the last ack until the
// engine, following the record of finished jobs every 50 ms, has made the
// last step; and the CPU per job of the whole.
//
//	DELAYQ_BENCH_CHAIN=20000 go test -run '^$' -bench '^BenchmarkChainBurst$' -benchtime 1x -count 3 ./backends/pebblestore/
func BenchmarkChainBurst(b *testing.B) {
	n := storetest.EnvInt("DELAYQ_BENCH_CHAIN", 20_000)
	body := json.RawMessage(`{"order":42,"customer":"ada"}`)
	for _, st := range benchStores {
		for _, then := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/then=%t", st.name, then), func(b *testing.B) {
				ctx := context.Background()
				s := st.open(b)
				e, err := core.NewEngine(core.EngineConfig{Store: s, TopicRefresh: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
				require.NoError(b, err)
				require.NoError(b, e.Start(ctx))
				b.Cleanup(func() { _ = e.Stop(ctx) })
				cpu0, start := cpuTime(), time.Now()
				for i := 0; i < n; i += 100 {
					batch := make([]*core.PushParams, min(100, n-i))
					for k := range batch {
						batch[k] = &core.PushParams{Topic: "burst", Body: body}
						if then {
							batch[k].Then = &core.PushParams{Topic: "burst.next", Body: body, Delay: new(time.Hour), Key: "order-42"}
						}
					}
					res, err := e.PushBatch(ctx, &core.PushBatchParams{Jobs: batch})
					require.NoError(b, err)
					for _, r := range res {
						require.NoError(b, r.Err)
					}
				}
				for acked := 0; acked < n; {
					jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "burst", Max: 100, Wait: time.Second})
					require.NoError(b, err)
					require.NotEmpty(b, jobs, "%d of %d acknowledged", acked, n)
					acks := &core.AckJobsParams{}
					for _, j := range jobs {
						acks.Acks = append(acks.Acks, core.AckJobParams{ID: j.ID, Lease: j.Lease})
					}
					errs, err := e.AckBatch(ctx, acks)
					require.NoError(b, err)
					for _, err := range errs {
						require.NoError(b, err)
					}
					acked += len(jobs)
				}
				burst := time.Since(start)
				b.ReportMetric(burst.Seconds(), "burst_s")
				if then {
					lastAck := time.Now()
					for made := int64(0); made < int64(n); {
						require.True(b, time.Since(lastAck) < time.Minute, "%d of %d steps made in a minute", made, n)
						time.Sleep(10 * time.Millisecond) // the follower runs every 50 ms; nothing tells when it made one
						states, err := s.ListTopicStates(ctx)
						require.NoError(b, err)
						made = 0
						for _, t := range states {
							if t.Name == "burst.next" {
								made = t.Counts.Scheduled
							}
						}
					}
					b.ReportMetric(time.Since(lastAck).Seconds(), "steps_after_s")
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(n), "cpu_us/job")
			})
		}
	}
}
