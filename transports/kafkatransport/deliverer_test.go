package kafkatransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/transports/kafkatransport"
	"github.com/delayq/delayq/transports/wire"
)

const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// kafkaTopicConfig is a delayq topic that delivers to kafkaTopic.
func kafkaTopicConfig(name string) *core.Topic {
	return &core.Topic{Name: name, Concurrency: 256, MaxAttempts: 1000,
		Backoff:  core.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		Delivery: core.Delivery{Type: core.DeliveryKafka, KafkaTopic: kafkaTopic, Timeout: 2 * time.Second}}
}

// TestDeliverRecord delivers two jobs, with a key and a trace context and
// without, on one broker and on three, and reads their records: key,
// value and headers.
func TestDeliverRecord(t *testing.T) {
	t.Parallel()
	for _, brokers := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d brokers", brokers), func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, brokers, 3)
			b := setup(t, c, nil)
			ctx := context.Background()
			require.NoError(t, b.engine.PutTopic(ctx, kafkaTopicConfig("orders")))
			keyed, err := b.engine.Push(ctx, &core.PushParams{Topic: "orders", Body: json.RawMessage(`{"order": 7,  "due": true}`), Key: "order-7", TraceParent: traceParent})
			require.NoError(t, err)
			plain, err := b.engine.Push(ctx, &core.PushParams{Topic: "orders"})
			require.NoError(t, err)
			require.ElementsMatch(t, []string{keyed.ID, plain.ID}, b.store.Wait(t, storetest.OutcomeAck, 2, 10*time.Second))

			byID := map[string]*core.Job{keyed.ID: keyed, plain.ID: plain}
			for _, r := range consume(t, c, 2, 10*time.Second) {
				id, _ := header(r, kafkatransport.HeaderID)
				job := byID[id]
				require.NotNil(t, job, "record of job %q", id)
				delete(byID, id)
				topic, _ := header(r, kafkatransport.HeaderTopic)
				attempt, _ := header(r, kafkatransport.HeaderAttempt)
				runAt, _ := header(r, kafkatransport.HeaderRunAt)
				trace, hasTrace := header(r, kafkatransport.HeaderTraceParent)
				require.GreaterOrEqual(t, r.ProducerID, int64(0), "an idempotent producer's record (-1: not idempotent)")
				require.Equal(t, "orders", topic)
				require.Equal(t, "1", attempt)
				require.Equal(t, job.RunAt.UTC().Format(wire.TimeLayout), runAt)
				if job == keyed {
					require.Equal(t, "order-7", string(r.Key))
					require.Equal(t, `{"order": 7,  "due": true}`, string(r.Value), "the body as pushed, byte for byte")
					require.Equal(t, traceParent, trace)
				} else {
					require.Equal(t, plain.ID, string(r.Key), "no key: the id")
					require.Equal(t, "null", string(r.Value))
					require.False(t, hasTrace, "no traceparent header without a trace context")
				}
			}
			for id := range byID {
				got, err := b.engine.Get(ctx, id)
				require.NoError(t, err)
				require.Equal(t, core.StateDone, got.State)
			}
		})
	}
}

