package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestThenValidation: a job's next steps are checked as pushes of them
// would be, each error naming its field within then, and a refused push
// stores nothing.
func TestThenValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e, err := core.NewEngine(core.EngineConfig{Store: b.store, Clock: b.clock, Limits: core.Limits{MaxBodyBytes: 1 << 20, MaxDelay: 24 * time.Hour}})
	require.NoError(t, err)
	deep := &core.PushParams{Topic: "s"}
	for range core.ThenDepthMax {
		deep = &core.PushParams{Topic: "s", Then: deep}
	}
	big := json.RawMessage(`"` + strings.Repeat("x", core.ThenMaxBytes) + `"`)
	for _, c := range []struct {
		then  *core.PushParams
		field string
	}{
		{&core.PushParams{Topic: "a..b"}, "then.topic"},
		{&core.PushParams{Topic: "s", ID: "mine"}, "then.id"},
		{&core.PushParams{Topic: "s", Delay: dur(25 * time.Hour)}, "then.delay"},
		{&core.PushParams{Topic: "s", Body: json.RawMessage(`{"x":`)}, "then.body"},
		{&core.PushParams{Topic: "s", Then: &core.PushParams{Topic: "s", TTR: time.Millisecond}}, "then.then.ttr"},
		{deep, "then"},
		{&core.PushParams{Topic: "s", Body: big}, "then"},
	} {
		_, err := e.Push(ctx, &core.PushParams{Topic: "orders", ID: "o-1", Then: c.then})
		fe, ok := errors.AsType[*core.FieldError](err)
		require.True(t, ok, "%v", err)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.Equal(t, c.field, fe.Field)
		_, err = e.Get(ctx, "o-1")
		require.ErrorIs(t, err, core.ErrNotFound, "nothing stored")
	}
	// A step's id is derived; a client may not choose one of that form.
	_, err = e.Push(ctx, &core.PushParams{Topic: "orders", ID: core.ChainID("o-1", b.clock.Now())})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.True(t, core.IsDerivedID(core.ChainID("o-1", b.clock.Now())))
	require.NotEqual(t, core.ChainID("o-1", b.clock.Now()), core.ChainID("o-1", b.clock.Now().Add(time.Millisecond)))
}

// TestChains: a done job's next step is pushed once, whichever engine
// follows the record of finished jobs, its delay counted from the finish,
// with its own step, which the next finish pushes in turn; a cancelled or
// dead job's step is never made. No topic has events.
func TestChains(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := b.engine
	other, err := core.NewEngine(core.EngineConfig{Store: b.store, Clock: b.clock})
	require.NoError(t, err)
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "orders", MaxAttempts: 1}))

	last := &core.PushParams{Topic: "cancel", Key: "o-1", Body: json.RawMessage(`{"cancel": "o-1"}`)}
	placed, err := e.Push(ctx, &core.PushParams{Topic: "orders", Body: json.RawMessage(`"placed"`),
		Then: &core.PushParams{Topic: "remind", Delay: dur(30 * time.Minute), Key: "o-1", Priority: -2, Then: last}})
	require.NoError(t, err)
	got, err := e.Get(ctx, placed.ID)
	require.NoError(t, err)
	require.Equal(t, "remind", got.Then.Topic)
	require.Equal(t, `{"cancel":"o-1"}`, string(got.Then.Then.Body), "kept compacted, at every depth")
	// Cancelled and dead: no step.
	never := &core.PushParams{Topic: "never"}
	cancelled, err := e.Push(ctx, &core.PushParams{Topic: "orders", Delay: dur(time.Hour), Then: never})
	require.NoError(t, err)
	require.NoError(t, e.Cancel(ctx, &core.CancelJobParams{ID: cancelled.ID}))
	buried, err := e.Push(ctx, &core.PushParams{Topic: "orders", Then: never})
	require.NoError(t, err)

	jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "orders", Max: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	b.clock.Advance(time.Second)
	done := b.clock.Now()
	for _, j := range jobs {
		if j.ID == placed.ID {
			require.NoError(t, e.Ack(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease}))
		} else {
			require.NoError(t, e.Nack(ctx, &core.NackParams{ID: buried.ID, Lease: j.Lease, Error: "unpaid"}))
		}
	}
	b.clock.Advance(time.Minute) // the follower comes later: the delay counts from the ack
	e.FollowFinished(ctx)
	other.FollowFinished(ctx)
	e.FollowFinished(ctx)

	step, err := e.Get(ctx, core.ChainID(placed.ID, done))
	require.NoError(t, err)
	require.Equal(t, "remind", step.Topic)
	require.Equal(t, "o-1", step.Key)
	require.Equal(t, -2, step.Priority)
	require.Equal(t, core.StateScheduled, step.State)
	require.Equal(t, done.Add(30*time.Minute), step.RunAt)
	require.Equal(t, last.Topic, step.Then.Topic)
	page, err := e.ListJobs(ctx, &core.ListJobsParams{Topic: "remind", State: core.StateScheduled, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1, "made once by two engines")

	b.clock.Advance(30 * time.Minute)
	reminders, err := other.Claim(ctx, &core.ClaimJobsParams{Topic: "remind", Max: 10})
	require.NoError(t, err)
	require.Len(t, reminders, 1)
	require.NoError(t, other.Ack(ctx, &core.AckJobParams{ID: step.ID, Lease: reminders[0].Lease}))
	other.FollowFinished(ctx)
	final, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "cancel", Max: 10})
	require.NoError(t, err)
	require.Len(t, final, 1)
	require.Equal(t, core.ChainID(step.ID, b.clock.Now()), final[0].ID)
	require.JSONEq(t, `{"cancel":"o-1"}`, string(final[0].Body))
	require.Nil(t, final[0].Then)

	b.clock.Advance(2 * time.Hour)
	e.FollowFinished(ctx)
	left, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "never", Max: 10})
	require.NoError(t, err)
	require.Empty(t, left, "no step of a cancelled or dead job")
}
