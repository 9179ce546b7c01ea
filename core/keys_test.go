package core_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func TestKeyID(t *testing.T) {
	t.Parallel()
	id := core.KeyID("orders", "42")
	require.NoError(t, core.ValidateID(id))
	require.True(t, core.IsKeyID(id))
	require.Equal(t, id, core.KeyID("orders", "42"), "the same topic and key, the same id")
	require.NotEqual(t, id, core.KeyID("orders", "43"))
	require.NotEqual(t, id, core.KeyID("orders2", "42"))
	require.NotEqual(t, core.KeyID("a.b", "c"), core.KeyID("a", "b.c"), "topic and key are kept apart")
	for _, other := range []string{core.NewID(), "k-" + id[2:33], "k-" + id[2:] + "0", "K-" + id[2:], "k-" + "ABCDEF" + id[8:]} {
		require.False(t, core.IsKeyID(other), other)
	}
}

// TestUniqueKeys: on a topic with unique keys a keyed push gets the key's
// id, and a second push with the key conflicts (reject) or replaces the
// job (replace, unless reserved); once the job finished, the key is free.
// Ids of that form are refused anywhere else.
func TestUniqueKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	require.NoError(t, b.engine.PutTopic(ctx, &core.Topic{Name: "rej", UniqueKeys: core.UniqueKeysReject}))
	require.NoError(t, b.engine.PutTopic(ctx, &core.Topic{Name: "rep", UniqueKeys: core.UniqueKeysReplace}))
	require.ErrorIs(t, b.engine.PutTopic(ctx, &core.Topic{Name: "bad", UniqueKeys: "yes"}), core.ErrInvalidArgument)

	push := func(topic, key, body string, delay time.Duration) (*core.Job, error) {
		return b.engine.Push(ctx, &core.PushParams{Topic: topic, Key: key, Body: json.RawMessage(body), Delay: &delay})
	}
	first, err := push("rej", "order-1", `1`, time.Minute)
	require.NoError(t, err)
	require.Equal(t, core.KeyID("rej", "order-1"), first.ID)
	_, err = push("rej", "order-1", `2`, time.Minute)
	var conflict *core.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, first.ID, conflict.Job.ID)
	require.JSONEq(t, `1`, string(conflict.Job.Body), "the existing job, unchanged")
	other, err := push("rej", "order-2", `3`, time.Minute)
	require.NoError(t, err)
	require.NotEqual(t, first.ID, other.ID)
	plain, err := push("rej", "", `4`, time.Minute)
	require.NoError(t, err)
	require.False(t, core.IsKeyID(plain.ID), "a job without key gets a generated id")
	// Finished, the key is free again.
	require.NoError(t, b.engine.Cancel(ctx, &core.CancelJobParams{ID: first.ID}))
	again, err := push("rej", "order-1", `5`, time.Minute)
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)

	// Replace: the second push reschedules the first job, in one batch too.
	r1, err := push("rep", "order-1", `1`, time.Hour)
	require.NoError(t, err)
	rs, err := b.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{
		{Topic: "rep", Key: "order-1", Body: json.RawMessage(`2`)},
		{Topic: "rej", Key: "order-2", Body: json.RawMessage(`3`)},
		{Topic: "rep", Key: "order-3", Body: json.RawMessage(`4`)},
	}})
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.True(t, rs[0].Replaced)
	require.Equal(t, r1.ID, rs[0].Job.ID)
	require.ErrorIs(t, rs[1].Err, core.ErrConflict, "reject topics still reject in a mixed batch")
	require.NoError(t, rs[2].Err)
	require.False(t, rs[2].Replaced)
	got, err := b.engine.Get(ctx, r1.ID)
	require.NoError(t, err)
	require.JSONEq(t, `2`, string(got.Body))
	require.Equal(t, core.StateReady, got.State, "rescheduled to now")
	claimed, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "rep", Max: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = push("rep", claimed[0].Key, `5`, 0)
	require.ErrorIs(t, err, core.ErrConflict, "a reserved job is not replaced")

	// Ids: a client may not choose another id for a keyed job of such a
	// topic, nor a key's id anywhere else; the key's own id replaces.
	for _, p := range []core.PushParams{
		{Topic: "rej", Key: "order-9", ID: "mine"},
		{Topic: "plain", ID: core.KeyID("rej", "order-9")},
		{Topic: "rej", ID: core.KeyID("rej", "order-9")},
	} {
		_, err := b.engine.Push(ctx, &p)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "%+v", p)
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "id", fe.Field)
	}
	j, replaced, err := b.engine.Replace(ctx, &core.PushParams{Topic: "rej", Key: "order-2", ID: other.ID, Body: json.RawMessage(`6`)})
	require.NoError(t, err)
	require.True(t, replaced)
	require.Equal(t, other.ID, j.ID)
}

// TestFindAndCancelByKey: the engine pages through a key's jobs and cancels
// the unfinished ones but the reserved, which it reports.
func TestFindAndCancelByKey(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		delay := time.Duration(i) * time.Minute
		j, err := b.engine.Push(ctx, &core.PushParams{Topic: "orders", Key: "o-1", Delay: &delay})
		require.NoError(t, err)
		ids = append(ids, j.ID)
	}
	_, err := b.engine.Push(ctx, &core.PushParams{Topic: "orders", Key: "o-2"})
	require.NoError(t, err)
	claimed, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "orders", Max: 1})
	require.NoError(t, err)
	require.Equal(t, ids[0], claimed[0].ID)

	page, err := b.engine.FindJobs(ctx, &core.FindJobsParams{Topic: "orders", Key: "o-1", Limit: 3})
	require.NoError(t, err)
	require.Len(t, page, 3)
	rest, err := b.engine.FindJobs(ctx, &core.FindJobsParams{Topic: "orders", Key: "o-1", After: page[2].ID, Limit: 3})
	require.NoError(t, err)
	require.Len(t, rest, 2)

	res, err := b.engine.CancelByKey(ctx, "orders", "o-1")
	require.NoError(t, err)
	require.Equal(t, ids[1:], res.Cancelled)
	require.Equal(t, ids[:1], res.Reserved)
	again, err := b.engine.CancelByKey(ctx, "orders", "o-1")
	require.NoError(t, err)
	require.Empty(t, again.Cancelled, "a second call finds nothing left to cancel")
	require.Equal(t, ids[:1], again.Reserved)
	j, err := b.engine.FindJobs(ctx, &core.FindJobsParams{Topic: "orders", Key: "o-2", Limit: 10})
	require.NoError(t, err)
	require.Len(t, j, 1)
	require.Equal(t, core.StateReady, j[0].State, "another key's job stays")

	for _, p := range []core.FindJobsParams{
		{Topic: "orders", Limit: 10},
		{Topic: "orders", Key: "o-1", Limit: 0},
		{Topic: "orders", Key: "o-1", Limit: core.FindLimitMax + 1},
		{Topic: "orders", Key: "o-1", After: "a.b", Limit: 1},
		{Topic: "a..b", Key: "o-1", Limit: 1},
		{Topic: "orders", Key: "a\nb", Limit: 1},
	} {
		_, err := b.engine.FindJobs(ctx, &p)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "%+v", p)
	}
	_, err = b.engine.CancelByKey(ctx, "orders", "")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
}
