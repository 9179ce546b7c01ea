package natsstore

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core/storetest"
)

// TestLegacyTopicMigrated: a topic configuration the release before topic
// records wrote (cfg.<name> in the topic bucket) is read by the new one
// and moved to a record.
func TestLegacyTopicMigrated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	want := storetest.LegacyTopic("orders")
	raw, err := json.Marshal(want)
	require.NoError(t, err)
	_, err = b.store.kv.Put(ctx, keyConfig+want.Name, raw)
	require.NoError(t, err)
	storetest.RequireTopicMigrated(t, ctx, b.store, want)
	_, err = b.store.kv.Get(ctx, keyConfig+want.Name)
	require.True(t, errors.Is(err, jetstream.ErrKeyNotFound), "cfg. key gone: %v", err)
}
