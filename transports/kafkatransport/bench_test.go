package kafkatransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/transports/kafkaclient"
	"github.com/delayq/delayq/transports/kafkatransport"
)

// burstJobs is the size of a burst of BenchmarkBurst.
const burstJobs = 100_000

// BenchmarkBurst delivers a burst of burstJobs due jobs to Kafka through
// the engine, at the topic's concurrency 16 (the default) and 256, with
// the delivery client's options and with franz-go's default linger
// (10ms), and to no Kafka at all (the engine's own cost), beside a plain franz-go producer writing the same records to the
// same kfake cluster: kfake is not a broker's speed, the ratio is what
// counts. Each iteration is one burst; jobs/s is the figure.
//
//	go test -run '^$' -bench BenchmarkBurst -benchtime 3x ./transports/kafkatransport/
func BenchmarkBurst(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, kafkaTopic))
	require.NoError(b, err)
	b.Cleanup(c.Close)
	b.Run("franz-go", func(b *testing.B) {
		cl := producer(b, c)
		recs := make([]*kgo.Record, burstJobs)
		for i := range recs {
			recs[i] = kafkatransport.Record(kafkaTopic, benchJob(i))
		}
		for b.Loop() {
			for _, r := range recs {
				// Produce keeps no state in the record a second one needs.
				cl.Produce(context.Background(), &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers},
					func(_ *kgo.Record, err error) { require.NoError(b, err) })
			}
			require.NoError(b, cl.Flush(context.Background()))
		}
		b.ReportMetric(float64(b.N*burstJobs)/b.Elapsed().Seconds(), "jobs/s")
	})
	for _, v := range []struct {
		name        string
		concurrency int
		extra       []kgo.Opt
	}{
		{"delayq/concurrency=16", 16, nil},
		{"delayq/concurrency=256", 256, nil},
		{"delayq/concurrency=256/linger=10ms", 256, []kgo.Opt{kgo.ProducerLinger(10 * time.Millisecond)}},
	} {
		b.Run(v.name, func(b *testing.B) {
			cl, err := kafkaclient.Config{Brokers: c.ListenAddrs()}.NewClient(context.Background(), append(kafkatransport.ProducerOpts(), v.extra...)...)
			require.NoError(b, err)
			b.Cleanup(cl.Close)
			d, err := kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{Client: cl})
			require.NoError(b, err)
			benchEngineBurst(b, d, v.concurrency)
		})
	}
	// The engine alone, delivering nowhere: what delayq's own path costs.
	b.Run("delayq/concurrency=256/no-kafka", func(b *testing.B) { benchEngineBurst(b, instantDeliverer{}, 256) })
}

// instantDeliverer delivers every job at once, nowhere.
type instantDeliverer struct{}

func (instantDeliverer) ValidateTopic(*core.Topic) error                    { return nil }
func (instantDeliverer) Deliver(context.Context, *core.DeliverParams) error { return nil }

// benchEngineBurst pushes burstJobs jobs to a paused topic delivered by d,
// then times its resumption until every job is acknowledged.
func benchEngineBurst(b *testing.B, d core.Deliverer, concurrency int) {
	ctx := context.Background()
	mem := memstore.New(memstore.Config{})
	b.Cleanup(func() { _ = mem.Close() })
	store := &storetest.SignalStore{Store: mem, Outcomes: make(chan storetest.Outcome, burstJobs),
		Kinds: []storetest.OutcomeKind{storetest.OutcomeAck}}
	engine, err := core.NewEngine(core.EngineConfig{Store: store, Logger: slog.New(slog.DiscardHandler),
		Limits: core.Limits{MaxBatch: 10_000}, Deliverers: map[string]core.Deliverer{core.DeliveryKafka: d}})
	require.NoError(b, err)
	require.NoError(b, engine.Start(ctx))
	b.Cleanup(func() { _ = engine.Stop(ctx) })
	topic := kafkaTopicConfig("burst")
	topic.Concurrency = concurrency
	require.NoError(b, engine.PutTopic(ctx, topic))
	for b.Loop() {
		b.StopTimer()
		require.NoError(b, engine.SetTopicPaused(ctx, "burst", true))
		for start := 0; start < burstJobs; start += 10_000 {
			ps := make([]*core.PushParams, 10_000)
			for i := range ps {
				j := benchJob(start + i)
				ps[i] = &core.PushParams{Topic: "burst", Body: j.Body, Key: j.Key}
			}
			res, err := engine.PushBatch(ctx, &core.PushBatchParams{Jobs: ps})
			require.NoError(b, err)
			for _, r := range res {
				require.NoError(b, r.Err)
			}
		}
		b.StartTimer()
		require.NoError(b, engine.SetTopicPaused(ctx, "burst", false))
		store.Wait(b, storetest.OutcomeAck, burstJobs, 5*time.Minute)
	}
	b.ReportMetric(float64(b.N*burstJobs)/b.Elapsed().Seconds(), "jobs/s")
}

// benchJob is the i-th job of a burst: a JSON body of about 70 bytes and
// a key.
func benchJob(i int) *core.Job {
	body := fmt.Sprintf(`{"order":%d,"customer":"c-%06d","action":"close","note":"due-job-pad"}`, i, i%1_000_000)
	return &core.Job{ID: fmt.Sprintf("j%07d", i), Topic: "burst", Key: fmt.Sprintf("order-%d", i), Body: json.RawMessage(body),
		Attempt: 1, RunAt: time.Unix(1_800_000_000, 0)}
}
