package core_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func TestIsDerivedID(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, id := range []string{core.KeyID("t", "k"), core.ScheduleID("nightly", slot), core.NoticeID("job-1", slot)} {
		require.True(t, core.IsDerivedID(id), id)
		require.NoError(t, core.ValidateID(id), "a derived id is a valid id, reserved")
	}
	key := core.KeyID("t", "k")
	for _, id := range []string{core.NewID(), "mine", "s-" + key[2:33], "x-" + key[2:], "S-" + key[2:], "n-" + key[2:] + "0", "s-" + "ABCDEF" + key[8:]} {
		require.False(t, core.IsDerivedID(id), id)
	}
}

// TestPushRefusesDerivedIDs: a client may not choose the id of a schedule
// slot, a notice or a unique key (of another topic), by push, replace or
// batch; nothing is stored. The key's own id on its topic is still taken.
func TestPushRefusesDerivedIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	require.NoError(t, b.engine.PutTopic(ctx, &core.Topic{Name: "keyed", UniqueKeys: core.UniqueKeysReject}))
	slot := b.clock.Now().Add(time.Hour)
	for _, id := range []string{
		core.ScheduleID("nightly", slot),
		core.NoticeID("job-1", slot),
		core.KeyID("other", "k"),
	} {
		for _, topic := range []string{"plain", "keyed"} {
			p := core.PushParams{Topic: topic, ID: id, Body: json.RawMessage(`1`)}
			if topic == "keyed" {
				p.Key = "k"
			}
			_, err := b.engine.Push(ctx, &p)
			requireField(t, err, "id")
			_, _, err = b.engine.Replace(ctx, &p)
			requireField(t, err, "id")
			rs, err := b.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{&p}})
			require.NoError(t, err)
			requireField(t, rs[0].Err, "id")
			_, err = b.engine.Get(ctx, id)
			require.ErrorIs(t, err, core.ErrNotFound, "nothing stored")
		}
	}
	j, err := b.engine.Push(ctx, &core.PushParams{Topic: "keyed", Key: "k", ID: core.KeyID("keyed", "k")})
	require.NoError(t, err, "the key's own id on its topic")
	require.Equal(t, core.KeyID("keyed", "k"), j.ID)
}

func requireField(t *testing.T, err error, field string) {
	t.Helper()
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	var fe *core.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, field, fe.Field)
}
