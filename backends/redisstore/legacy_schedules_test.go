package redisstore

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core/storetest"
)

// TestLegacyScheduleMigrated: a schedule the release before records wrote
// (the definition in {P}:sched, its cursor in {P}:scur and, on a Cluster,
// a later one in a shard's) is read by the new one, cursor the latest,
// and moved to a record.
func TestLegacyScheduleMigrated(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(testing.TB) string{"Standalone": standaloneURL, "Cluster": clusterURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := openStore(t, url(t), uniquePrefix(t.Name()))
			want := storetest.LegacySchedule("nightly")
			def := *want
			def.Cursor = time.Time{} // the definition had none
			raw, err := json.Marshal(&def)
			require.NoError(t, err)
			require.NoError(t, s.rdb.HSet(ctx, s.keys.sched, want.Name, raw).Err())
			cursor := want.Cursor
			if !s.multiShard {
				require.NoError(t, s.rdb.HSet(ctx, s.keys.shardCursors(0), want.Name, strconv.FormatInt(cursor.UnixMilli(), 10)).Err())
				cursor = cursor.Add(-5 * time.Minute)
			}
			require.NoError(t, s.rdb.HSet(ctx, s.keys.cursors, want.Name, strconv.FormatInt(cursor.UnixMilli(), 10)).Err())
			storetest.RequireScheduleMigrated(t, ctx, s, want)
			n, err := s.rdb.Exists(ctx, s.keys.sched, s.keys.cursors).Result()
			require.NoError(t, err)
			require.Zero(t, n, "the earlier keys are gone")
		})
	}
}
