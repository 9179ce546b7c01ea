package redisstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestClaimTiesFromOneShard: on a Cluster, a claim takes jobs of one
// priority and run_at from one shard while it has enough of them, and the
// store's next claim from the next shard, so that a burst's claims and
// acknowledgements each run in one shard rather than in all of them.
func TestClaimTiesFromOneShard(t *testing.T) {
	t.Parallel()
	s := openStore(t, clusterURL(t), uniquePrefix(t.Name()))
	require.Greater(t, len(s.keys.shard), 1)
	due := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	n := 200 * len(s.keys.shard) // well over 100 in every shard
	for i := 0; i < n; i += 500 {
		jobs := make([]*core.Job, 500)
		for k := range jobs {
			jobs[k] = job("ties", 0)
			jobs[k].RunAt = due
		}
		put(t, s, jobs...)
	}
	var seen []int
	for range 2 {
		got := claim(t, s, "ties", 100, 5*time.Second)
		require.Len(t, got, 100)
		shard := s.keys.shardOf(got[0].ID)
		for _, j := range got {
			require.Equal(t, shard, s.keys.shardOf(j.ID), "a claim of tied jobs took from several shards")
		}
		seen = append(seen, shard)
	}
	require.NotEqual(t, seen[0], seen[1], "the next claim starts at the next shard")
}
