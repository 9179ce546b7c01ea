package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

type testBundle struct {
	clock  *coretest.FakeClock
	store  *memstore.Store
	engine *core.Engine
}

func setup(t *testing.T, deliverers map[string]core.Deliverer) *testBundle {
	t.Helper()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = store.Close() })
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock, Deliverers: deliverers,
		Limits: core.Limits{MaxBodyBytes: 64, MaxDelay: 24 * time.Hour}})
	require.NoError(t, err)
	return &testBundle{clock: clock, store: store, engine: e}
}

func dur(d time.Duration) *time.Duration { return &d }

func TestPushValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	past := b.clock.Now().Add(-time.Hour)
	far := b.clock.Now().Add(48 * time.Hour)
	ancient := time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC) // before any store's time range
	cases := []struct {
		field string
		p     core.PushParams
		is    error
	}{
		{"topic", core.PushParams{Topic: "a..b"}, core.ErrInvalidArgument},
		{"id", core.PushParams{Topic: "t", ID: "a.b"}, core.ErrInvalidArgument},
		{"key", core.PushParams{Topic: "t", Key: "a\nb"}, core.ErrInvalidArgument},
		{"body", core.PushParams{Topic: "t", Body: json.RawMessage(`{"x":`)}, core.ErrInvalidArgument},
		{"body", core.PushParams{Topic: "t", Body: json.RawMessage(`"` + strings.Repeat("x", 64) + `"`)}, core.ErrTooLarge},
		{"delay", core.PushParams{Topic: "t", Delay: dur(-time.Second)}, core.ErrInvalidArgument},
		{"delay", core.PushParams{Topic: "t", Delay: dur(25 * time.Hour)}, core.ErrInvalidArgument},
		{"delay", core.PushParams{Topic: "t", Delay: dur(time.Second), RunAt: &past}, core.ErrInvalidArgument},
		{"run_at", core.PushParams{Topic: "t", RunAt: &far}, core.ErrInvalidArgument},
		{"run_at", core.PushParams{Topic: "t", RunAt: &ancient}, core.ErrInvalidArgument},
		{"body", core.PushParams{Topic: "t", Body: json.RawMessage("\"\xff\xfe\"")}, core.ErrInvalidArgument},
		{"key", core.PushParams{Topic: "t", Key: "k\xff"}, core.ErrInvalidArgument},
		{"ttr", core.PushParams{Topic: "t", TTR: time.Millisecond}, core.ErrInvalidArgument},
		{"max_attempts", core.PushParams{Topic: "t", MaxAttempts: core.MaxAttemptsMax + 1}, core.ErrInvalidArgument},
	}
	for _, c := range cases {
		_, err := b.engine.Push(ctx, &c.p)
		require.ErrorIs(t, err, c.is, c.field)
		var fe *core.FieldError
		require.True(t, errors.As(err, &fe), c.field)
		require.Equal(t, c.field, fe.Field)
	}
	topics, err := b.engine.ListTopics(ctx)
	require.NoError(t, err)
	require.Empty(t, topics, "bad input changes nothing")

	// run_at in the past is due now; no delay and no run_at means now.
	j, err := b.engine.Push(ctx, &core.PushParams{Topic: "t", RunAt: &past})
	require.NoError(t, err)
	require.Equal(t, core.StateReady, j.State)
	require.Equal(t, past.UTC(), j.RunAt)
	j, err = b.engine.Push(ctx, &core.PushParams{Topic: "t", Delay: dur(1500 * time.Millisecond), Body: json.RawMessage(` {"a": 1}`)})
	require.NoError(t, err)
	require.Equal(t, core.StateScheduled, j.State)
	require.Equal(t, b.clock.Now().Add(1500*time.Millisecond).UTC(), j.RunAt)
	require.Equal(t, ` {"a": 1}`, string(j.Body), "body kept byte for byte")
	require.Len(t, j.ID, 26)
}

func TestPushTakesTopicDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	require.NoError(t, b.engine.PutTopic(ctx, &core.Topic{Name: "t", TTR: time.Minute, MaxAttempts: 3, Retention: time.Hour}))
	j, err := b.engine.Push(ctx, &core.PushParams{Topic: "t"})
	require.NoError(t, err)
	require.Equal(t, time.Minute, j.TTR)
	require.Equal(t, 3, j.MaxAttempts)
	require.Equal(t, time.Hour, j.Retention, "the topic's retention goes with the job")
	got, err := b.engine.Get(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, time.Hour, got.Retention)
	j, err = b.engine.Push(ctx, &core.PushParams{Topic: "t", TTR: 5 * time.Second, MaxAttempts: 7})
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, j.TTR, "the job's own value wins")
	require.Equal(t, 7, j.MaxAttempts)
	j, err = b.engine.Push(ctx, &core.PushParams{Topic: "other"})
	require.NoError(t, err)
	require.Equal(t, core.TTRDefault, j.TTR)
	require.Equal(t, core.MaxAttemptsDefault, j.MaxAttempts)
	require.Zero(t, j.Retention, "the store's retention")
}

// TestReleaseGivesAttemptBack: a delivery released unsent (a claim whose
// client left) is due again at once with its attempt given back, so that a
// job on its last attempt is delivered again rather than dead.
func TestReleaseGivesAttemptBack(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	require.NoError(t, b.engine.PutTopic(ctx, &core.Topic{Name: "t", MaxAttempts: 1}))
	_, err := b.engine.Push(ctx, &core.PushParams{Topic: "t", ID: "j1"})
	require.NoError(t, err)
	jobs, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.ErrorIs(t, b.engine.Release(ctx, &core.ReleaseParams{ID: "j1", Lease: "wrong"}), core.ErrLeaseLost)
	require.NoError(t, b.engine.Release(ctx, &core.ReleaseParams{ID: "j1", Lease: jobs[0].Lease, Error: "claim abandoned"}))
	j, err := b.engine.Get(ctx, "j1")
	require.NoError(t, err)
	require.Equal(t, core.StateReady, j.State)
	require.Equal(t, 0, j.Attempt)
	require.Equal(t, "claim abandoned", j.LastError)
	jobs, err = b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "delivered again, not dead")
	require.Equal(t, 1, jobs[0].Attempt)
}

func TestNackBacksOffThenBuries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	require.NoError(t, b.engine.PutTopic(ctx, &core.Topic{Name: "t", MaxAttempts: 2,
		Backoff: core.Backoff{Initial: 10 * time.Second, Factor: 3, Jitter: -1}}))
	_, err := b.engine.Push(ctx, &core.PushParams{Topic: "t", ID: "j1"})
	require.NoError(t, err)

	jobs, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.ErrorIs(t, b.engine.Nack(ctx, &core.NackParams{ID: "j1", Lease: "wrong"}), core.ErrLeaseLost)
	require.NoError(t, b.engine.Nack(ctx, &core.NackParams{ID: "j1", Lease: jobs[0].Lease, Error: "boom"}))
	j, err := b.engine.Get(ctx, "j1")
	require.NoError(t, err)
	require.Equal(t, core.StateScheduled, j.State)
	require.Equal(t, "boom", j.LastError)
	require.Equal(t, b.clock.Now().Add(10*time.Second).UTC(), j.RunAt, "the topic's backoff for attempt 1")

	b.clock.Advance(10 * time.Second)
	jobs, err = b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, 2, jobs[0].Attempt)
	require.NoError(t, b.engine.Nack(ctx, &core.NackParams{ID: "j1", Lease: jobs[0].Lease, Error: "again"}))
	j, err = b.engine.Get(ctx, "j1")
	require.NoError(t, err)
	require.Equal(t, core.StateDead, j.State, "attempts used up")
	require.Equal(t, "again", j.LastError)

	dead, err := b.engine.ListDead(ctx, &core.ListDeadJobsParams{Topic: "t", Limit: 10})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.NoError(t, b.engine.Requeue(ctx, "j1"))
	jobs, err = b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, 1, jobs[0].Attempt, "requeue gives a fresh attempt count")
	// An explicit delay overrides the backoff.
	require.NoError(t, b.engine.Nack(ctx, &core.NackParams{ID: "j1", Lease: jobs[0].Lease, Delay: dur(time.Minute)}))
	j, err = b.engine.Get(ctx, "j1")
	require.NoError(t, err)
	require.Equal(t, b.clock.Now().Add(time.Minute).UTC(), j.RunAt)
}

func TestClaimValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for _, c := range []struct {
		topic string
		max   int
		wait  time.Duration
		field string
	}{
		{"a b", 1, 0, "topic"}, {"t", 0, 0, "max"}, {"t", core.ClaimMaxLimit + 1, 0, "max"},
		{"t", 1, -time.Second, "wait"}, {"t", 1, core.ClaimWaitLimit + time.Second, "wait"},
	} {
		_, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: c.topic, Max: c.max, Wait: c.wait})
		var fe *core.FieldError
		require.True(t, errors.As(err, &fe), c.field)
		require.Equal(t, c.field, fe.Field)
	}
}

func TestListDeadValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for _, c := range []struct {
		p     core.ListDeadJobsParams
		field string
	}{
		{core.ListDeadJobsParams{Topic: "a b", Limit: 1}, "topic"},
		{core.ListDeadJobsParams{Topic: "t"}, "limit"},
		{core.ListDeadJobsParams{Topic: "t", Limit: core.DeadLimitMax + 1}, "limit"},
	} {
		_, err := b.engine.ListDead(ctx, &c.p)
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe, c.field)
		require.Equal(t, c.field, fe.Field)
	}
}

// TestAckAndTouch checks that Ack and Touch take the store's params: a
// touch extends the lease it names, an ack of the lease settles the job, and
// a wrong or missing lease is refused.
func TestAckAndTouch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	_, err := b.engine.Push(ctx, &core.PushParams{Topic: "t", ID: "j1", TTR: 10 * time.Second})
	require.NoError(t, err)
	jobs, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	lease := jobs[0].Lease

	var fe *core.FieldError
	require.ErrorAs(t, b.engine.Ack(ctx, &core.AckJobParams{ID: "j1"}), &fe)
	require.Equal(t, "lease", fe.Field)
	_, err = b.engine.Touch(ctx, &core.TouchJobParams{ID: "j1", Lease: "wrong"})
	require.ErrorIs(t, err, core.ErrLeaseLost)

	b.clock.Advance(5 * time.Second)
	j, err := b.engine.Touch(ctx, &core.TouchJobParams{ID: "j1", Lease: lease})
	require.NoError(t, err)
	require.Equal(t, b.clock.Now().Add(10*time.Second).UTC(), j.LeaseExpiresAt.UTC())
	require.Equal(t, lease, j.Lease, "a touch keeps the lease token")

	require.NoError(t, b.engine.Ack(ctx, &core.AckJobParams{ID: "j1", Lease: lease}))
	j, err = b.engine.Get(ctx, "j1")
	require.NoError(t, err)
	require.Equal(t, core.StateDone, j.State)
	require.ErrorIs(t, b.engine.Ack(ctx, &core.AckJobParams{ID: "j1", Lease: lease}), core.ErrLeaseLost)
}

// TestAckBatch checks that a batch of acks gives one error per ack in
// order, a malformed id or a missing lease failing alone without reaching
// the store, and that a closed store fails every ack it was sent.
func TestAckBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		_, err := b.engine.Push(ctx, &core.PushParams{Topic: "t", ID: id})
		require.NoError(t, err)
	}
	jobs, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 2)

	errs, err := b.engine.AckBatch(ctx, &core.AckJobsParams{Acks: []core.AckJobParams{
		{ID: jobs[0].ID, Lease: jobs[0].Lease},
		{ID: "not an id", Lease: "x"},
		{ID: jobs[1].ID},
		{ID: jobs[1].ID, Lease: "wrong"},
	}})
	require.NoError(t, err)
	require.Len(t, errs, 4)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], core.ErrNotFound, "a malformed id names no job")
	var fe *core.FieldError
	require.ErrorAs(t, errs[2], &fe)
	require.Equal(t, "lease", fe.Field)
	require.ErrorIs(t, errs[3], core.ErrLeaseLost)
	j, err := b.engine.Get(ctx, jobs[0].ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDone, j.State)
	j, err = b.engine.Get(ctx, jobs[1].ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, j.State, "failed acks change nothing")

	require.NoError(t, b.store.Close())
	errs, err = b.engine.AckBatch(ctx, &core.AckJobsParams{Acks: []core.AckJobParams{{ID: "x", Lease: "y"}, {ID: "z"}}})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], core.ErrClosed, "the store's failure is the error of each ack sent to it")
	require.ErrorAs(t, errs[1], &fe, "an invalid ack keeps its own error")
}

