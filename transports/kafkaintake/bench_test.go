package kafkaintake

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/natsserver"
	"github.com/delayq/delayq/transports/kafkaclient"
	"github.com/delayq/delayq/transports/natstransport"
)

// countStore signals done once n jobs are stored.
type countStore struct {
	core.Store
	n    int64
	put  atomic.Int64
	done chan struct{}
}

func (s *countStore) PutJobs(ctx context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	res, err := s.Store.PutJobs(ctx, p)
	if err == nil {
		ok := int64(0)
		for _, r := range res {
			if r.Err == nil {
				ok++
			}
		}
		if s.put.Add(ok) == s.n {
			close(s.done)
		}
	}
	return res, err
}

// benchEngine returns an engine over memstore, so that the transport is
// what the figure measures, and the store that says when n jobs are in.
func benchEngine(b *testing.B, n int) (*core.Engine, *countStore) {
	mem := memstore.New(memstore.Config{})
	b.Cleanup(func() { _ = mem.Close() })
	store := &countStore{Store: mem, n: int64(n), done: make(chan struct{})}
	engine, err := core.NewEngine(core.EngineConfig{Store: store, Logger: slog.New(slog.DiscardHandler), TopicRefresh: time.Hour})
	require.NoError(b, err)
	return engine, store
}

// BenchmarkIntake measures intake in jobs/s from Kafka (an in-process
// kfake cluster, 4 partitions, the records produced before the timer
// starts) and from NATS (delayq's embedded server, messages published
// without a reply while the intake runs), into the same in-memory store. kfake
// is not a broker's speed: the ratio is the figure.
//
//	go test -run '^$' -bench BenchmarkIntake -benchtime 100000x ./transports/kafkaintake
func BenchmarkIntake(b *testing.B) {
	body := []byte(`{"order":12345,"action":"close"}`)
	b.Run("kafka", func(b *testing.B) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "in"))
		require.NoError(b, err)
		defer c.Close()
		producer, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		require.NoError(b, err)
		defer producer.Close()
		recs := make([]*kgo.Record, b.N)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "in", Value: body, Headers: []kgo.RecordHeader{{Key: HeaderTopic, Value: []byte("bench")}}}
		}
		require.NoError(b, producer.ProduceSync(b.Context(), recs...).FirstErr())
		engine, store := benchEngine(b, b.N)
		in, err := New(Config{Kafka: kafkaclient.Config{Brokers: c.ListenAddrs()}, Topic: "in", Engine: engine, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(b, err)
		b.ResetTimer()
		start := time.Now()
		require.NoError(b, in.Start(b.Context()))
		<-store.done
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
		b.StopTimer()
		require.NoError(b, in.Stop(context.Background()))
	})
	b.Run("nats", func(b *testing.B) {
		srv, err := natsserver.Start(natsserver.Config{NoListen: true, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(b, err)
		defer srv.Shutdown()
		conn, err := srv.Connect()
		require.NoError(b, err)
		defer conn.Close()
		pub, err := srv.Connect()
		require.NoError(b, err)
		defer pub.Close()
		engine, store := benchEngine(b, b.N)
		in, err := natstransport.NewIntake(natstransport.IntakeConfig{Conn: conn, Engine: engine, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(b, err)
		require.NoError(b, in.Start(b.Context()))
		b.ResetTimer()
		start := time.Now()
		subject := in.PushSubject("bench")
		for range b.N {
			require.NoError(b, pub.PublishMsg(&nats.Msg{Subject: subject, Data: body}))
		}
		<-store.done
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
		b.StopTimer()
		require.NoError(b, in.Stop(context.Background()))
	})
}
