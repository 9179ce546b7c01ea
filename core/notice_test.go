package core_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestDeadNotices: each death of a topic with on_dead is told once by a
// notice job in the on_dead topic, whatever made the job dead (a nack on
// its last attempt, a lease run out on it), by however many engines; a
// death after a requeue is told again; the death of a notice is not told.
func TestDeadNotices(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := b.engine
	for _, bad := range []core.Topic{{Name: "orders", OnDead: "orders"}, {Name: "orders", OnDead: "a..b"}} {
		err := e.PutTopic(ctx, &bad)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "on_dead", fe.Field)
	}
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "orders", OnDead: "orders.dead", MaxAttempts: 1, TTR: time.Second}))
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "orders.dead", OnDead: "orders", Retention: 24 * 7 * time.Hour}))
	claim := func(topic string, max int) []*core.Job {
		t.Helper()
		jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: topic, Max: max})
		require.NoError(t, err)
		return jobs
	}
	notices := func(want int) []core.DeadNotice {
		t.Helper()
		jobs := claim("orders.dead", 10)
		require.Len(t, jobs, want)
		out := make([]core.DeadNotice, len(jobs))
		for i, j := range jobs {
			require.NoError(t, json.Unmarshal(j.Body, &out[i]))
			require.Equal(t, core.NoticeID(out[i].Job.ID, out[i].Job.DiedAt), j.ID)
			require.Equal(t, 24*7*time.Hour, j.Retention, "the notice topic's retention")
			require.NoError(t, e.Ack(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease}))
		}
		return out
	}

	nacked, err := e.Push(ctx, &core.PushParams{Topic: "orders", Key: "order-1", Body: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	expired, err := e.Push(ctx, &core.PushParams{Topic: "orders", Key: "order-2"})
	require.NoError(t, err)
	got := claim("orders", 2)
	require.Len(t, got, 2)
	require.NoError(t, e.Nack(ctx, &core.NackParams{ID: nacked.ID, Lease: got[0].Lease, Error: "no such order"}))
	b.clock.Advance(2 * time.Second) // the other's lease runs out on its last attempt
	e.FollowDeaths(ctx)

	told := notices(2)
	byID := map[string]core.NoticeJob{told[0].Job.ID: told[0].Job, told[1].Job.ID: told[1].Job}
	require.Equal(t, core.NoticeType, told[0].Type)
	n := byID[nacked.ID]
	require.Equal(t, "orders", n.Topic)
	require.Equal(t, "order-1", n.Key)
	require.True(t, n.BodyOmitted, "past the engine's body limit (64 bytes here) with the body in it")
	require.Empty(t, n.Body)
	require.Equal(t, "no such order", n.LastError)
	require.Equal(t, 1, n.Attempt)
	require.Equal(t, 1, n.MaxAttempts)
	require.Equal(t, core.LeaseExpired, byID[expired.ID].LastError)

	// Told once: by this engine again, and by another over the same store
	// once its notices are done.
	e.FollowDeaths(ctx)
	other, err := core.NewEngine(core.EngineConfig{Store: b.store, Clock: b.clock})
	require.NoError(t, err)
	require.NoError(t, other.PutTopic(ctx, &core.Topic{Name: "orders", OnDead: "orders.dead", MaxAttempts: 1, TTR: time.Second}))
	other.FollowDeaths(ctx)
	require.Empty(t, claim("orders.dead", 10))

	// A requeued job that dies again is told again.
	require.NoError(t, e.Requeue(ctx, nacked.ID))
	b.clock.Advance(time.Second)
	got = claim("orders", 1)
	require.Len(t, got, 1)
	require.NoError(t, e.Nack(ctx, &core.NackParams{ID: nacked.ID, Lease: got[0].Lease, Error: "still no such order"}))
	e.FollowDeaths(ctx)
	again := notices(1)
	require.Equal(t, "still no such order", again[0].Job.LastError)

	// A notice that dies is not told to orders.dead's own on_dead.
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "orders.dead", OnDead: "orders", MaxAttempts: 1}))
	require.NoError(t, e.Requeue(ctx, nacked.ID))
	b.clock.Advance(time.Second)
	got = claim("orders", 1)
	require.NoError(t, e.Nack(ctx, &core.NackParams{ID: nacked.ID, Lease: got[0].Lease}))
	e.FollowDeaths(ctx)
	notice := claim("orders.dead", 1)
	require.Len(t, notice, 1)
	require.NoError(t, e.Nack(ctx, &core.NackParams{ID: notice[0].ID, Lease: notice[0].Lease}))
	e.FollowDeaths(ctx)
	require.Empty(t, claim("orders", 10), "no notice of a notice")
}
