package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeasesClaimedAgain: a job a subscription holds that is claimed
// again (its lease ran out) gives the subscription its credit back, and
// only the new lease's end removes the delivery from the record.
func TestLeasesClaimedAgain(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := &Engine{}
	sub := &Subscription{e: e, p: SubscriptionParams{Prefetch: 2}, held: map[string]struct{}{}, wake: make(chan struct{}, 1)}
	e.leases.add([]*Job{{ID: "a", Lease: "la", LeaseExpiresAt: now.Add(time.Second)}}, now, sub)
	free, next := sub.credit(now)
	require.Equal(t, 1, free)
	require.Equal(t, now.Add(time.Second), next)

	e.leases.add([]*Job{{ID: "a", Lease: "la2", LeaseExpiresAt: now.Add(time.Minute)}}, now, nil)
	free, _ = sub.credit(now)
	require.Equal(t, 2, free, "claimed again by a pull consumer: the subscription's credit is back")
	e.leases.ended("a", "la", ErrLeaseLost)
	require.Equal(t, 1, e.leases.held(now), "the old lease's end leaves the new delivery")
	e.leases.ended("a", "la2", nil)
	require.Zero(t, e.leases.held(now))
}
