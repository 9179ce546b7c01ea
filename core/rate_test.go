package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func TestBucket(t *testing.T) {
	t.Parallel()
	r := core.Rate{Limit: 4, Period: time.Second}.WithDefaults()
	require.Equal(t, 4, r.Burst)
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	var b core.Bucket
	require.Equal(t, core.TakeRateResult{Granted: 4, Next: 250 * time.Millisecond}, b.Take(r, 10, t0), "full at first")
	require.Equal(t, core.TakeRateResult{Granted: 0, Next: 150 * time.Millisecond}, b.Take(r, 1, t0.Add(100*time.Millisecond)))
	require.Equal(t, core.TakeRateResult{Granted: 1, Next: 250 * time.Millisecond}, b.Take(r, 1, t0.Add(250*time.Millisecond)))
	require.Zero(t, b.Take(r, 1, t0.Add(200*time.Millisecond)).Granted, "a clock behind the bucket's adds nothing")
	b.Take(r, -3, t0.Add(250*time.Millisecond))
	require.Equal(t, 3, b.Take(r, 10, t0.Add(250*time.Millisecond)).Granted, "given back")
	require.Equal(t, 4, b.Take(r, 10, t0.Add(time.Hour)).Granted, "never past the burst")

	for _, bad := range []core.Rate{{Limit: -1}, {Period: time.Second}, {Limit: 1, Period: time.Microsecond},
		{Limit: 1, Period: 25 * time.Hour}, {Limit: 1, Burst: -1}, {Limit: core.RateLimitMax + 1}} {
		require.ErrorIs(t, bad.Validate(), core.ErrInvalidArgument, "%+v", bad)
	}
}

// TestClaimWithinRate: claims of a topic with a rate limit take no more
// jobs than its bucket has tokens, wait for the next token within their
// wait, and give back the tokens they did not use.
func TestClaimWithinRate(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := b.engine
	rate := core.Rate{Limit: 2, Period: time.Second}
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "limited", Rate: rate}))
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "idle", Rate: rate}))
	for range 5 {
		_, err := e.Push(ctx, &core.PushParams{Topic: "limited"})
		require.NoError(t, err)
	}
	claim := func(topic string, wait time.Duration) []*core.Job {
		jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: topic, Max: 5, Wait: wait})
		require.NoError(t, err)
		return jobs
	}
	require.Len(t, claim("limited", 0), 2, "the burst")
	require.Empty(t, claim("limited", 0), "no token left")

	got := make(chan []*core.Job)
	go func() { got <- claim("limited", 5*time.Second) }()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 1))
	b.clock.Advance(500 * time.Millisecond)
	require.Len(t, <-got, 1, "one token in half a second")

	// A claim that found no job gives its tokens back.
	require.Empty(t, claim("idle", 0))
	res, err := b.store.TakeRate(ctx, &core.TakeRateParams{Topic: "idle", Rate: rate.WithDefaults(), Want: 5})
	require.NoError(t, err)
	require.Equal(t, 2, res.Granted)

	err = e.PutTopic(ctx, &core.Topic{Name: "bad", Rate: core.Rate{Burst: 3}})
	var fe *core.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "rate.limit", fe.Field)
}

// TestClaimWithinMaxInFlight: a topic's max_in_flight bounds its reserved
// jobs for every claim; an ack gives the slot back.
func TestClaimWithinMaxInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := b.engine
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "bounded", MaxInFlight: 2}))
	for range 4 {
		_, err := e.Push(ctx, &core.PushParams{Topic: "bounded"})
		require.NoError(t, err)
	}
	claim := func() []*core.Job {
		jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "bounded", Max: 10})
		require.NoError(t, err)
		return jobs
	}
	held := claim()
	require.Len(t, held, 2)
	require.Empty(t, claim())
	require.NoError(t, e.Ack(ctx, &core.AckJobParams{ID: held[0].ID, Lease: held[0].Lease}))
	require.Len(t, claim(), 1)

	err := e.PutTopic(ctx, &core.Topic{Name: "bad", MaxInFlight: -1})
	var fe *core.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "max_in_flight", fe.Field)
}
