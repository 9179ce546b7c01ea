package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// testCancelRunning: CancelJob with Running cancels a reserved job: it is
// cancelled, its attempt ended cancelled, every settling call of its lease
// gets ErrLeaseLost, a second cancel ErrNotFound, and it is never claimed
// again; its slot under InFlightMax is free at once (within
// InFlightRecheck on shared stores). Without Running a reserved job is a
// conflict that changes nothing, and with it a job not reserved is
// cancelled as without.
func testCancelRunning(t *testing.T, b *testBundle) {
	const topic = "cancel.running"
	running, next := DueJob(topic), DueJob(topic)
	running.Priority = -1
	queued := NewJob(topic, time.Now().Add(time.Hour))
	b.put(t, running, next, queued)
	from := time.Now()
	jobs, err := b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: 1, Wait: dueWait, InFlightMax: 1, Via: core.ViaPull})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	c := jobs[0]
	require.Equal(t, running.ID, c.ID)

	err = b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: c.ID})
	requireConflict(t, err, c)
	b.requireState(t, c.ID, core.StateReserved)

	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: c.ID, Running: true}))
	to := time.Now()
	got := b.requireState(t, c.ID, core.StateCancelled)
	require.Empty(t, got.Lease)
	require.True(t, got.LeaseExpiresAt.IsZero())
	require.Equal(t, 1, got.Attempt)
	requireHistory(t, got, wantAttempt{attempt: 1, via: core.ViaPull, outcome: core.OutcomeCancelled, from: from, to: to, endsBy: to})

	require.ErrorIs(t, ack(b, c), core.ErrLeaseLost, "ack")
	require.ErrorIs(t, settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, Error: "x"})), core.ErrLeaseLost, "retry")
	require.ErrorIs(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "x"})), core.ErrLeaseLost, "bury")
	_, err = b.store.TouchJob(b.ctx, &core.TouchJobParams{ID: c.ID, Lease: c.Lease})
	require.ErrorIs(t, err, core.ErrLeaseLost, "touch")
	require.ErrorIs(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: c.ID, Running: true}), core.ErrNotFound, "second cancel")

	// The slot is free: the next job is claimed under InFlightMax 1, and
	// the cancelled one never again.
	jobs, err = b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: 2, Wait: dueWait, InFlightMax: 1})
	require.NoError(t, err)
	require.Equal(t, []string{next.ID}, ids(jobs))
	b.requireCounts(t, topic, core.Counts{Scheduled: 1, Reserved: 1, Cancelled: 1})

	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: queued.ID, Running: true}), "a scheduled job")
	b.requireState(t, queued.ID, core.StateCancelled)
	require.ErrorIs(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: core.NewID(), Running: true}), core.ErrNotFound, "unknown")
}
