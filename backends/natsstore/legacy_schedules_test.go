package natsstore

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core/storetest"
)

// TestLegacyScheduleMigrated: a schedule the release before records wrote
// (sch.<name> and its cursor cur.<name> in the topic bucket) is read by
// the new one and moved to a record.
func TestLegacyScheduleMigrated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	want := storetest.LegacySchedule("nightly")
	def := *want
	def.Cursor = time.Time{} // the definition had none
	raw, err := json.Marshal(&def)
	require.NoError(t, err)
	_, err = b.store.kv.Put(ctx, keySchedule+want.Name, raw)
	require.NoError(t, err)
	_, err = b.store.kv.Put(ctx, keyCursor+want.Name, []byte(strconv.FormatInt(want.Cursor.UnixMilli(), 10)))
	require.NoError(t, err)
	storetest.RequireScheduleMigrated(t, ctx, b.store, want)
	for _, k := range []string{keySchedule, keyCursor} {
		_, err := b.store.kv.Get(ctx, k+want.Name)
		require.True(t, errors.Is(err, jetstream.ErrKeyNotFound), "%s gone: %v", k, err)
	}
}