// TestPushBatch checks that a batch gives one result per job in order, a
// bad or nil job failing alone, and that Replace is the named field that
// selects replace over create.
func TestPushBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	rs, err := b.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{
		{Topic: "t", ID: "a"}, {Topic: "a..b"}, nil, {Topic: "t", ID: "b"},
	}})
	require.NoError(t, err)
	require.Len(t, rs, 4)
	require.NoError(t, rs[0].Err)
	require.Equal(t, "a", rs[0].Job.ID)
	require.ErrorIs(t, rs[1].Err, core.ErrInvalidArgument)
	require.ErrorIs(t, rs[2].Err, core.ErrInvalidArgument)
	require.Nil(t, rs[2].Job)
	require.NoError(t, rs[3].Err)

	// Without Replace an id in use conflicts; with it, the job is replaced.
	rs, err = b.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{{Topic: "t", ID: "a"}}})
	require.NoError(t, err)
	require.ErrorIs(t, rs[0].Err, core.ErrConflict)
	rs, err = b.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{{Topic: "t", ID: "a", Delay: dur(time.Minute)}}, Replace: true})
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.True(t, rs[0].Replaced)
	require.Equal(t, b.clock.Now().Add(time.Minute).UTC(), rs[0].Job.RunAt)

	rs, err = b.engine.PushBatch(ctx, &core.PushBatchParams{})
	require.NoError(t, err)
	require.Empty(t, rs, "an empty batch has no results")
}

// TestNilParams checks that every engine call given nil params answers
// ErrInvalidArgument, as the stores do, rather than panicking.
func TestNilParams(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	calls := map[string]func() error{
		"Push": func() error { _, err := b.engine.Push(ctx, nil); return err },
		"Replace": func() error {
			_, _, err := b.engine.Replace(ctx, nil)
			return err
		},
		"PushBatch": func() error {
			rs, err := b.engine.PushBatch(ctx, nil)
			require.Nil(t, rs)
			return err
		},
		"Claim": func() error { _, err := b.engine.Claim(ctx, nil); return err },
		"Ack":   func() error { return b.engine.Ack(ctx, nil) },
		"AckBatch": func() error {
			errs, err := b.engine.AckBatch(ctx, nil)
			require.Nil(t, errs)
			return err
		},
		"Nack":     func() error { return b.engine.Nack(ctx, nil) },
		"Touch":    func() error { _, err := b.engine.Touch(ctx, nil); return err },
		"ListDead": func() error { _, err := b.engine.ListDead(ctx, nil); return err },
		"PutTopic": func() error { return b.engine.PutTopic(ctx, nil) },
	}
	for name, call := range calls {
		var err error
		require.NotPanics(t, func() { err = call() }, name)
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe, name)
		require.ErrorIs(t, err, core.ErrInvalidArgument, name)
		require.Contains(t, fe.Message, "no params", name)
	}
}

// fakeDeliverer records deliveries and answers with the errors queued in fail.
type fakeDeliverer struct {
	mu       sync.Mutex
	fail     []error
	got      chan *core.Job
	block    chan struct{} // when set, Deliver waits on it or ctx
	rejected string
}

func (f *fakeDeliverer) ValidateTopic(t *core.Topic) error {
	if t.Delivery.URL == f.rejected {
		return core.Invalid("delivery.url", "rejected")
	}
	return nil
}

func (f *fakeDeliverer) Deliver(ctx context.Context, p *core.DeliverParams) error {
	f.got <- p.Job
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.fail) == 0 {
		return nil
	}
	err := f.fail[0]
	f.fail = f.fail[1:]
	return err
}

func waitState(t *testing.T, e *core.Engine, id string, want core.State) *core.Job {
	t.Helper()
	var j *core.Job
	require.Eventually(t, func() bool {
		var err error
		j, err = e.Get(context.Background(), id)
		return err == nil && j.State == want
	}, 10*time.Second, 5*time.Millisecond, "job %s never reached %s", id, want)
	return j
}

