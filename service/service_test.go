package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testBundle is a service over the real engine and memstore, behind a
// store that can be made to fail, with tokens.
type testBundle struct {
	engine *core.Engine
	svc    *service.Service
	down   *downStore
	tokens *auth.Tokens
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	clock := coretest.NewFakeClock()
	store := memstore.New(memstore.Config{Clock: clock})
	down := &downStore{Store: store}
	engine, err := core.NewEngine(core.EngineConfig{Store: down, Clock: clock, Logger: slog.New(slog.DiscardHandler), Limits: core.Limits{MaxBatch: 4}})
	require.NoError(t, err)
	tokens, err := auth.NewTokens([]auth.Token{
		{Name: "admin", Token: "admin-secret-000000000000001", Scopes: []auth.Scope{auth.ScopeAdmin}},
		{Name: "pusher", Token: "push-secret-0000000000000001", Scopes: []auth.Scope{auth.ScopePush}, Topics: []string{"orders.*"}},
		{Name: "quota", Token: "quota-secret-000000000000001", Scopes: []auth.Scope{auth.ScopePush}, IntakeRate: 1.0 / 86400, IntakeBurst: 2},
	})
	require.NoError(t, err)
	tokens.NowFunc = clock.Now
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	return &testBundle{engine: engine, svc: service.New(service.Config{Engine: engine, Logger: slog.New(slog.DiscardHandler)}), down: down, tokens: tokens}
}

// as returns ctx carrying the identity of the token secret.
func (b *testBundle) as(t *testing.T, secret string) context.Context {
	t.Helper()
	id, ok := b.tokens.Authenticate(secret)
	require.True(t, ok)
	return service.WithIdentity(t.Context(), id)
}

// downStore fails writes of jobs while down is set.
type downStore struct {
	core.Store
	down atomic.Bool
}

func (d *downStore) PutJobs(ctx context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	if d.down.Load() {
		return nil, core.ErrUnavailable
	}
	return d.Store.PutJobs(ctx, p)
}

func push(topic string) *core.PushParams {
	return &core.PushParams{Topic: topic, Body: json.RawMessage("1")}
}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := service.IdentityFrom(b.as(t, "admin-secret-000000000000001"))
	pusher := service.IdentityFrom(b.as(t, "push-secret-0000000000000001"))
	for _, op := range service.Ops() {
		require.True(t, op.Known())
		require.NoError(t, b.svc.Authorize(nil, op), "%s without tokens", op)
		require.NoError(t, b.svc.Authorize(admin, op), "admin may do %s", op)
	}
	require.NoError(t, b.svc.Authorize(pusher, service.OpPush))
	require.NoError(t, b.svc.Authorize(pusher, service.OpHealth), "open")
	require.NoError(t, b.svc.Authorize(pusher, service.OpGetTopic), "any scope")
	err := b.svc.Authorize(pusher, service.OpAck)
	require.ErrorIs(t, err, wire.ErrPermissionDenied)
	require.EqualError(t, err, `token "pusher" lacks the consume scope for Ack`)
	err = b.svc.Authorize(pusher, service.Op("NoSuchOp"))
	require.EqualError(t, err, `token "pusher" lacks the admin scope for NoSuchOp`, "an op not in the table needs admin")
}

func TestAllowTopicAndJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.as(t, "push-secret-0000000000000001")
	require.NoError(t, b.svc.AllowTopic(ctx, "orders.eu"))
	require.EqualError(t, b.svc.AllowTopic(ctx, "billing"), `token "pusher" may not use topic "billing"`)
	res, err := b.svc.Push(t.Context(), push("billing"))
	require.NoError(t, err)
	err = b.svc.AllowJob(ctx, res.Job.ID)
	require.ErrorIs(t, err, wire.ErrPermissionDenied)
	require.NotContains(t, err.Error(), "billing", "the refusal names the job, not its topic")
	require.NoError(t, b.svc.AllowJob(ctx, "no-such-job"), "an unknown job is left to the operation")
	_, err = b.svc.Get(ctx, res.Job.ID)
	require.ErrorIs(t, err, wire.ErrPermissionDenied)
	_, err = b.svc.Get(ctx, "no-such-job")
	require.EqualError(t, err, `job "no-such-job" not found`)
}

