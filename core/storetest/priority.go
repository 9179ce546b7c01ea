package storetest

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// testPriority: among due jobs, claims take the most urgent (lowest
// priority) first and run_at order within one priority; a job not yet due
// waits whatever its priority.
func testPriority(t *testing.T, b *testBundle) {
	const topic = "prio"
	now := time.Now()
	levels := []int{0, 5, -3, core.PriorityMax, core.PriorityMin, -3, 0, 1}
	var jobs []*core.Job
	for i := range 40 {
		j := NewJob(topic, now.Add(-10*time.Second+time.Duration(i)*31*time.Millisecond))
		j.Priority = levels[i%len(levels)]
		jobs = append(jobs, j)
	}
	later := NewJob(topic, now.Add(time.Hour))
	later.Priority = core.PriorityMin
	want := slices.Clone(jobs) // in run_at order: a stable sort by priority keeps it within one
	slices.SortStableFunc(want, func(a, b *core.Job) int { return cmp.Compare(a.Priority, b.Priority) })

	shuffled := append(slices.Clone(jobs), later)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, j := range shuffled[:10] {
		b.put(t, j)
	}
	b.put(t, shuffled[10:]...)
	for _, j := range jobs[:len(levels)] {
		requireSameJob(t, j, b.get(t, j.ID))
	}

	got := claimUntil(t, b.ctx, b.store, topic, len(jobs), 7, time.Second)
	require.Equal(t, ids(want), ids(got), "claims not by priority, then run_at")
	require.Empty(t, b.claim(t, topic, 10, 0), "a job not yet due, however urgent")
	b.requireState(t, later.ID, core.StateScheduled)
}

// testPriorityKept: a job keeps its priority through a retry, an expired
// lease and a requeue, and takes its new one on replace; a cancelled job
// of any priority is gone from the claims.
func testPriorityKept(t *testing.T, b *testBundle) {
	const topic = "prio.kept"
	now := time.Now()
	normal := NewJob(topic, now.Add(-2*time.Second))
	urgent := NewJob(topic, now.Add(-time.Second))
	urgent.TTR = core.TTRMin
	urgent.Priority = -5
	gone := NewJob(topic, now.Add(-3*time.Second))
	gone.Priority = -7
	b.put(t, normal, urgent, gone)
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: gone.ID}))

	claimUrgent := func(what string, attempt int) *core.Job {
		t.Helper()
		// A store that hears of due jobs through a subscription (NATS)
		// orders those it has heard of: let the job's change reach it.
		b.pass(t, 200*time.Millisecond)
		j := b.claimOne(t, topic, dueWait)
		require.Equal(t, urgent.ID, j.ID, "the urgent job first, %s", what)
		require.Equal(t, attempt, j.Attempt, what)
		require.Equal(t, urgent.Priority, j.Priority, what)
		return j
	}
	j := claimUrgent("at first", 1)
	_, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: j.ID, Lease: j.Lease, Error: "again"})
	require.NoError(t, err)
	j = claimUrgent("after a retry", 2)
	b.passUntil(t, j.LeaseExpiresAt.Add(100*time.Millisecond))
	j = claimUrgent("after its lease expired", 3)
	_, err = b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: j.ID, Lease: j.Lease, Error: "dead"})
	require.NoError(t, err)
	require.NoError(t, b.store.RequeueJob(b.ctx, urgent.ID))
	j = claimUrgent("after a requeue", 1)
	require.NoError(t, ack(b, j))

	// Replacing the normal job with an urgent priority moves it ahead of a
	// job due earlier; nothing of its old place is left to claim.
	first := NewJob(topic, now.Add(-5*time.Second))
	first.Priority = -1
	b.put(t, first)
	moved := normal.Clone()
	moved.Priority = -2
	res := b.putResults(t, true, moved)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	b.pass(t, 200*time.Millisecond)
	got := claimUntil(t, b.ctx, b.store, topic, 2, 10, dueWait)
	require.Equal(t, []string{normal.ID, first.ID}, ids(got), "replaced with a new priority")
	require.Equal(t, -2, got[0].Priority)
	require.Empty(t, b.claim(t, topic, 10, 0), "nothing left: not the cancelled job, not the replaced job's old place")
}