func realEngine(t *testing.T, d core.Deliverer) *core.Engine {
	t.Helper()
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = store.Close() })
	e, err := core.NewEngine(core.EngineConfig{Store: store, TopicRefresh: 50 * time.Millisecond,
		Deliverers: map[string]core.Deliverer{core.DeliveryWebhook: d}})
	require.NoError(t, err)
	return e
}

func TestDispatchRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	d := &fakeDeliverer{got: make(chan *core.Job, 10), fail: []error{errors.New("503"), errors.New("timeout")}, rejected: "bad"}
	e := realEngine(t, d)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(ctx) })

	err := e.PutTopic(ctx, &core.Topic{Name: "hook", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "bad"}})
	require.ErrorIs(t, err, core.ErrInvalidArgument, "the deliverer validates the topic")
	err = e.PutTopic(ctx, &core.Topic{Name: "hook", Delivery: core.Delivery{Type: core.DeliveryNATS}})
	require.ErrorIs(t, err, core.ErrInvalidArgument, "no deliverer for nats here")

	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "hook", MaxAttempts: 5,
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"},
		Backoff:  core.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}))
	j, err := e.Push(ctx, &core.PushParams{Topic: "hook"})
	require.NoError(t, err)
	for want := 1; want <= 3; want++ {
		got := <-d.got
		require.Equal(t, j.ID, got.ID)
		require.Equal(t, want, got.Attempt)
	}
	done := waitState(t, e, j.ID, core.StateDone)
	require.Equal(t, "timeout", done.LastError)
	require.Len(t, done.History, 3)
	for k, outcome := range []string{core.OutcomeRetried, core.OutcomeRetried, core.OutcomeAcked} {
		require.Equal(t, core.ViaWebhook, done.History[k].Via, "a dispatch claims via its delivery type")
		require.Equal(t, outcome, done.History[k].Outcome)
	}
	require.Equal(t, "503", done.History[0].Error)
}

func TestDispatchBuriesAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	d := &fakeDeliverer{got: make(chan *core.Job, 10), fail: []error{errors.New("a"), errors.New("b"), errors.New("c")}}
	e := realEngine(t, d)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(ctx) })
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "hook", MaxAttempts: 2,
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"},
		Backoff:  core.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}))
	j, err := e.Push(ctx, &core.PushParams{Topic: "hook"})
	require.NoError(t, err)
	dead := waitState(t, e, j.ID, core.StateDead)
	require.Equal(t, "b", dead.LastError)
	require.Equal(t, 2, dead.Attempt)
}

func TestStopReleasesInterruptedDeliveries(t *testing.T) {
	t.Parallel()
	d := &fakeDeliverer{got: make(chan *core.Job, 10), block: make(chan struct{})}
	e := realEngine(t, d)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "hook", TTR: time.Hour,
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"}}))
	j, err := e.Push(ctx, &core.PushParams{Topic: "hook"})
	require.NoError(t, err)
	<-d.got // in flight, blocked
	stopCtx, cancel := context.WithCancel(ctx)
	cancel() // no time to finish: interrupt at once
	require.ErrorIs(t, e.Stop(stopCtx), context.Canceled)
	got, err := e.Get(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReady, got.State, "released for redelivery, not held until its lease expires")
	require.Equal(t, "delivery interrupted by shutdown", got.LastError)
	require.NoError(t, e.Stop(ctx), "idempotent")
}

func TestStopWaitsForInFlight(t *testing.T) {
	t.Parallel()
	d := &fakeDeliverer{got: make(chan *core.Job, 10), block: make(chan struct{})}
	e := realEngine(t, d)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "hook",
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"}}))
	j, err := e.Push(ctx, &core.PushParams{Topic: "hook"})
	require.NoError(t, err)
	<-d.got
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(ctx) }()
	require.Never(t, func() bool { return len(stopped) > 0 }, 200*time.Millisecond, 10*time.Millisecond,
		"Stop returned while a delivery was in flight")
	close(d.block) // the delivery finishes during the graceful stop
	require.NoError(t, <-stopped)
	got, err := e.Get(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDone, got.State)
}

type retryAfterErr struct{ d time.Duration }

