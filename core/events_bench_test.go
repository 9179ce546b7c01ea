package core_test

import (
	"context"
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
)

// eventsBurstJobs is the size of a burst of BenchmarkEventsBurst.
const eventsBurstJobs = 20_000

// instantDeliverer delivers every job at once, nowhere.
type instantDeliverer struct{}

func (instantDeliverer) ValidateTopic(*core.Topic) error                    { return nil }
func (instantDeliverer) Deliver(context.Context, *core.DeliverParams) error { return nil }

// BenchmarkEventsBurst measures what job events cost a burst: a burst of
// eventsBurstJobs due jobs of a topic without events and of one with
// events on done (to a topic nobody consumes), each delivered by the
// engine (concurrency 256, a deliverer that returns at once) and acked, on
// the local store (Pebble, the default backend) and the memory store.
// Each iteration times the topic's resumption until every job is acked
// (acked-s) and, with events, until every event job is put (told-s: the
// follower runs every TopicRefresh, 2 s by default, so that is within 2 s
// of the record's last page). Compare the pair side by side in one run:
//
//	go test -run '^$' -bench BenchmarkEventsBurst -benchtime 1x ./core/
func BenchmarkEventsBurst(b *testing.B) {
	for _, store := range []string{"local", "memory"} {
		for _, events := range []bool{false, true} {
			b.Run(fmt.Sprintf("store=%s/events=%t", store, events), func(b *testing.B) {
				var s core.Store
				if store == "local" {
					ps, err := pebblestore.Open(pebblestore.Config{Dir: b.TempDir()})
					require.NoError(b, err)
					s = ps
				} else {
					s = memstore.New(memstore.Config{})
				}
				b.Cleanup(func() { _ = s.Close() })
				benchEventsBurst(b, s, events)
			})
		}
	}
}

// benchEventsBurst pushes eventsBurstJobs jobs to a paused topic, with
// events when events is set, then times its resumption until every job
// is acked and every event put.
func benchEventsBurst(b *testing.B, s core.Store, events bool) {
	ctx := context.Background()
	// Puts and acks both: the burst's pushes, then its acks and the
	// events' puts interleaved.
	store := &storetest.SignalStore{Store: s, Outcomes: make(chan storetest.Outcome, 4*eventsBurstJobs),
		Kinds: []storetest.OutcomeKind{storetest.OutcomePut, storetest.OutcomeAck}}
	e, err := core.NewEngine(core.EngineConfig{Store: store, Logger: slog.New(slog.DiscardHandler),
		Limits: core.Limits{MaxBatch: 10_000, MaxBodyBytes: 1 << 20}, Deliverers: map[string]core.Deliverer{core.DeliveryWebhook: instantDeliverer{}}})
	require.NoError(b, err)
	require.NoError(b, e.Start(ctx))
	b.Cleanup(func() { _ = e.Stop(ctx) })
	topic := &core.Topic{Name: "burst", Concurrency: 256, Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://127.0.0.1:9/hook"}}
	if events {
		topic.Events = core.Events{Topic: "audit", On: []string{core.EventDone}}
	}
	require.NoError(b, e.PutTopic(ctx, topic))
	var acked, told time.Duration
	for b.Loop() {
		b.StopTimer()
		require.NoError(b, e.SetTopicPaused(ctx, "burst", true))
		for start := 0; start < eventsBurstJobs; start += 10_000 {
			ps := make([]*core.PushParams, 10_000)
			for i := range ps {
				ps[i] = &core.PushParams{Topic: "burst", Key: fmt.Sprintf("order-%d", start+i),
					Body: json.RawMessage(fmt.Sprintf(`{"order":%d,"customer":"c-%06d","action":"close","note":"due-job-pad"}`, start+i, start+i))}
			}
			res, err := e.PushBatch(ctx, &core.PushBatchParams{Jobs: ps})
			require.NoError(b, err)
			for _, r := range res {
				require.NoError(b, r.Err)
			}
		}
		store.Wait(b, storetest.OutcomePut, eventsBurstJobs, time.Minute)
		b.StartTimer()
		start := time.Now()
		require.NoError(b, e.SetTopicPaused(ctx, "burst", false))
		acks, puts := 0, 0
		deadline := time.After(5 * time.Minute)
		for acks < eventsBurstJobs || events && puts < eventsBurstJobs {
			select {
			case o := <-store.Outcomes:
				if o.Kind == storetest.OutcomeAck {
					if acks++; acks == eventsBurstJobs {
						acked += time.Since(start)
					}
				} else if puts++; puts == eventsBurstJobs {
					told += time.Since(start)
				}
			case <-deadline:
				b.Fatalf("%d acks and %d events of %d within 5 minutes", acks, puts, eventsBurstJobs)
			}
		}
	}
	b.ReportMetric(acked.Seconds()/float64(b.N), "acked-s")
	if events {
		b.ReportMetric(told.Seconds()/float64(b.N), "told-s")
	}
	b.ReportMetric(float64(b.N*eventsBurstJobs)/acked.Seconds(), "jobs/s")
}