// TestBurstThroughOutages delivers bursts of due jobs while the cluster
// fails: one of three brokers stopped mid-burst and started again, and
// every broker refusing to produce for a while, which opens the cluster's
// breaker, shared by every kafka topic: a topic that had not failed yet is
// held by it too. Every job of both topics is delivered once the brokers
// are back, none lost, none dead.
func TestBurstThroughOutages(t *testing.T) {
	t.Parallel()
	const jobs = 2000
	t.Run("one of three brokers stopped", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, 3, 6)
		b := setup(t, c, nil)
		// Half the burst, then a broker leading a partition stops for the
		// other half, and starts again (on a new port, found through the
		// others) before its deliveries end.
		ids := pushBurst(t, b, "orders", jobs/2)
		b.store.Wait(t, storetest.OutcomeAck, jobs/4, 20*time.Second)
		leader := c.LeaderFor(kafkaTopic, 0)
		require.NoError(t, c.RemoveNode(leader))
		maps.Copy(ids, pushBurst(t, b, "orders", jobs/2))
		b.store.Wait(t, storetest.OutcomeAck, jobs/4, 20*time.Second)
		_, _, err := c.AddNode(leader, 0)
		require.NoError(t, err)
		requireAllDelivered(t, b, c, ids, jobs/2)
	})
	t.Run("every broker refusing", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, 1, 3)
		var breakers *breaker.Deliverer
		b := setup(t, c, func(d core.Deliverer) core.Deliverer {
			breakers = breaker.NewDeliverer(d, breaker.DelivererConfig{Config: breaker.Config{
				ConsecutiveFailures: 3, OpenTimeout: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
			}})
			return breakers
		})
		var down atomic.Bool
		var refused atomic.Int64
		down.Store(true)
		c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if !down.Load() {
				return nil, nil, false
			}
			refused.Add(1)
			return nil, errors.New("broker down"), true
		})
		topics := map[string]*core.Topic{}
		for _, name := range []string{"orders", "invoices"} {
			topics[name] = kafkaTopicConfig(name)
			topics[name].Delivery.Timeout = 200 * time.Millisecond
			require.NoError(t, b.engine.PutTopic(context.Background(), topics[name]))
		}
		cluster := "kafka:" + strings.Join(c.ListenAddrs(), ",")
		ids := pushBurst(t, b, "orders", jobs)
		require.Eventually(t, func() bool { return refused.Load() > 0 && breakers.State("", cluster) != breaker.StateClosed },
			10*time.Second, time.Millisecond, "the cluster's breaker opens while the brokers refuse")
		admits, _ := breakers.DeliveryAdmits(topics["invoices"])
		require.NotEqual(t, -1, admits, "a topic that has not failed yet is held by the cluster's breaker")
		maps.Copy(ids, pushBurst(t, b, "invoices", jobs/10))
		down.Store(false)
		requireAllDelivered(t, b, c, ids, jobs+jobs/10)
		require.Equal(t, breaker.StateClosed, breakers.State("", cluster))
		require.Len(t, breakers.States(), 1, "one circuit for the cluster")
	})
}

// pushBurst configures topic, unless configured, and pushes jobs due now
// to it in one batch; it returns their ids.
func pushBurst(t *testing.T, b *testBundle, topic string, jobs int) map[string]bool {
	t.Helper()
	ctx := context.Background()
	if _, err := b.engine.GetTopic(ctx, topic); err != nil {
		require.NoError(t, b.engine.PutTopic(ctx, kafkaTopicConfig(topic)))
	}
	ps := make([]*core.PushParams, jobs)
	for i := range ps {
		ps[i] = &core.PushParams{Topic: topic, Body: json.RawMessage(fmt.Sprint(i))}
	}
	res, err := b.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: ps})
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, r := range res {
		require.NoError(t, r.Err)
		ids[r.Job.ID] = true
	}
	require.Len(t, ids, jobs)
	return ids
}

// requireAllDelivered waits for acks more acks, then requires a record of
// every job of ids in Kafka and every job done, none dead.
func requireAllDelivered(t *testing.T, b *testBundle, c *kfake.Cluster, ids map[string]bool, acks int) {
	t.Helper()
	b.store.Wait(t, storetest.OutcomeAck, acks, 60*time.Second)
	seen := map[string]bool{}
	for _, r := range consume(t, c, len(ids), 30*time.Second) {
		id, _ := header(r, kafkatransport.HeaderID)
		require.True(t, ids[id], "record of an unknown job %q", id)
		seen[id] = true
	}
	require.Len(t, seen, len(ids), "a record of every job")
	for id := range ids {
		j, err := b.engine.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, core.StateDone, j.State, "job %s", id)
	}
}