// TestAllowKafkaDelivery checks that a token restricted to some topics
// may name as delivery.kafka_topic only a Kafka topic that a pattern of
// Config.KafkaDeliveryTopics matches, and that other tokens may name any.
func TestAllowKafkaDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	kafka := func(name string) *core.Topic {
		return &core.Topic{Name: "orders.eu", Delivery: core.Delivery{Type: core.DeliveryKafka, KafkaTopic: name}}
	}
	pusher, admin := b.as(t, "push-secret-0000000000000001"), b.as(t, "admin-secret-000000000000001")
	none := b.svc
	allowing := service.New(service.Config{Engine: b.engine, Logger: slog.New(slog.DiscardHandler), KafkaDeliveryTopics: []string{"billing.>", "orders-due"}})

	err := none.AllowDelivery(pusher, kafka("orders-due"))
	require.ErrorIs(t, err, wire.ErrPermissionDenied, "no pattern: no Kafka topic")
	require.EqualError(t, err, `token "pusher" may name as delivery.kafka_topic only a Kafka topic the server allows (--kafka-delivery-topics)`)
	require.NoError(t, none.AllowDelivery(admin, kafka("orders-due")), "a token for every topic")
	require.NoError(t, none.AllowDelivery(t.Context(), kafka("orders-due")), "no tokens")
	for name, ok := range map[string]bool{"orders-due": true, "billing.eu": true, "billing.eu.late": true, "billing": false, "orders-due-2": false, "audit": false} {
		if ok {
			require.NoError(t, allowing.AllowDelivery(pusher, kafka(name)), name)
		} else {
			require.ErrorIs(t, allowing.AllowDelivery(pusher, kafka(name)), wire.ErrPermissionDenied, name)
		}
	}
}

func TestPushBatchBoundsAndQuota(t *testing.T) {
	t.Parallel()
	b := setup(t)
	item := func(int) (*core.PushParams, error) { return push("t"), nil }
	_, err := b.svc.PushBatch(t.Context(), 0, item)
	require.EqualError(t, err, "jobs must hold at least one job")
	_, err = b.svc.PushBatch(t.Context(), 5, item)
	require.ErrorIs(t, err, core.ErrTooLarge)

	ctx := b.as(t, "quota-secret-000000000000001")
	_, err = b.svc.PushBatch(ctx, 3, item)
	require.ErrorIs(t, err, core.ErrTooLarge, "more than the burst")
	rs, err := b.svc.PushBatch(ctx, 2, item)
	require.NoError(t, err)
	require.Len(t, rs, 2)
	_, err = b.svc.Push(ctx, push("t"))
	var rl *wire.RateLimitError
	require.ErrorAs(t, err, &rl, "the quota is spent")
	require.Positive(t, rl.RetryAfter)
}

func TestPushBatchFailsWholeWhenEveryItemFailedServerSide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.down.down.Store(true)
	_, err := b.svc.PushBatch(t.Context(), 2, func(int) (*core.PushParams, error) { return push("t"), nil })
	require.ErrorIs(t, err, core.ErrUnavailable)

	// One item fails on its own: the others' server-side errors are
	// answered per item.
	bad := core.Invalid("body", "bad")
	rs, err := b.svc.PushBatch(t.Context(), 2, func(i int) (*core.PushParams, error) {
		if i == 0 {
			return nil, bad
		}
		return push("t"), nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, rs[0].Err, bad)
	require.ErrorIs(t, rs[1].Err, core.ErrUnavailable)
}

func TestAckBatchChecksEachItem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.svc.Push(t.Context(), push("billing"))
	require.NoError(t, err)
	ctx := b.as(t, "push-secret-0000000000000001")
	errs, err := b.svc.AckBatch(ctx, 2, func(i int) (core.AckJobParams, error) {
		if i == 0 {
			return core.AckJobParams{ID: res.Job.ID, Lease: "l"}, nil
		}
		return core.AckJobParams{ID: "no-such-job", Lease: "l"}, nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], wire.ErrPermissionDenied)
	require.EqualError(t, errs[1], `job "no-such-job" not found`)
	_, err = b.svc.AckBatch(ctx, 0, nil)
	require.EqualError(t, err, "acks must hold at least one item")
	require.True(t, errors.Is(b.svc.CheckBatch("nacks", 5), core.ErrTooLarge))
}