func (e retryAfterErr) Error() string             { return "status 429" }
func (e retryAfterErr) RetryAfter() time.Duration { return e.d }

func TestDispatchHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	d := &fakeDeliverer{got: make(chan *core.Job, 10), fail: []error{retryAfterErr{30 * time.Second}}}
	e := realEngine(t, d)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(ctx) })
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "hook",
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"},
		Backoff:  core.Backoff{Initial: time.Millisecond, Max: time.Hour}}))
	before := time.Now()
	j, err := e.Push(ctx, &core.PushParams{Topic: "hook"})
	require.NoError(t, err)
	<-d.got
	got := waitState(t, e, j.ID, core.StateScheduled)
	require.Equal(t, "status 429", got.LastError)
	require.WithinRange(t, got.RunAt, before.Add(30*time.Second-time.Millisecond), time.Now().Add(31*time.Second),
		"the retry waits for the destination's Retry-After, not the 1ms backoff")
}

func TestDispatchKeepsLeaseOfSlowDelivery(t *testing.T) {
	t.Parallel()
	d := &fakeDeliverer{got: make(chan *core.Job, 10), block: make(chan struct{})}
	e := realEngine(t, d)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(ctx) })
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "hook", TTR: time.Second,
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"}}))
	j, err := e.Push(ctx, &core.PushParams{Topic: "hook"})
	require.NoError(t, err)
	first := <-d.got
	// The delivery outlives its 1s TTR; the engine touches the lease meanwhile.
	require.Eventually(t, func() bool {
		cur, err := e.Get(ctx, j.ID)
		return err == nil && cur.State == core.StateReserved && cur.LeaseExpiresAt.After(first.LeaseExpiresAt.Add(time.Second))
	}, 10*time.Second, 10*time.Millisecond)
	close(d.block)
	done := waitState(t, e, j.ID, core.StateDone)
	require.Equal(t, 1, done.Attempt, "delivered once, never handed out again")
	require.Empty(t, d.got)
}

func TestDispatchBuriesAtOnceOnNoRetry(t *testing.T) {
	t.Parallel()
	stop := &core.NoRetryError{Err: errors.New("receiver stopped retries: gone (status 410)")}
	d := &fakeDeliverer{got: make(chan *core.Job, 10), fail: []error{errors.New("status 503"), fmt.Errorf("wrapped: %w", stop)}}
	e := realEngine(t, d)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(ctx) })
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "hook", MaxAttempts: 10,
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"},
		Backoff:  core.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}))
	j, err := e.Push(ctx, &core.PushParams{Topic: "hook"})
	require.NoError(t, err)
	dead := waitState(t, e, j.ID, core.StateDead)
	require.Equal(t, 2, dead.Attempt, "dead after the attempt that said no retry, with 8 attempts left")
	require.Equal(t, "wrapped: receiver stopped retries: gone (status 410)", dead.LastError)
	require.Len(t, d.got, 2, "no attempt after the no-retry answer")
	require.ErrorIs(t, stop, core.ErrNoRetry)
}

// urlDeliverer is a fakeDeliverer that checks jobs' own URLs, refusing
// those that contain "denied", and counts its checks.
type urlDeliverer struct {
	*fakeDeliverer
	checks *atomic.Int64
}

func (u urlDeliverer) ValidateJobURL(raw string) error {
	if u.checks != nil {
		u.checks.Add(1)
	}
	if strings.Contains(raw, "denied") {
		return core.Invalid("url", "url: denied")
	}
	return nil
}