func TestValidateTopic(t *testing.T) {
	t.Parallel()
	d, err := kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{Client: producer(t, newCluster(t, 1, 1))})
	require.NoError(t, err)
	require.NoError(t, d.ValidateTopic(kafkaTopicConfig("t")))
	for field, tp := range map[string]*core.Topic{
		"delivery.type":        {Name: "t", Delivery: core.Delivery{Type: core.DeliveryNATS, KafkaTopic: "k"}},
		"delivery.kafka_topic": {Name: "t", Delivery: core.Delivery{Type: core.DeliveryKafka, KafkaTopic: "a b"}},
	} {
		var fe *core.FieldError
		require.ErrorAs(t, d.ValidateTopic(tp), &fe, field)
		require.Equal(t, field, fe.Field)
	}
	// Not the server's intake topic: its records would come back as pushes.
	d, err = kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{Client: producer(t, newCluster(t, 1, 1)), Refused: []string{"delayq.push"}})
	require.NoError(t, err)
	var fe *core.FieldError
	loop := kafkaTopicConfig("t")
	loop.Delivery.KafkaTopic = "delayq.push"
	require.ErrorAs(t, d.ValidateTopic(loop), &fe)
	require.Equal(t, "delivery.kafka_topic", fe.Field)
	require.ErrorContains(t, fe, "intake topic")
}

func TestDelivererConfig(t *testing.T) {
	t.Parallel()
	_, err := kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{})
	require.ErrorContains(t, err, "Client is required")
	_, err = kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{Client: producer(t, newCluster(t, 1, 1)), Timeout: -time.Second})
	require.ErrorContains(t, err, "Timeout must be positive")
}

func TestDeliverNilParams(t *testing.T) {
	t.Parallel()
	d, err := kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{Client: producer(t, newCluster(t, 1, 1))})
	require.NoError(t, err)
	for _, p := range []*core.DeliverParams{nil, {}, {Topic: kafkaTopicConfig("t")}} {
		require.ErrorIs(t, d.Deliver(context.Background(), p), core.ErrInvalidArgument)
	}
}

// TestDeliverToMissingTopic delivers to a Kafka topic the cluster does
// not have: the attempt fails, and with no attempt left the job is dead,
// its last error saying why.
func TestDeliverToMissingTopic(t *testing.T) {
	t.Parallel()
	b := setup(t, newCluster(t, 1, 1), nil)
	ctx := context.Background()
	topic := kafkaTopicConfig("orders")
	topic.Delivery.KafkaTopic, topic.MaxAttempts = "no-such-topic", 1
	require.NoError(t, b.engine.PutTopic(ctx, topic))
	job, err := b.engine.Push(ctx, &core.PushParams{Topic: "orders"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		j, err := b.engine.Get(ctx, job.ID)
		return err == nil && j.State == core.StateDead
	}, 10*time.Second, 10*time.Millisecond)
	j, err := b.engine.Get(ctx, job.ID)
	require.NoError(t, err)
	require.Contains(t, j.LastError, "produce to no-such-topic: UNKNOWN_TOPIC_OR_PARTITION")
}

// TestDeliverErrorsCounted: a refusal of the record's Kafka topic is the
// delayq topic's fault, which no breaker of the cluster counts, while a
// cluster that does not answer is counted; the cluster is one endpoint of
// every topic.
func TestDeliverErrorsCounted(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, 1)
	d, err := kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{Client: producer(t, c)})
	require.NoError(t, err)
	var shared breaker.SharedEndpoint = d
	require.Equal(t, "kafka:"+strings.Join(c.ListenAddrs(), ","), shared.SharedEndpoint(kafkaTopicConfig("a")))
	require.Equal(t, shared.SharedEndpoint(kafkaTopicConfig("a")), shared.SharedEndpoint(kafkaTopicConfig("b")))
	missing := kafkaTopicConfig("orders")
	missing.Delivery.KafkaTopic = "no-such-topic"
	err = d.Deliver(context.Background(), &core.DeliverParams{Topic: missing, Job: &core.Job{ID: "a", Topic: "orders"}})
	require.ErrorContains(t, err, "UNKNOWN_TOPIC_OR_PARTITION")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.False(t, breaker.IsEndpointFailure(err))

	c.Close()
	down := kafkaTopicConfig("orders")
	down.Delivery.Timeout = 200 * time.Millisecond
	err = d.Deliver(context.Background(), &core.DeliverParams{Topic: down, Job: &core.Job{ID: "b", Topic: "orders"}})
	require.Error(t, err)
	require.NotErrorIs(t, err, core.ErrInvalidArgument)
	require.True(t, breaker.IsEndpointFailure(err))
}
