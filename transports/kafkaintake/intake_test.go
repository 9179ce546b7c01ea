package kafkaintake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/transports/kafkaclient"
	"github.com/delayq/delayq/transports/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// conflictStore counts the jobs its store refused as conflicts: the
// re-reads of records whose jobs are stored.
type conflictStore struct {
	core.Store
	conflicts atomic.Int64
}

func (s *conflictStore) PutJobs(ctx context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	res, err := s.Store.PutJobs(ctx, p)
	for _, r := range res {
		if errors.Is(r.Err, core.ErrConflict) {
			s.conflicts.Add(1)
		}
	}
	return res, err
}

// bundle is what a test drives: an in-process Kafka cluster with the topics
// "in" and "dead", an engine over memstore whose puts are signalled, and a
// producer.
type bundle struct {
	cluster  *kfake.Cluster
	store    *storetest.SignalStore
	counted  *conflictStore
	engine   *core.Engine
	producer *kgo.Client
	reader   *sdkmetric.ManualReader
	meters   *sdkmetric.MeterProvider
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupCluster(t, 1)
}

// setupCluster is setup with n brokers and n partitions of each topic.
func setupCluster(t *testing.T, n int) *bundle {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(n), kfake.SeedTopics(int32(n), "in", "dead"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	mem := memstore.New(memstore.Config{})
	counted := &conflictStore{Store: mem}
	store := &storetest.SignalStore{Store: counted, Outcomes: make(chan storetest.Outcome, 10_000), Kinds: []storetest.OutcomeKind{storetest.OutcomePut}}
	engine, err := core.NewEngine(core.EngineConfig{Store: store, Logger: slog.New(slog.DiscardHandler), TopicRefresh: time.Hour})
	require.NoError(t, err)
	producer, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	reader := sdkmetric.NewManualReader()
	b := &bundle{cluster: c, store: store, counted: counted, engine: engine, producer: producer, reader: reader,
		meters: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	t.Cleanup(func() {
		producer.Close()
		require.NoError(t, mem.Close())
	})
	return b
}

// start starts an intake of topic "in" in group "g", stopped at cleanup.
func (b *bundle) start(t *testing.T, mod func(*Intake)) *Intake {
	t.Helper()
	in, err := New(Config{
		Kafka:         kafkaclient.Config{Brokers: b.cluster.ListenAddrs()},
		Topic:         "in",
		Group:         "g",
		DeadTopic:     "dead",
		Engine:        b.engine,
		Logger:        slog.New(slog.DiscardHandler),
		MeterProvider: b.meters,
		RetryDelay:    10 * time.Millisecond,
		Opts:          []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	require.NoError(t, err)
	if mod != nil {
		mod(in)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, in.Start(ctx))
	t.Cleanup(func() { require.NoError(t, in.Stop(context.Background())) })
	return in
}

// produce writes a record of value with headers (name, value pairs) to
// topic "in" and returns it with its offset.
func (b *bundle) produce(t *testing.T, value string, headers ...string) *kgo.Record {
	t.Helper()
	rec := &kgo.Record{Topic: "in", Value: []byte(value)}
	for i := 0; i+1 < len(headers); i += 2 {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	require.NoError(t, b.producer.ProduceSync(t.Context(), rec).FirstErr())
	return rec
}

// marker produces a record of topic "marker" and waits until its job is
// stored: the records before it, in the one partition, are handled.
func (b *bundle) marker(t *testing.T) []string {
	t.Helper()
	rec := b.produce(t, `"marker"`, "Delayq-Topic", "marker")
	id := RecordID(rec.Topic, rec.Partition, rec.Offset)
	var ids []string
	for {
		got := b.store.Wait(t, storetest.OutcomePut, 1, 20*time.Second)
		if got[0] == id {
			return ids
		}
		ids = append(ids, got[0])
	}
}

// deadCount returns the dead records counted.
func (b *bundle) deadCount(t *testing.T) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, b.reader.Collect(t.Context(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == metricDead {
				var n int64
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					n += dp.Value
				}
				return n
			}
		}
	}
	return 0
}

// TestIntakeForms takes a record of each form: a push with every header, a
// push whose id is derived from the record, a cancel, and JSON jobs (with
// an id and without).
func TestIntakeForms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, nil)
	b.produce(t, `{"order":1}`, "Delayq-Topic", "orders", "delayq-id", "o-1", "Delayq-Delay", "1h", "Delayq-Key", "k1", "Delayq-Priority", "-5",
		"Delayq-Max-Attempts", "3", "Delayq-TTR", "45s", "Delayq-Backoff-Delays", "1m,2m", "Delayq-Expires-In", "2h",
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	runAt := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	derived := b.produce(t, `[2]`, "Delayq-Topic", "orders", "Delayq-Run-At", runAt.Format(time.RFC3339))
	b.produce(t, `{"order":3}`, "Delayq-Topic", "orders", "Delayq-Id", "o-3")
	b.produce(t, "", "Delayq-Cancel", "o-3")
	b.produce(t, `{"topic": "orders", "id": "o-4", "body": {"order": 4}, "delay": "1h", "key": "k4", "priority": 3, "max_attempts": 2,
		"ttr": "45s", "backoff": {"delays": ["1m"]}, "expires_in": "2h"}`,
		"Delayq-Format", "json", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	derivedJSON := b.produce(t, `{"topic": "orders", "body": [5]}`, "delayq-format", "JSON")
	stored := b.marker(t)
	derivedID := RecordID("in", derived.Partition, derived.Offset)
	derivedJSONID := RecordID("in", derivedJSON.Partition, derivedJSON.Offset)
	require.Equal(t, []string{"o-1", derivedID, "o-3", "o-4", derivedJSONID}, stored)
	require.NotContains(t, derivedID, ".")
	require.NoError(t, core.ValidateID(derivedID))
	require.False(t, core.IsDerivedID(derivedID))

	ctx := t.Context()
	j, err := b.engine.Get(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, "orders", j.Topic)
	require.JSONEq(t, `{"order":1}`, string(j.Body))
	require.Equal(t, "k1", j.Key)
	require.Equal(t, -5, j.Priority)
	require.Equal(t, 3, j.MaxAttempts)
	require.Equal(t, 45*time.Second, j.TTR)
	require.Equal(t, []time.Duration{time.Minute, 2 * time.Minute}, j.RetryDelays)
	require.Equal(t, 2*time.Hour, j.ExpiresAt.Sub(j.RunAt))
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", j.TraceParent)
	require.WithinDuration(t, time.Now().Add(time.Hour), j.RunAt, time.Minute)

	j, err = b.engine.Get(ctx, derivedID)
	require.NoError(t, err)
	require.Equal(t, "[2]", string(j.Body))
	require.Equal(t, runAt, j.RunAt.UTC())

	j, err = b.engine.Get(ctx, "o-3")
	require.NoError(t, err)
	require.Equal(t, core.StateCancelled, j.State)

	j, err = b.engine.Get(ctx, "o-4")
	require.NoError(t, err)
	require.Equal(t, "orders", j.Topic)
	require.JSONEq(t, `{"order":4}`, string(j.Body))
	require.Equal(t, "k4", j.Key)
	require.Equal(t, 3, j.Priority)
	require.Equal(t, 2, j.MaxAttempts)
	require.Equal(t, 45*time.Second, j.TTR)
	require.Equal(t, []time.Duration{time.Minute}, j.RetryDelays)
	require.Equal(t, 2*time.Hour, j.ExpiresAt.Sub(j.RunAt))
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", j.TraceParent, "the record's traceparent")
	require.WithinDuration(t, time.Now().Add(time.Hour), j.RunAt, time.Minute)

	j, err = b.engine.Get(ctx, derivedJSONID)
	require.NoError(t, err)
	require.Equal(t, "[5]", string(j.Body))
	require.Zero(t, b.deadCount(t))
}

// TestIntakePoisonRecord sends each bad record to the dead topic with the
// error and its headers, counts it, and takes the record after it.
func TestIntakePoisonRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.engine.Push(t.Context(), &core.PushParams{Topic: "orders", ID: "taken", Body: []byte(`{"other":true}`)})
	require.NoError(t, err)
	b.store.Wait(t, storetest.OutcomePut, 1, time.Second)
	b.start(t, nil)
	bad := [][]string{
		{"Delayq-Topic", "orders", "Delayq-Delay", "soon"},
		{"Delayq-Delay", "1s"},
		{"Delayq-Topic", "orders", "Delayq-Colour", "red"},
		{"Delayq-Topic", "bad topic"},
		{"Delayq-Cancel", "o-1", "Delayq-Delay", "1s"},
		{"Delayq-Topic", "orders", "Delayq-Id", "taken"}, // another job's id: not a re-read
		{"Delayq-Format", "json"},                        // not the JSON job of POST /v1/jobs
		{"Delayq-Format", "json", "Delayq-Topic", "orders"},
		{"Delayq-Format", "xml", "Delayq-Topic", "orders"},
	}
	for _, h := range bad {
		b.produce(t, `{"bad":true}`, h...)
	}
	good := b.produce(t, `{"good":true}`, "Delayq-Topic", "orders")
	require.Equal(t, []string{RecordID("in", good.Partition, good.Offset)}, b.marker(t))
	require.EqualValues(t, len(bad), b.deadCount(t))

	consumer, err := kgo.NewClient(kgo.SeedBrokers(b.cluster.ListenAddrs()...), kgo.ConsumeTopics("dead"))
	require.NoError(t, err)
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var dead []*kgo.Record
	for len(dead) < len(bad) {
		f := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		dead = append(dead, f.Records()...)
	}
	for i, rec := range dead {
		require.Equal(t, `{"bad":true}`, string(rec.Value))
		require.Equal(t, bad[i][0], rec.Headers[0].Key, "the record's own headers first")
		last := rec.Headers[len(rec.Headers)-1]
		require.Equal(t, HeaderError, last.Key)
		require.NotEmpty(t, last.Value)
	}
	require.Contains(t, string(dead[0].Headers[len(dead[0].Headers)-1].Value), "Delayq-Delay")
	require.Contains(t, string(dead[1].Headers[len(dead[1].Headers)-1].Value), HeaderTopic)
	require.Contains(t, string(dead[2].Headers[len(dead[2].Headers)-1].Value), "Delayq-Colour")
	require.Contains(t, string(dead[4].Headers[len(dead[4].Headers)-1].Value), HeaderCancel)
	require.Contains(t, string(dead[5].Headers[len(dead[5].Headers)-1].Value), "taken")
	require.Equal(t, `the record's JSON job: unknown field "bad"`, string(dead[6].Headers[len(dead[6].Headers)-1].Value))
	require.Equal(t, "a record with Delayq-Format carries no other delayq header (Delayq-Topic given)", string(dead[7].Headers[len(dead[7].Headers)-1].Value))
	require.Contains(t, string(dead[8].Headers[len(dead[8].Headers)-1].Value), "Delayq-Format must be json")
}

// TestIntakeCommitsAfterPush stops an intake between the push of a batch
// and its commit, as a crash there would: the next intake of the group
// reads the batch again, and its jobs, stored already, conflict and count
// as done. No job is stored twice, none is refused.
func TestIntakeCommitsAfterPush(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 50
	for i := range n {
		h := []string{"Delayq-Topic", "orders"}
		if i%2 == 0 {
			h = append(h, "Delayq-Id", fmt.Sprintf("given-%d", i))
		}
		body := fmt.Sprintf(`{"n":%d}`, i)
		if i%5 == 0 {
			body = "" // a null body
		}
		b.produce(t, body, h...)
	}
	crashed := make(chan struct{})
	first := b.start(t, func(in *Intake) {
		in.beforeCommit = func() bool { close(crashed); return false }
	})
	<-crashed
	require.NoError(t, first.Stop(context.Background()))
	stored := b.store.Wait(t, storetest.OutcomePut, n, 10*time.Second)
	require.Len(t, stored, n)

	b.start(t, nil)
	require.Empty(t, b.marker(t), "no job stored again")
	require.EqualValues(t, n, b.counted.conflicts.Load(), "every record read again")
	require.Zero(t, b.deadCount(t))
}

// TestIntakeBrokerStopped takes records from three brokers, one of which
// stops mid-burst: the partitions it led move to the others, and every
// record becomes one job, none refused.
func TestIntakeBrokerStopped(t *testing.T) {
	t.Parallel()
	b := setupCluster(t, 3)
	const n = 3000
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Value: fmt.Appendf(nil, `{"n":%d}`, i), Headers: []kgo.RecordHeader{{Key: HeaderTopic, Value: []byte("orders")}}}
	}
	require.NoError(t, b.producer.ProduceSync(t.Context(), recs...).FirstErr())
	b.start(t, nil)
	stored := map[string]bool{}
	for _, id := range b.store.Wait(t, storetest.OutcomePut, n/10, 20*time.Second) {
		stored[id] = true
	}
	leader := b.cluster.LeaderFor("in", 0)
	require.NoError(t, b.cluster.RemoveNode(leader))
	for _, id := range b.store.Wait(t, storetest.OutcomePut, n-n/10, 30*time.Second) {
		require.False(t, stored[id], "job %s stored twice", id)
		stored[id] = true
	}
	for _, rec := range recs {
		require.True(t, stored[RecordID(rec.Topic, rec.Partition, rec.Offset)])
	}
	require.Zero(t, b.deadCount(t))
}

