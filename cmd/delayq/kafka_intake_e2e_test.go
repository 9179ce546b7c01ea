package main

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/delayq/delayq/transports/kafkaintake"
)

// TestE2EKafkaIntake runs the binary with Kafka intake from an in-process
// cluster of two partitions: the records become jobs claimed over HTTP, a
// poison record goes to the dead topic, and a kill -9 during intake loses
// no job and stores none twice (each job's id is its record's).
func TestE2EKafkaIntake(t *testing.T) {
	t.Parallel()
	const (
		total  = 3000
		poison = 10
		topic  = "e2e.kafka"
	)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "dead"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer producer.Close()
	recs := make([]*kgo.Record, 0, total+1)
	for n := range total + 1 {
		rec := &kgo.Record{Topic: "in", Value: fmt.Appendf(nil, `{"n":%d}`, n),
			Headers: []kgo.RecordHeader{{Key: "Delayq-Topic", Value: []byte(topic)}}}
		if n == poison {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: "Delayq-Delay", Value: []byte("soon")})
		}
		recs = append(recs, rec)
	}
	require.NoError(t, producer.ProduceSync(t.Context(), recs...).FirstErr())
	want := map[string]int{}
	for n, rec := range recs {
		if n != poison {
			want[kafkaintake.RecordID(rec.Topic, rec.Partition, rec.Offset)] = n
		}
	}
	require.Len(t, want, total)

	args := append(serveArgs(backendLocal, t.TempDir()), "--kafka-brokers", cluster.ListenAddrs()[0],
		"--kafka-intake-topic", "in", "--kafka-intake-dead-topic", "dead")
	srv := startServer(t, args...)
	start := time.Now() // after the build of the binary
	api := newCaller(t, srv.HTTPURL)
	// Kill once a tenth of the records are jobs: intake is under way.
	tenth := kafkaintake.RecordID(recs[total/10].Topic, recs[total/10].Partition, recs[total/10].Offset)
	for {
		status, _ := api.call(http.MethodGet, "/v1/jobs/"+tenth, nil)
		if status == http.StatusOK {
			break
		}
		require.Equal(t, http.StatusNotFound, status)
		require.Less(t, time.Since(start), 20*time.Second, "no job from Kafka")
		time.Sleep(time.Millisecond) // a poll: the API tells of no push
	}
	last := kafkaintake.RecordID(recs[total].Topic, recs[total].Partition, recs[total].Offset)
	lastStatus, _ := api.call(http.MethodGet, "/v1/jobs/"+last, nil)
	api.http.CloseIdleConnections()
	require.Equal(t, -1, srv.signal(syscall.SIGKILL, 10*time.Second))
	t.Logf("killed with the last record's job answering %d (404: intake under way)", lastStatus)

	srv = startServer(t, args...)
	api = newCaller(t, srv.HTTPURL)
	seen := map[string]bool{}
	for len(seen) < total {
		// The group gives the killed member's partitions to the new one
		// after kafkaintake.SessionTimeout.
		require.Less(t, time.Since(start), kafkaintake.SessionTimeout+30*time.Second, "claimed %d of %d", len(seen), total)
		got := api.claim(topic, 500, time.Second)
		for _, d := range got {
			n, ok := want[d.ID]
			require.True(t, ok, "a job not of a record: %s", d.ID)
			require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, n), string(d.Body))
			seen[d.ID] = true
		}
		for _, status := range api.ackAll(got) {
			require.Equal(t, http.StatusNoContent, status)
		}
	}
	require.Empty(t, api.claim(topic, 1, 0), "no job twice")

	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("dead"))
	require.NoError(t, err)
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	f := consumer.PollFetches(ctx)
	require.NoError(t, ctx.Err())
	for _, rec := range f.Records() {
		require.Equal(t, fmt.Sprintf(`{"n":%d}`, poison), string(rec.Value), "the poison record, once or, read again after the kill, twice")
		require.Equal(t, kafkaintake.HeaderError, rec.Headers[len(rec.Headers)-1].Key)
	}
	t.Logf("%d jobs from Kafka, through a kill -9, in %s", total, time.Since(start))
}
