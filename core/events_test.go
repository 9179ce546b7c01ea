package core_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestJobEvents: a topic's jobs that finish send their events, CloudEvents
// documents, to its events topic: an ack, a cancel, a death and an expiry
// each once, whichever engine over the store follows the record, and only
// the transitions of events.on; nothing of what finished before the first
// follower started, and no event of an event.
func TestJobEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	// Room for a body in an event (setup's limit is 64 bytes).
	e, err := core.NewEngine(core.EngineConfig{Store: b.store, Clock: b.clock, Limits: core.Limits{MaxBodyBytes: 4096, MaxDelay: 24 * time.Hour}})
	require.NoError(t, err)
	for _, c := range []struct {
		ev    core.Events
		field string
	}{
		{core.Events{Topic: "orders"}, "events.topic"},
		{core.Events{Topic: "a..b"}, "events.topic"},
		{core.Events{On: []string{"done"}}, "events.topic"},
		{core.Events{Topic: "audit", On: []string{"done", "paid"}}, "events.on"},
		{core.Events{Topic: "audit", On: []string{"done", "done"}}, "events.on"},
	} {
		err = e.PutTopic(ctx, &core.Topic{Name: "orders", Events: c.ev})
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe, "%+v", c.ev)
		require.Equal(t, c.field, fe.Field, "%+v", c.ev)
	}
	// Finished before any follower: not told.
	early, err := e.Push(ctx, &core.PushParams{Topic: "orders"})
	require.NoError(t, err)
	require.NoError(t, e.Cancel(ctx, &core.CancelJobParams{ID: early.ID}))
	e.FollowFinished(ctx) // no topic has events: reads nothing
	b.clock.Advance(time.Second)
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "orders", MaxAttempts: 1, Events: core.Events{Topic: "audit"}}))
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "audit", Events: core.Events{Topic: "orders"}}))
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "quiet", Events: core.Events{Topic: "audit", On: []string{core.EventDead}}}))
	e.FollowFinished(ctx) // the cursor starts now

	acked, err := e.Push(ctx, &core.PushParams{Topic: "orders", Key: "o-1", Body: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	buried, err := e.Push(ctx, &core.PushParams{Topic: "orders"})
	require.NoError(t, err)
	cancelled, err := e.Push(ctx, &core.PushParams{Topic: "orders", Delay: dur(time.Hour)})
	require.NoError(t, err)
	expiring, err := e.Push(ctx, &core.PushParams{Topic: "orders", ExpiresIn: dur(time.Minute)})
	require.NoError(t, err)
	quietDone, err := e.Push(ctx, &core.PushParams{Topic: "quiet"})
	require.NoError(t, err)
	jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "orders", Max: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.NoError(t, e.Ack(ctx, &core.AckJobParams{ID: acked.ID, Lease: jobs[0].Lease}))
	require.NoError(t, e.Nack(ctx, &core.NackParams{ID: buried.ID, Lease: jobs[1].Lease, Error: "no such order"}))
	require.NoError(t, e.Cancel(ctx, &core.CancelJobParams{ID: cancelled.ID}))
	qj, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "quiet", Max: 1})
	require.NoError(t, err)
	require.NoError(t, e.Ack(ctx, &core.AckJobParams{ID: quietDone.ID, Lease: qj[0].Lease}))
	b.clock.Advance(time.Minute)
	require.Equal(t, 1, e.SweepExpired(ctx))

	e.FollowFinished(ctx)
	e.FollowFinished(ctx) // again: nothing twice
	other, err := core.NewEngine(core.EngineConfig{Store: b.store, Clock: b.clock})
	require.NoError(t, err)
	require.NoError(t, other.PutTopic(ctx, &core.Topic{Name: "orders", MaxAttempts: 1, Events: core.Events{Topic: "audit"}}))
	other.FollowFinished(ctx) // another instance: the same cursor

	got, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "audit", Max: 10})
	require.NoError(t, err)
	byJob := map[string]core.Event{}
	for _, j := range got {
		var ev core.Event
		require.NoError(t, json.Unmarshal(j.Body, &ev))
		require.Equal(t, ev.ID, j.ID, "the job's id is the event's")
		require.True(t, core.IsEventID(j.ID))
		require.Equal(t, "1.0", ev.SpecVersion)
		require.Equal(t, ev.Data.ID, ev.Subject)
		require.Equal(t, core.EventID(ev.Data.ID, ev.Type[len(core.EventTypePrefix):], ev.Time), j.ID)
		byJob[ev.Data.ID] = ev
		require.NoError(t, e.Ack(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease}))
	}
	require.Len(t, byJob, 4, "one event each, and none of quiet's ack (on: dead) nor of the early cancel")
	require.Equal(t, "delayq.job.done", byJob[acked.ID].Type)
	require.Equal(t, "o-1", byJob[acked.ID].Data.Key)
	require.JSONEq(t, `{"n":1}`, string(byJob[acked.ID].Data.Body))
	require.Equal(t, "delayq.job.dead", byJob[buried.ID].Type)
	require.Equal(t, "no such order", byJob[buried.ID].Data.LastError)
	require.Equal(t, "delayq.job.cancelled", byJob[cancelled.ID].Type)
	require.Equal(t, "delayq.job.expired", byJob[expiring.ID].Type)

	// The acks of the events (audit's own events go to orders) tell
	// nothing: no event of an event.
	e.FollowFinished(ctx)
	left, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "orders", Max: 10})
	require.NoError(t, err)
	require.Empty(t, left)
}

// TestJobEventBodyOmitted: an event that would exceed the body limit with
// the job's body in it leaves the body out and says so, and is put all
// the same.
func TestJobEventBodyOmitted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil) // a body limit of 64 bytes
	e, ctx := b.engine, context.Background()
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "orders", Events: core.Events{Topic: "audit"}}))
	e.FollowFinished(ctx)
	pushed, err := e.Push(ctx, &core.PushParams{Topic: "orders", Body: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	require.NoError(t, e.Cancel(ctx, &core.CancelJobParams{ID: pushed.ID}))
	e.FollowFinished(ctx)

	got, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "audit", Max: 10})
	require.NoError(t, err)
	require.Len(t, got, 1)
	var ev core.Event
	require.NoError(t, json.Unmarshal(got[0].Body, &ev))
	require.Equal(t, pushed.ID, ev.Data.ID)
	require.True(t, ev.Data.BodyOmitted)
	require.Empty(t, ev.Data.Body)
}
