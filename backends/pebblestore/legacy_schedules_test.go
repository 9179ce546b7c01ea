package pebblestore

import (
	"encoding/json"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core/storetest"
)

// TestLegacyScheduleMigrated: a schedule the release before records wrote
// (an S key, with its cursor) is read by the new one, which moves it to a
// record.
func TestLegacyScheduleMigrated(t *testing.T) {
	t.Parallel()
	s, err := Open(Config{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	want := storetest.LegacySchedule("nightly")
	raw, err := json.Marshal(want)
	require.NoError(t, err)
	require.NoError(t, s.db.Set(idKey(prefixSchedule, want.Name), raw, pebble.Sync))
	storetest.RequireScheduleMigrated(t, t.Context(), s, want)
}
