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

// TestClaimAfterTies: once a claim took all its jobs from its turn's first
// shard, the next reads one job of each other shard (narrowPeek); jobs
// that come first in another shard, by priority or by run_at, two of them
// so that their shard must be read again, are still claimed first, and
// the ties go on being claimed 10 at a time.
func TestClaimAfterTies(t *testing.T) {
	t.Parallel()
	s := openStore(t, clusterURL(t), uniquePrefix(t.Name()))
	const topic = "after-ties"
	due := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	n := 30 * len(s.keys.shard) // over 10 in every shard
	jobs := make([]*core.Job, n)
	for k := range jobs {
		jobs[k] = job(topic, 0)
		jobs[k].RunAt = due
	}
	put(t, s, jobs...)
	// pair returns two jobs of one shard other than not's.
	pair := func(not int, mod func(j *core.Job)) []*core.Job {
		var out []*core.Job
		for len(out) < 2 {
			j := job(topic, 0)
			j.RunAt = due
			mod(j)
			if sh := s.keys.shardOf(j.ID); sh != not && (len(out) == 0 || sh == s.keys.shardOf(out[0].ID)) {
				out = append(out, j)
			}
		}
		return out
	}
	// An earlier run_at first, while the topic has no priority but 0: the
	// other shards are then read with plain commands (peekHeads); then a
	// more urgent priority, which the peek script reads.
	for _, mod := range []func(j *core.Job){
		func(j *core.Job) { j.RunAt = due.Add(-time.Millisecond) },
		func(j *core.Job) { j.Priority = -1 },
	} {
		got := claim(t, s, topic, 10, 5*time.Second)
		require.Len(t, got, 10)
		_, narrow := s.narrowPeek.Load(topic)
		require.True(t, narrow, "a claim of ties from one shard")
		first := pair(s.keys.shardOf(got[0].ID), mod)
		put(t, s, first...)
		got = claim(t, s, topic, 10, 5*time.Second)
		require.Len(t, got, 10)
		require.ElementsMatch(t, []string{first[0].ID, first[1].ID}, []string{got[0].ID, got[1].ID},
			"the jobs that come first, in a shard read for one job at first")
	}
	// The rest: each claim takes 10 as long as 10 are due.
	for left := n + 4 - 40; left > 0; {
		got := claim(t, s, topic, 10, 5*time.Second)
		require.Len(t, got, min(10, left))
		left -= len(got)
	}
}
