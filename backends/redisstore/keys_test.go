package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// TestPerKeyRateShared: the instances of a prefix share each key's bucket,
// on one server and on a Cluster: a key's token taken by one is gone for
// the other, which parks the key's next job until the token comes back,
// and takes it then.
func TestPerKeyRateShared(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(testing.TB) string{"standalone": standaloneURL, "cluster": clusterURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			perKeyRateShared(t, url(t))
		})
	}
}

func perKeyRateShared(t *testing.T, url string) {
	prefix := uniquePrefix(t.Name())
	clock := coretest.NewFakeClockAt(time.Now())
	onClock := func(c *Config) { c.Clock, c.TimeFromClock = clock, true }
	a, b := openStore(t, url, prefix, onClock), openStore(t, url, prefix, onClock)
	ctx := context.Background()
	jobs := []*core.Job{job("t", -time.Second), job("t", -time.Second)}
	jobs[0].RunAt, jobs[1].RunAt = clock.Now().Add(-time.Second), clock.Now().Add(-time.Second+time.Millisecond)
	jobs[0].Key, jobs[1].Key = "k", "k"
	put(t, a, jobs...)
	params := &core.ClaimJobsParams{Topic: "t", Max: 10, KeyRate: core.Rate{Limit: 1, Period: time.Minute, Burst: 1, PerKey: true}}

	got, err := a.TakeJobs(ctx, params)
	require.NoError(t, err)
	require.Len(t, got.Jobs, 1)
	require.Equal(t, jobs[0].ID, got.Jobs[0].ID)
	// Done before the clock moves past its lease, which would make it
	// due again ahead of the second.
	_, err = a.AckJob(ctx, &core.AckJobParams{ID: jobs[0].ID, Lease: got.Jobs[0].Lease})
	require.NoError(t, err)
	got, err = b.TakeJobs(ctx, params)
	require.NoError(t, err)
	require.Empty(t, got.Jobs, "the key's token is taken")
	require.WithinDuration(t, clock.Now().Add(time.Minute), got.Next, time.Millisecond, "its next token")
	clock.Advance(time.Minute)
	got, err = b.TakeJobs(ctx, params)
	require.NoError(t, err)
	require.Len(t, got.Jobs, 1)
	require.Equal(t, jobs[1].ID, got.Jobs[0].ID)
}

// TestFairPutsParkByKey: a put that names its topic fair
// (PutJobsParams.Fair, as the engine does from the topic's configuration)
// parks its jobs by key (kp) from the topic's first put, before any claim,
// and only that topic's; a put that does not queues them; a fair claim
// takes both.
func TestFairPutsParkByKey(t *testing.T) {
	t.Parallel()
	url, prefix := standaloneURL(t), uniquePrefix(t.Name())
	s := openStore(t, url, prefix)
	keyed := func(topic, key string) *core.Job {
		j := job(topic, -time.Second)
		j.Key = key
		return j
	}
	parkedByKey := func(topic, key string) int64 {
		n, err := s.rdb.ZCard(t.Context(), "{"+prefix+"}:kp:"+topic+":"+key).Result()
		require.NoError(t, err)
		return n
	}
	res, err := s.PutJobs(t.Context(), &core.PutJobsParams{Jobs: []*core.Job{keyed("t", "x"), keyed("u", "x")}, Fair: []string{"t"}})
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.Equal(t, int64(1), parkedByKey("t", "x"), "parked by key before any claim")
	require.Zero(t, parkedByKey("u", "x"), "the other topic's queued")
	put(t, s, keyed("t", "y"))
	require.Zero(t, parkedByKey("t", "y"), "not named fair: queued")

	got, err := s.TakeJobs(t.Context(), &core.ClaimJobsParams{Topic: "t", Max: 10, Fair: true})
	require.NoError(t, err)
	require.Len(t, got.Jobs, 2, "both, from their keys")
	require.Zero(t, parkedByKey("t", "x"))
}
