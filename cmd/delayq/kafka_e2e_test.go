package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestE2EKafkaDelivery runs serve with --kafka-brokers on an in-process
// Kafka cluster: a kafka topic's jobs are produced as records that a
// franz-go consumer reads, with their ids and bodies; a bad kafka_topic is
// refused naming the field; brokers that do not answer fail a start.
func TestE2EKafkaDelivery(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders-due"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	srv := startServer(t, append(defaultArgs(t.TempDir()), "--kafka-brokers", strings.Join(cluster.ListenAddrs(), ","))...)
	api := newCaller(t, srv.HTTPURL)

	status, answer := api.call(http.MethodPut, "/v1/topics/e2e.kafka", map[string]any{"delivery": map[string]any{"type": "kafka", "kafka_topic": "orders due"}})
	require.Equal(t, http.StatusBadRequest, status, "%s", answer)
	require.Contains(t, string(answer), `"field":"delivery.kafka_topic"`)
	status, answer = api.call(http.MethodPut, "/v1/topics/e2e.kafka", map[string]any{"delivery": map[string]any{"type": "kafka", "kafka_topic": "orders-due", "timeout": "5s"}})
	require.Equal(t, http.StatusOK, status, "%s", answer)
	require.Contains(t, string(answer), `"kafka_topic":"orders-due"`)
	// The CLI sets it too, keeping the rest.
	code, out, stderr := cliOf(t, srv)("topic", "set", "e2e.kafka", "--kafka-topic", "orders-due", "--max-attempts", "4")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, `"kafka_topic":"orders-due"`)
	require.Contains(t, out, `"timeout":"5s"`, "kept")

	bodies := map[string]string{}
	for i := range 3 {
		var pushed struct {
			ID string `json:"id"`
		}
		body := fmt.Sprintf(`{"order": %d}`, i)
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.kafka", "body": map[string]any{"order": i}}, http.StatusCreated, &pushed)
		bodies[pushed.ID] = body
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("orders-due"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := map[string]string{}
	for len(got) < len(bodies) {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "records of %d jobs of %d", len(got), len(bodies))
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "delayq-id" {
					got[string(h.Value)] = string(r.Value)
				}
			}
		})
	}
	for id, body := range bodies {
		require.JSONEq(t, body, got[id], "job %s", id)
	}

	// Brokers that do not answer fail the start, after --backend-wait.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	code, _, stderr = runCLI(t, "serve", "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off",
		"--kafka-brokers", closed, "--backend-wait", "0")
	require.Equal(t, exitError, code, stderr)
	require.Contains(t, stderr, "delayq: kafka delivery (--kafka-brokers): unavailable: kafka brokers "+closed)
}
