package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// testRateLimit: TakeRate keeps a token bucket per topic, shared by the
// store's instances: a new one is full, takes grant what it holds, given
// back tokens return (never past the burst), and tokens come back at the
// limit's pace.
func testRateLimit(t *testing.T, b *testBundle) {
	// One token every 10 s: no refill between two calls, however slow.
	slow := core.Rate{Limit: 1, Period: 10 * time.Second, Burst: 5}
	take := func(s core.Store, topic string, rate core.Rate, want int) core.TakeRateResult {
		t.Helper()
		res, err := s.TakeRate(b.ctx, &core.TakeRateParams{Topic: topic, Rate: rate, Want: want})
		require.NoError(t, err)
		return res
	}
	res := take(b.store, "rate.a", slow, 8)
	require.Equal(t, 5, res.Granted, "a new bucket holds the burst")
	require.InDelta(t, 10*time.Second, res.Next, float64(2*time.Second), "empty: a token in about 10s")
	res = take(b.store, "rate.a", slow, 1)
	require.Zero(t, res.Granted)
	require.Positive(t, res.Next)
	require.LessOrEqual(t, res.Next, 10*time.Second)
	require.Equal(t, 3, take(b.store, "rate.b", slow, 3).Granted, "a bucket per topic")

	other := b.open(t)
	require.Zero(t, take(other, "rate.a", slow, 1).Granted, "one bucket for every instance")
	take(other, "rate.a", slow, -2)
	require.Equal(t, 2, take(b.store, "rate.a", slow, 5).Granted, "given back")
	take(b.store, "rate.a", slow, -100)
	require.Equal(t, 5, take(other, "rate.a", slow, 10).Granted, "never past the burst")

	// 20 a second, one at a time: a token again after 50 ms.
	fast := core.Rate{Limit: 20, Period: time.Second, Burst: 1}
	require.Equal(t, 1, take(b.store, "rate.c", fast, 3).Granted)
	b.pass(t, 150*time.Millisecond)
	require.Equal(t, 1, take(other, "rate.c", fast, 3).Granted, "refilled, up to the burst")

	for _, bad := range []core.Rate{{}, {Limit: 1}, {Limit: 1, Period: time.Second}} {
		_, err := b.store.TakeRate(b.ctx, &core.TakeRateParams{Topic: "rate.a", Rate: bad, Want: 1})
		require.ErrorIs(t, err, core.ErrInvalidArgument, "%+v", bad)
	}
}
