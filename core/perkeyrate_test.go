package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestClaimPerKeyRate: the engine passes a topic's rate per key to the
// store at each claim, taking no token of the topic's own bucket: two keys
// at one a second each go out at once, a claim waits for a key's refill,
// and a change of the rate applies to the next claim.
func TestClaimPerKeyRate(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := b.engine
	rate := core.Rate{Limit: 1, Period: time.Second, PerKey: true}
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "pkr", Rate: rate}))
	for _, key := range []string{"a", "b", "a", "b"} {
		_, err := e.Push(ctx, &core.PushParams{Topic: "pkr", Key: key})
		require.NoError(t, err)
	}
	claim := func(wait time.Duration) []string {
		jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "pkr", Max: 5, Wait: wait})
		require.NoError(t, err)
		keys := []string{}
		for _, j := range jobs {
			keys = append(keys, j.Key)
		}
		return keys
	}
	require.Equal(t, []string{"a", "b"}, claim(0), "a token of each key")
	require.Empty(t, claim(0), "each key at its rate")
	res, err := b.store.TakeRate(ctx, &core.TakeRateParams{Topic: "pkr", Rate: rate.WithDefaults(), Want: 1})
	require.NoError(t, err)
	require.Equal(t, 1, res.Granted, "the topic's own bucket is untouched")

	got := make(chan []string)
	go func() { got <- claim(5 * time.Second) }()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 2)) // the claim's deadline and the refill
	b.clock.Advance(time.Second)
	require.Equal(t, []string{"a", "b"}, <-got, "woken by the refill")

	for range 2 {
		_, err := e.Push(ctx, &core.PushParams{Topic: "pkr", Key: "a"})
		require.NoError(t, err)
	}
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "pkr", Rate: core.Rate{Limit: 1, Period: time.Second}}))
	require.Equal(t, []string{"a"}, claim(0), "per_key off: the topic's one bucket, refilled to its one token")

	err = e.PutTopic(ctx, &core.Topic{Name: "bad", Rate: core.Rate{PerKey: true}})
	var fe *core.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "rate.limit", fe.Field)
}
