package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// testExpiresAtKept: a job's ExpiresAt (ms precision) comes back from
// GetJob, every claim, ListJobs and the dead list, through a retry, an
// expired lease, a bury and a requeue, and a replace takes the new job's
// expiry, none included. The store keeps it and nothing more: an expired
// job is the engine's to end (Job.Expired). Export and import keep it
// too (testExportStates, testImportStates), and durable stores through a
// restart (testRestart).
func testExpiresAtKept(t *testing.T, b *testBundle) {
	const topic = "expiry.kept"
	expires := core.StoreTime(time.Now().Add(24 * time.Hour).Add(123 * time.Millisecond))
	j := DueJob(topic)
	j.TTR = core.TTRMin
	j.ExpiresAt = expires
	plain := NewJob(topic, time.Now().Add(time.Hour))
	b.put(t, j, plain)
	requireExpiresAt := func(want time.Time, got *core.Job, what string) {
		t.Helper()
		require.True(t, want.Equal(got.ExpiresAt), "expires_at %s: want %s, got %s", what, want, got.ExpiresAt)
	}
	requireExpiresAt(expires, b.get(t, j.ID), "after a put")
	require.True(t, b.get(t, plain.ID).ExpiresAt.IsZero(), "a job put without expiry has none")
	listed := b.requireListed(t, topic, core.StateReady, j)
	requireExpiresAt(expires, listed[0], "in the ready list")

	claim := func(what string, attempt int) *core.Job {
		t.Helper()
		c := b.claimOne(t, topic, dueWait)
		require.Equal(t, j.ID, c.ID, what)
		require.Equal(t, attempt, c.Attempt, what)
		requireExpiresAt(expires, c, "of the claim "+what)
		return c
	}
	c := claim("at first", 1)
	requireExpiresAt(expires, b.requireListed(t, topic, core.StateReserved, j)[0], "in the reserved list")
	_, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, Error: "status 503"})
	require.NoError(t, err)
	requireExpiresAt(expires, b.get(t, j.ID), "after a retry")
	c = claim("after a retry", 2)
	b.passUntil(t, c.LeaseExpiresAt.Add(100*time.Millisecond))
	c = claim("after its lease expired", 3)
	_, err = b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: core.JobExpired})
	require.NoError(t, err)
	dead := b.requireState(t, j.ID, core.StateDead)
	requireExpiresAt(expires, dead, "dead")
	require.Equal(t, core.JobExpired, dead.LastError)
	requireExpiresAt(expires, listDead(t, b, topic, 10)[0], "in the dead list")
	require.NoError(t, b.store.RequeueJob(b.ctx, j.ID))
	c = claim("after a requeue", 1)
	require.NoError(t, ack(b, c))
	requireExpiresAt(expires, b.requireState(t, j.ID, core.StateDone), "done")

	// Replace takes the new job's expiry, or none.
	later := core.StoreTime(expires.Add(time.Hour))
	moved := plain.Clone()
	moved.ExpiresAt = later
	for _, r := range b.putResults(t, true, moved) {
		require.NoError(t, r.Err)
		require.True(t, r.Replaced)
	}
	requireExpiresAt(later, b.get(t, plain.ID), "replaced by a job with an expiry")
	moved.ExpiresAt = time.Time{}
	b.putResults(t, true, moved)
	require.True(t, b.get(t, plain.ID).ExpiresAt.IsZero(), "replaced by a job without expiry")
}

// testExpireJob: ExpireJob makes a scheduled or ready job whose ExpiresAt
// has come dead with LastError JobExpired (in the dead list, counted dead,
// never claimed); a job not expired, without expiry, reserved or dead is a
// conflict that changes nothing, an unknown or finished one not found.
func testExpireJob(t *testing.T, b *testBundle) {
	const topic = "expiry.expire"
	now := time.Now()
	expires := core.StoreTime(now.Add(300 * time.Millisecond))
	soon, later, forever, held := DueJob(topic), DueJob(topic), DueJob(topic), DueJob(topic+".held")
	soon.ExpiresAt = expires
	later.ExpiresAt = core.StoreTime(now.Add(time.Hour))
	held.ExpiresAt = expires
	b.put(t, soon, later, forever, held)
	c := b.claimOne(t, held.Topic, dueWait)

	requireConflictIn := func(id string, state core.State) {
		t.Helper()
		requireConflict(t, b.store.ExpireJob(b.ctx, id), b.get(t, id))
		b.requireState(t, id, state)
	}
	requireConflictIn(soon.ID, core.StateReady)
	b.passUntil(t, expires.Add(50*time.Millisecond))
	require.NoError(t, b.store.ExpireJob(b.ctx, soon.ID))
	dead := b.requireState(t, soon.ID, core.StateDead)
	require.Equal(t, core.JobExpired, dead.LastError)
	require.Equal(t, 0, dead.Attempt)
	require.Empty(t, dead.History)
	require.Equal(t, []string{soon.ID}, ids(listDead(t, b, topic, 10)))

	requireConflictIn(soon.ID, core.StateDead)
	requireConflictIn(later.ID, core.StateReady)
	requireConflictIn(forever.ID, core.StateReady)
	requireConflictIn(c.ID, core.StateReserved)
	require.ErrorIs(t, b.store.ExpireJob(b.ctx, core.NewID()), core.ErrNotFound, "unknown")
	require.NoError(t, ack(b, c))
	require.ErrorIs(t, b.store.ExpireJob(b.ctx, c.ID), core.ErrNotFound, "finished")

	b.requireCounts(t, topic, core.Counts{Ready: 2, Dead: 1})
	require.ElementsMatch(t, []string{later.ID, forever.ID}, ids(b.claim(t, topic, 10, 0)), "the expired job is never claimed")
}
