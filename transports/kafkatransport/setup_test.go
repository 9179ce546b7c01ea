package kafkatransport_test

import (
	"context"
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

// kafkaTopic is the Kafka topic the tests deliver to.
const kafkaTopic = "orders-due"

// newCluster starts an in-process Kafka cluster of brokers brokers holding
// kafkaTopic with partitions partitions, closed at cleanup.
func newCluster(t testing.TB, brokers int, partitions int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, kafkaTopic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// producer returns a delivery client of c, as delayq serve makes it,
// closed at cleanup.
func producer(t testing.TB, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kafkaclient.Config{Brokers: c.ListenAddrs()}.NewClient(ctx, kafkatransport.ProducerOpts()...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// testBundle is what a test drives: a real engine over memstore that
// delivers kafka topics with this package's Deliverer, wrapped by wrap when
// set.
type testBundle struct {
	store  *storetest.SignalStore
	engine *core.Engine
}

func setup(t testing.TB, c *kfake.Cluster, wrap func(core.Deliverer) core.Deliverer) *testBundle {
	t.Helper()
	d, err := kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{Client: producer(t, c)})
	require.NoError(t, err)
	var kd core.Deliverer = d
	if wrap != nil {
		kd = wrap(d)
	}
	mem := memstore.New(memstore.Config{})
	store := &storetest.SignalStore{Store: mem, Outcomes: make(chan storetest.Outcome, 200_000),
		Kinds: []storetest.OutcomeKind{storetest.OutcomeAck}}
	engine, err := core.NewEngine(core.EngineConfig{
		Store:        store,
		Logger:       slog.New(slog.DiscardHandler),
		Limits:       core.Limits{MaxBatch: 10_000},
		Deliverers:   map[string]core.Deliverer{core.DeliveryKafka: kd},
		TopicRefresh: time.Hour,
	})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, engine.Stop(ctx))
		require.NoError(t, mem.Close())
	})
	return &testBundle{store: store, engine: engine}
}

// consume reads the records of kafkaTopic from c, from the start, until
// they hold n jobs (distinct delayq-id headers: a job retried after a
// timeout may have two), within timeout; it fails the test with fewer.
func consume(t testing.TB, c *kfake.Cluster, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(kafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var recs []*kgo.Record
	jobs := map[string]bool{}
	for len(jobs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("records of %d jobs of %d within %s", len(jobs), n, timeout)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			id, _ := header(r, kafkatransport.HeaderID)
			jobs[id] = true
			recs = append(recs, r)
		}
	}
	if len(recs) > n {
		t.Logf("%d records of %d jobs: %d written twice", len(recs), n, len(recs)-n)
	}
	return recs
}

// header returns the value of the header key of r, and whether r has it.
func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}
