package redisstore

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core/storetest"
)

// TestLegacyTopicMigrated: a topic configuration the release before topic
// records wrote (in {P}:topics) is read by the new one and moved to a
// record.
func TestLegacyTopicMigrated(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(testing.TB) string{"Standalone": standaloneURL, "Cluster": clusterURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := openStore(t, url(t), uniquePrefix(t.Name()))
			want := storetest.LegacyTopic("orders")
			raw, err := json.Marshal(want)
			require.NoError(t, err)
			require.NoError(t, s.rdb.HSet(ctx, s.keys.topics, want.Name, raw).Err())
			storetest.RequireTopicMigrated(t, ctx, s, want)
			n, err := s.rdb.Exists(ctx, s.keys.topics).Result()
			require.NoError(t, err)
			require.Zero(t, n, "the earlier key is gone")
		})
	}
}
