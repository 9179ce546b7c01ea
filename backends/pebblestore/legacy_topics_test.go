package pebblestore

import (
	"encoding/json"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core/storetest"
)

// TestLegacyTopicMigrated: a topic configuration the release before topic
// records wrote (a t key) is read by the new one, which moves it to a
// record.
func TestLegacyTopicMigrated(t *testing.T) {
	t.Parallel()
	s, err := Open(Config{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	want := storetest.LegacyTopic("orders")
	raw, err := json.Marshal(want)
	require.NoError(t, err)
	require.NoError(t, s.db.Set(idKey(prefixTopic, want.Name), raw, pebble.Sync))
	storetest.RequireTopicMigrated(t, t.Context(), s, want)
}