// FuzzDecodeRecord checks that any record with a delayq topic and one more
// header is refused with a field error naming a header, or read as a push
// of that topic and value whose id is the given or derived one.
func FuzzDecodeRecord(f *testing.F) {
	for _, seed := range [][2]string{
		{"Delayq-Delay", "500ms"},
		{"delayq-id", "a-1"},
		{"Delayq-Key", "k"},
		{"Delayq-Cancel", "a-1"},
		{"Delayq-Topic", "again"},
		{"Delayq-Backoff-Delays", "1m,,2m"},
		{"Delayq-Other", "x"},
		{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	} {
		f.Add(seed[0], seed[1], []byte(`{"a":1}`))
	}
	mem := memstore.New(memstore.Config{})
	f.Cleanup(func() { _ = mem.Close() })
	engine, err := core.NewEngine(core.EngineConfig{Store: mem, Logger: slog.New(slog.DiscardHandler), TopicRefresh: time.Hour})
	require.NoError(f, err)
	in, err := New(Config{Kafka: kafkaclient.Config{Brokers: []string{"127.0.0.1:9"}}, Topic: "in", Engine: engine})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, key, value string, body []byte) {
		rec := &kgo.Record{Topic: "in", Partition: 2, Offset: 7, Value: body,
			Headers: []kgo.RecordHeader{{Key: HeaderTopic, Value: []byte("orders")}, {Key: key, Value: []byte(value)}}}
		p, cancelID, err := in.decode(rec)
		if err != nil {
			fe, ok := errors.AsType[*core.FieldError](err)
			require.True(t, ok, "%T", err)
			require.True(t, strings.EqualFold(key, fe.Field) || fe.Field == HeaderTopic || fe.Field == HeaderCancel, "the error names a header: %q for %q", fe.Field, key)
			return
		}
		require.Empty(t, cancelID, "a cancel carries no topic")
		require.Equal(t, "orders", p.Topic)
		require.Equal(t, string(body), string(p.Body))
		if strings.EqualFold(key, wire.HeaderID) {
			require.Equal(t, value, p.ID)
		} else {
			require.Equal(t, RecordID("in", 2, 7), p.ID)
		}
	})
}

