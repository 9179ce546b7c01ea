package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// thenStep returns a job's next step with every field a step may have,
// and a step of its own, as the engine hands it to a store (Job.Then).
func thenStep() *core.PushParams {
	delay, expires := 30*time.Minute, time.Hour
	runAt := time.Date(2026, 12, 1, 10, 0, 0, 250e6, time.UTC)
	return &core.PushParams{
		Topic: "then.next", Body: json.RawMessage(`{"a":[1,"x"]}`), Delay: &delay, Key: "order-1",
		TTR: 5 * time.Second, MaxAttempts: 2, RetryDelays: []time.Duration{time.Second, time.Minute},
		Priority: -3, ExpiresIn: &expires,
		Then: &core.PushParams{Topic: "then.last", RunAt: &runAt, URL: "https://example.com/hook"},
	}
}

// requireSameThen requires got to be the step want, as its JSON form
// (which every store keeps) says.
func requireSameThen(t *testing.T, want, got *core.PushParams, what string) {
	t.Helper()
	require.NotNil(t, got, "then of %s", what)
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g), "then of %s", what)
}

// testThen: a job's next step (Job.Then) is kept as put, across a restart
// too, and goes with the job when a put replaces it by one without; a job
// without one has none. The record of finished jobs marks the ack of a job
// with a step (FinishedJob.Then), after a restart too, and no other
// finish.
func testThen(t *testing.T, b *testBundle) {
	const topic = "then"
	ctx := b.ctx
	step := thenStep()
	chained, plain := DueJob(topic), DueJob(topic)
	chained.Then = thenStep()
	cancelled, replaced := NewJob(topic, time.Now().Add(time.Hour)), NewJob(topic, time.Now().Add(time.Hour))
	cancelled.Then, replaced.Then = thenStep(), thenStep()
	b.put(t, chained, plain, cancelled, replaced)
	requireSameThen(t, step, b.get(t, chained.ID).Then, "a job put")
	require.Nil(t, b.get(t, plain.ID).Then, "then of a job without one")

	without := NewJob(topic, time.Now().Add(time.Hour))
	without.ID = replaced.ID
	require.True(t, b.putResults(t, true, without)[0].Replaced)
	require.Nil(t, b.get(t, replaced.ID).Then, "then of a job replaced by one without")

	r := &finishedReader{store: b.store}
	soon := func() time.Time { return time.Now().Add(5 * time.Second) }
	require.NoError(t, b.store.CancelJob(ctx, &core.CancelJobParams{ID: cancelled.ID}))
	got := r.expectFinished(t, ctx, soon(), finishedEntry{ID: cancelled.ID, Topic: topic, State: core.StateCancelled})
	require.False(t, got[0].Then, "FinishedJob.Then of a cancel")
	for range 2 {
		c := b.claimOne(t, topic, dueWait)
		require.NoError(t, ack(b, c))
		got = r.expectFinished(t, ctx, soon(), finishedEntry{ID: c.ID, Topic: topic, State: core.StateDone, Attempt: 1})
		require.Equal(t, c.ID == chained.ID, got[0].Then, "FinishedJob.Then of the ack of %s (chained %s)", c.ID, chained.ID)
	}
	requireSameThen(t, step, b.get(t, chained.ID).Then, "a job done")

	// A job put before a restart, acknowledged after it: its step is
	// kept, and its ack marked, by a store that read it again.
	if b.h.Durable {
		later := DueJob(topic)
		later.Then = thenStep()
		b.put(t, later)
		require.NoError(t, b.store.Close())
		b.store = b.open(t)
		r.store = b.store
		requireSameThen(t, step, b.get(t, chained.ID).Then, "a job done, reopened")
		c := b.claimOne(t, topic, reopenWait)
		require.NoError(t, ack(b, c))
		got = r.expectFinished(t, ctx, soon(), finishedEntry{ID: later.ID, Topic: topic, State: core.StateDone, Attempt: 1})
		require.True(t, got[0].Then, "FinishedJob.Then of an ack after a restart")
	}
}