// TestLeaseLostSaysWhy checks that a lost lease is explained from the job:
// unknown on a job never delivered, handed out again, or how the last
// delivery ended.
func TestLeaseLostSaysWhy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	res, err := b.svc.Push(ctx, push("mail"))
	require.NoError(t, err)
	id := res.Job.ID
	err = b.svc.Ack(ctx, &core.AckJobParams{ID: id, Lease: "never-given"})
	require.ErrorIs(t, err, core.ErrLeaseLost)
	require.EqualError(t, err, `the lease is unknown: job "`+id+`" was never delivered (it is ready)`)

	jobs, err := b.svc.Claim(ctx, &core.ClaimJobsParams{Topic: "mail", Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	err = b.svc.Ack(ctx, &core.AckJobParams{ID: id, Lease: "never-given"})
	require.EqualError(t, err, `the lease of job "`+id+`" is lost: the job was handed out again (attempt 1), after this delivery expired, or the lease is unknown`)
	require.NoError(t, b.svc.Ack(ctx, &core.AckJobParams{ID: id, Lease: jobs[0].Lease}))
	err = b.svc.Ack(ctx, &core.AckJobParams{ID: id, Lease: jobs[0].Lease})
	require.ErrorIs(t, err, core.ErrLeaseLost)
	require.EqualError(t, err, `the lease of job "`+id+`" is lost: the job is done; its last delivery (attempt 1) was acked`)
	_, err = b.svc.Touch(ctx, &core.TouchJobParams{ID: id, Lease: jobs[0].Lease})
	require.EqualError(t, err, `the lease of job "`+id+`" is lost: the job is done; its last delivery (attempt 1) was acked`)
}

// TestKeyConflictNamesTheKey checks that a conflict over a unique_keys
// job names its key and topic, not only the id delayq derived.
func TestKeyConflictNamesTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, err := b.svc.PutTopic(ctx, &core.Topic{Name: "orders", UniqueKeys: core.UniqueKeysReject})
	require.NoError(t, err)
	p := push("orders")
	p.Key = "order-7"
	_, err = b.svc.Push(ctx, p)
	require.NoError(t, err)
	p = push("orders")
	p.Key = "order-7"
	_, err = b.svc.Push(ctx, p)
	require.ErrorIs(t, err, core.ErrConflict)
	require.EqualError(t, err, `the job of key "order-7" in topic "orders" (id "`+core.KeyID("orders", "order-7")+`") already exists`)
}

// TestScheduleRuns lists a schedule's last slots up to its cursor, newest
// first, with the jobs they made as they are now: none for a slot passed
// over, and none before the schedule's creation.
func TestScheduleRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	created := b.engine.Clock().Now().Add(-time.Hour).Truncate(time.Hour)
	slot := func(m int) time.Time { return created.Add(time.Duration(m) * time.Minute) }
	_, err := b.engine.ImportSchedule(ctx, &core.Schedule{Name: "tick", Cron: "*/10 * * * *", Topic: "ticks",
		CreatedAt: created, UpdatedAt: created, Cursor: slot(40)})
	require.NoError(t, err)
	// The slots of 20 and 40 made a job; 30's was passed over. 50 is to come.
	for _, m := range []int{20, 40} {
		// Put as the scheduler puts a slot's job.
		res, err := b.down.PutJobs(ctx, &core.PutJobsParams{IfAbsent: true, Jobs: []*core.Job{{ID: core.ScheduleID("tick", slot(m)), Topic: "ticks",
			Body: json.RawMessage("1"), State: core.StateScheduled, RunAt: slot(m).Add(2 * time.Hour), CreatedAt: slot(m), UpdatedAt: slot(m),
			MaxAttempts: 3, TTR: time.Minute}}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	require.NoError(t, b.engine.Cancel(ctx, &core.CancelJobParams{ID: core.ScheduleID("tick", slot(20))}))
	sc, err := b.svc.GetSchedule(ctx, "tick")
	require.NoError(t, err)

	runs, err := b.svc.ScheduleRuns(ctx, sc, 3)
	require.NoError(t, err)
	require.Len(t, runs, 3)
	for i, m := range []int{40, 30, 20} {
		require.True(t, runs[i].Slot.Equal(slot(m)), "run %d: slot %s, want %s", i, runs[i].Slot, slot(m))
		require.Equal(t, core.ScheduleID("tick", slot(m)), runs[i].JobID)
	}
	require.Equal(t, core.StateScheduled, runs[0].Job.State)
	require.Nil(t, runs[1].Job, "a slot passed over made no job")
	require.Equal(t, core.StateCancelled, runs[2].Job.State, "the job as it is now")

	// More runs asked than slots since the creation: those four.
	runs, err = b.svc.ScheduleRuns(ctx, sc, 100)
	require.NoError(t, err)
	require.Len(t, runs, 4)
	require.True(t, runs[3].Slot.Equal(slot(10)))

	runs, err = b.svc.ScheduleRuns(ctx, sc, 0)
	require.NoError(t, err)
	require.Empty(t, runs)
	_, err = b.svc.ScheduleRuns(ctx, sc, service.ScheduleRunsMax+1)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	var fe *core.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "runs", fe.Field)
}