// FuzzDecodeJSONRecord checks that a record in the JSON form is read as
// POST /v1/jobs reads its body (wire.DecodeJob): refused with a field
// error when that refuses it, else a push of the job it holds, with the
// given id or one derived from the record.
func FuzzDecodeJSONRecord(f *testing.F) {
	for _, seed := range []string{
		`{"topic": "orders", "body": {"a": 1}}`,
		`{"topic": "orders", "id": "a-1", "key": "k", "delay": "5m", "priority": -3}`,
		`{"topic": "orders", "run_at": "2030-01-01T00:00:00Z", "delay": "1s"}`,
		`{"topic": "orders", "bad": true}`,
		`{"topic": 7}`,
		`[1]`,
		``,
		`{"topic": "orders"} {}`,
	} {
		f.Add([]byte(seed))
	}
	mem := memstore.New(memstore.Config{})
	f.Cleanup(func() { _ = mem.Close() })
	engine, err := core.NewEngine(core.EngineConfig{Store: mem, Logger: slog.New(slog.DiscardHandler), TopicRefresh: time.Hour})
	require.NoError(f, err)
	in, err := New(Config{Kafka: kafkaclient.Config{Brokers: []string{"127.0.0.1:9"}}, Topic: "in", Engine: engine})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, value []byte) {
		rec := &kgo.Record{Topic: "in", Partition: 2, Offset: 7, Value: value, Headers: []kgo.RecordHeader{{Key: HeaderFormat, Value: []byte(FormatJSON)}}}
		p, cancelID, err := in.decode(rec)
		want, werr := wire.DecodeJob(value)
		if werr != nil {
			require.Error(t, err, "refused as POST /v1/jobs refuses it")
			_, ok := errors.AsType[*core.FieldError](err)
			require.True(t, ok, "%T", err)
			require.Equal(t, "the record's JSON job: "+wire.ToError(werr).Message, wire.ToError(err).Message)
			return
		}
		require.NoError(t, err)
		require.Empty(t, cancelID)
		require.Equal(t, want.Topic, p.Topic)
		require.Equal(t, string(want.Body), string(p.Body))
		require.Equal(t, want.Key, p.Key)
		require.Equal(t, want.Delay, p.Delay)
		require.Equal(t, want.RunAt, p.RunAt)
		if want.ID != "" {
			require.Equal(t, want.ID, p.ID)
		} else {
			require.Equal(t, RecordID("in", 2, 7), p.ID)
		}
	})
}