func TestPushJobURL(t *testing.T) {
	t.Parallel()
	e := realEngine(t, urlDeliverer{fakeDeliverer: &fakeDeliverer{got: make(chan *core.Job, 10)}})
	ctx := context.Background()
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "open", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x", AllowJobURL: true}}))
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "closed", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"}}))
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "pull"}))

	requireURLRefused := func(t *testing.T, err error, id, msg string) {
		t.Helper()
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "url", fe.Field)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.Contains(t, fe.Message, msg)
		_, err = e.Get(ctx, id)
		require.ErrorIs(t, err, core.ErrNotFound, "nothing stored")
	}
	for topic, msg := range map[string]string{
		"closed":    `topic "closed" does not allow a url per job (delivery.allow_job_url)`,
		"pull":      "url is only for jobs of webhook topics",
		"unset.one": "url is only for jobs of webhook topics",
	} {
		_, err := e.Push(ctx, &core.PushParams{Topic: topic, ID: "j-" + strings.ReplaceAll(topic, ".", "-"), URL: "https://svc/own"})
		requireURLRefused(t, err, "j-"+strings.ReplaceAll(topic, ".", "-"), msg)
	}
	_, err := e.Push(ctx, &core.PushParams{Topic: "open", ID: "j-denied", URL: "https://denied/own"})
	requireURLRefused(t, err, "j-denied", "url: denied")
	_, _, err = e.Replace(ctx, &core.PushParams{Topic: "closed", ID: "j-replace", URL: "https://svc/own"})
	requireURLRefused(t, err, "j-replace", "does not allow")

	j, err := e.Push(ctx, &core.PushParams{Topic: "open", URL: "https://svc/own", Delay: dur(time.Hour)})
	require.NoError(t, err)
	got, err := e.Get(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, "https://svc/own", got.URL)

	// A batch: each job on its own.
	rs, err := e.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{
		{Topic: "open", URL: "https://svc/a"}, {Topic: "closed", URL: "https://svc/b"}, {Topic: "closed"},
	}})
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.ErrorIs(t, rs[1].Err, core.ErrInvalidArgument)
	require.NoError(t, rs[2].Err)

	// Import holds to the same rules.
	imp := []*core.Job{
		{ID: "i-open", Topic: "open", URL: "https://svc/i", RunAt: time.Now(), TTR: time.Minute, MaxAttempts: 3, State: core.StateReady},
		{ID: "i-closed", Topic: "closed", URL: "https://svc/i", RunAt: time.Now(), TTR: time.Minute, MaxAttempts: 3, State: core.StateReady},
	}
	res, err := e.Import(ctx, imp)
	require.NoError(t, err)
	require.True(t, res[0].Imported)
	requireURLRefused(t, res[1].Err, "i-closed", "does not allow")

	// A server whose webhook deliverer cannot check URLs refuses them.
	plain := realEngine(t, &fakeDeliverer{got: make(chan *core.Job, 10)})
	require.NoError(t, plain.PutTopic(ctx, &core.Topic{Name: "open", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x", AllowJobURL: true}}))
	_, err = plain.Push(ctx, &core.PushParams{Topic: "open", URL: "https://svc/own"})
	require.ErrorContains(t, err, "not available on this server")

	// allow_job_url is for webhook topics only.
	err = e.PutTopic(ctx, &core.Topic{Name: "pull", Delivery: core.Delivery{AllowJobURL: true}})
	var fe *core.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "delivery.allow_job_url", fe.Field)
}

// TestPushBatchChecksEachURLOnce: the jobs of a batch (or an import) that
// share a URL cost one check, which may resolve its host, and share its
// outcome.
func TestPushBatchChecksEachURLOnce(t *testing.T) {
	t.Parallel()
	var checks atomic.Int64
	e := realEngine(t, urlDeliverer{fakeDeliverer: &fakeDeliverer{got: make(chan *core.Job, 10)}, checks: &checks})
	ctx := context.Background()
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "open", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x", AllowJobURL: true}}))
	var jobs []*core.PushParams
	for i := range 6 {
		u := []string{"https://a/cb", "https://denied/cb", "https://b/cb"}[i%3]
		jobs = append(jobs, &core.PushParams{Topic: "open", URL: u, Delay: dur(time.Hour)})
	}
	rs, err := e.PushBatch(ctx, &core.PushBatchParams{Jobs: jobs})
	require.NoError(t, err)
	for i, r := range rs {
		if i%3 == 1 {
			require.ErrorIs(t, r.Err, core.ErrInvalidArgument, "job %d", i)
		} else {
			require.NoError(t, r.Err, "job %d", i)
		}
	}
	require.Equal(t, int64(3), checks.Load(), "one check per distinct url")
	_, err = e.Push(ctx, &core.PushParams{Topic: "open", URL: "https://a/cb"})
	require.NoError(t, err)
	require.Equal(t, int64(4), checks.Load(), "nothing remembered across calls: the policy may change")
}
