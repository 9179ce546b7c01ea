package core

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKeyRatesSweep: the buckets kept are those of keys not full again: a
// key's bucket, emptied, is kept until it is full, and a take that makes a
// bucket once there are twice as many as the last sweep left drops the
// full ones, so that memory follows the keys with recent deliveries.
func TestKeyRatesSweep(t *testing.T) {
	t.Parallel()
	var k KeyRates
	require.True(t, k.Set(Rate{Limit: 1, Period: time.Second, Burst: 1, PerKey: true}))
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for i := range 1000 {
		_, ok := k.Take("k"+strconv.Itoa(i), t0)
		require.True(t, ok)
	}
	require.Len(t, k.buckets, 1000, "every bucket emptied is kept")
	at, ok := k.Take("k0", t0)
	require.False(t, ok)
	require.Equal(t, t0.Add(time.Second), at)

	// A second on, every bucket is full again; the next one made sweeps.
	for i := range 2000 - 1000 + 1 {
		_, ok := k.Take("n"+strconv.Itoa(i), t0.Add(time.Second))
		require.True(t, ok)
	}
	require.Less(t, len(k.buckets), 1100, "the full ones dropped")
	require.GreaterOrEqual(t, len(k.buckets), 1000, "the ones emptied at t0+1s kept")

	n, next := k.Tokens("n0", t0.Add(1500*time.Millisecond))
	require.Zero(t, n)
	require.Equal(t, t0.Add(2*time.Second), next)
	n, next = k.Tokens("never", t0)
	require.Equal(t, 1, n, "a key without a bucket has a full one")
	require.Equal(t, t0.Add(time.Second), next, "and its next token a period after it is taken")

	require.False(t, k.Set(Rate{Limit: 1, Period: time.Second, Burst: 1, PerKey: true}), "the same rate")
	k.Wait("n0", t0.Add(2*time.Second))
	require.Equal(t, t0.Add(2*time.Second), k.Next())
	require.True(t, k.Set(Rate{}))
	require.Nil(t, k.buckets, "no rate: no buckets")
	require.True(t, k.Next().IsZero(), "nor waiting keys")
}
