package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// shortJob returns a due job of topic with the shortest TTR, 1s.
func shortJob(topic string) *core.Job {
	j := DueJob(topic)
	j.TTR = core.TTRMin
	return j
}

func contextWithTimeout(b *testBundle, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, d)
}

func listDead(t *testing.T, b *testBundle, topic string, limit int) []*core.Job {
	t.Helper()
	jobs, err := b.store.ListDeadJobs(b.ctx, &core.ListDeadJobsParams{Topic: topic, Limit: limit})
	require.NoError(t, err)
	require.LessOrEqual(t, len(jobs), limit, "more dead jobs than Limit")
	for _, j := range jobs {
		require.Equal(t, topic, j.Topic, "dead job %s of another topic", j.ID)
		require.Equal(t, core.StateDead, j.State, "listed dead job %s", j.ID)
	}
	return jobs
}

func ack(b *testBundle, j *core.Job) error {
	return settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease}))
}

// testLeaseExpiryRedelivery: a job not acknowledged within its TTR is
// claimed again with the next attempt and a new lease; the old lease is
// lost, the new one acknowledges.
func testLeaseExpiryRedelivery(t *testing.T, b *testBundle) {
	const topic = "expiry"
	job := shortJob(topic)
	b.put(t, job)
	first := b.claimOne(t, topic, dueWait)
	require.Equal(t, 1, first.Attempt)

	second := b.claimOne(t, topic, 3*time.Second)
	at := time.Now()
	require.Equal(t, job.ID, second.ID)
	require.Equal(t, 2, second.Attempt)
	require.NotEqual(t, first.Lease, second.Lease, "redelivery with the same lease")
	require.True(t, second.LeaseExpiresAt.After(first.LeaseExpiresAt), "new lease expires later")
	require.False(t, at.Before(first.LeaseExpiresAt.Add(-clockSlack)), "redelivered %s before the lease expired",
		first.LeaseExpiresAt.Sub(at))
	requireSameJob(t, job, second)

	require.ErrorIs(t, ack(b, first), core.ErrLeaseLost, "ack with the expired lease")
	require.ErrorIs(t, ack(b, first), core.ErrConflict, "ErrLeaseLost is a conflict")
	b.requireState(t, job.ID, core.StateReserved)
	require.NoError(t, ack(b, second))
	got := b.requireState(t, job.ID, core.StateDone)
	require.Equal(t, 2, got.Attempt)
	require.ErrorIs(t, ack(b, second), core.ErrLeaseLost, "second ack of a done job")
	b.requireCounts(t, topic, core.Counts{Done: 1})
}

// testLeaseLostAfterExpiry: once the TTR passed, the lease is lost even if
// no one claimed the job again; the job is not lost.
func testLeaseLostAfterExpiry(t *testing.T, b *testBundle) {
	const topic = "lost"
	job := shortJob(topic)
	b.put(t, job)
	c := b.claimOne(t, topic, dueWait)
	b.passUntil(t, c.LeaseExpiresAt.Add(300*time.Millisecond))

	require.ErrorIs(t, ack(b, c), core.ErrLeaseLost, "ack")
	_, err := b.store.TouchJob(b.ctx, &core.TouchJobParams{ID: c.ID, Lease: c.Lease})
	require.ErrorIs(t, err, core.ErrLeaseLost, "touch")
	require.ErrorIs(t, settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, RunAt: time.Now(), Error: "x"})),
		core.ErrLeaseLost, "retry")
	require.ErrorIs(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "x"})),
		core.ErrLeaseLost, "bury")

	again := b.claimOne(t, topic, 3*time.Second)
	require.Equal(t, job.ID, again.ID)
	require.Equal(t, 2, again.Attempt)
	require.NoError(t, ack(b, again))
}

// testWrongLease: a lease that is not the job's current one acknowledges
// nothing and leaves the delivery alone.
func testWrongLease(t *testing.T, b *testBundle) {
	const topic = "wrong"
	ready := NewJob(topic, time.Now().Add(time.Hour))
	job := DueJob(topic)
	b.put(t, ready, job)
	c := b.claimOne(t, topic, dueWait)
	require.Equal(t, job.ID, c.ID)
	bogus := c.Lease + "x"

	require.ErrorIs(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: c.ID, Lease: bogus})), core.ErrLeaseLost, "ack")
	require.ErrorIs(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: c.ID})), core.ErrLeaseLost, "ack without lease")
	_, err := b.store.TouchJob(b.ctx, &core.TouchJobParams{ID: c.ID, Lease: bogus})
	require.ErrorIs(t, err, core.ErrLeaseLost, "touch")
	require.ErrorIs(t, settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: bogus, RunAt: time.Now()})), core.ErrLeaseLost, "retry")
	require.ErrorIs(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: bogus})), core.ErrLeaseLost, "bury")
	// Another job's lease is no lease for this one.
	require.ErrorIs(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: ready.ID, Lease: c.Lease})), core.ErrLeaseLost, "ack of an unclaimed job")
	b.requireState(t, ready.ID, core.StateScheduled)

	got := b.requireState(t, c.ID, core.StateReserved)
	require.Equal(t, 1, got.Attempt)
	require.NoError(t, ack(b, c))
}

// testTouchExtendsLease: a touch before expiry moves the lease's expiry to
// now + TTR, and the job is not claimed again before the new expiry.
func testTouchExtendsLease(t *testing.T, b *testBundle) {
	const topic = "touch"
	job := shortJob(topic)
	b.put(t, job)
	c := b.claimOne(t, topic, dueWait)

	b.passUntil(t, c.LeaseExpiresAt.Add(-500*time.Millisecond))
	before := time.Now()
	touched, err := b.store.TouchJob(b.ctx, &core.TouchJobParams{ID: c.ID, Lease: c.Lease})
	after := time.Now()
	require.NoError(t, err)
	require.Equal(t, c.ID, touched.ID)
	require.Equal(t, core.StateReserved, touched.State)
	require.Equal(t, 1, touched.Attempt, "a touch is no new attempt")
	requireBetween(t, touched.LeaseExpiresAt, before.Add(job.TTR), after.Add(job.TTR), clockSlack, "touched lease_expires_at")
	require.True(t, touched.LeaseExpiresAt.After(c.LeaseExpiresAt))

	// Past the old expiry, before the new one: not claimable, and the lease
	// still acknowledges.
	wait := time.Until(touched.LeaseExpiresAt.Add(-250 * time.Millisecond))
	require.Greater(t, wait, time.Until(c.LeaseExpiresAt), "the test ran too slowly to tell the expiries apart")
	require.Empty(t, b.claim(t, topic, 1, wait), "claimed again before the touched lease expired")
	require.True(t, time.Now().After(c.LeaseExpiresAt), "the test ran too fast")
	require.NoError(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: c.ID, Lease: c.Lease})), "ack after the old expiry")
	got := b.requireState(t, c.ID, core.StateDone)
	require.Equal(t, 1, got.Attempt)
}

// testRetry: RetryJob schedules the job again at RunAt with LastError; it is
// claimed after RunAt with the next attempt and the error kept.
func testRetry(t *testing.T, b *testBundle) {
	const topic = "retry"
	job := DueJob(topic)
	b.put(t, job)
	c := b.claimOne(t, topic, dueWait)

	runAt := core.StoreTime(time.Now().Add(400 * time.Millisecond))
	require.NoError(t, settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, RunAt: runAt, Error: "boom"})))
	got := b.requireState(t, c.ID, core.StateScheduled)
	require.True(t, runAt.Equal(got.RunAt), "run_at after retry: want %s, got %s", runAt, got.RunAt)
	require.Equal(t, "boom", got.LastError)
	require.Equal(t, 1, got.Attempt)
	require.Empty(t, got.Lease, "a scheduled job holds no lease")
	require.ErrorIs(t, ack(b, c), core.ErrLeaseLost, "the retried delivery's lease")
	b.requireCounts(t, topic, core.Counts{Scheduled: 1})
	require.Empty(t, b.claim(t, topic, 1, 0), "claimable before the retry's run_at")

	again := b.claimOne(t, topic, 2*time.Second)
	require.False(t, time.Now().Before(runAt.Add(-earlySlack)), "claimed before the retry's run_at")
	require.Equal(t, 2, again.Attempt)
	require.Equal(t, "boom", again.LastError, "last_error kept on the next delivery")
	requireSameJob(t, &core.Job{ID: job.ID, Topic: job.Topic, Body: job.Body, RunAt: runAt, TTR: job.TTR,
		MaxAttempts: job.MaxAttempts}, again)

	// A retry due at once is ready at once.
	require.NoError(t, settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: again.ID, Lease: again.Lease, RunAt: time.Now().Add(-time.Second), Error: "bang"})))
	third := b.claimOne(t, topic, dueWait)
	require.Equal(t, 3, third.Attempt)
	require.Equal(t, "bang", third.LastError)
	require.NoError(t, ack(b, third))
}

// testSettleResult: AckJob, RetryJob and BuryJob return the settled job's
// topic, the attempt that ended and the state the call left it in (what
// decorators label an outcome with), the state GetJob then reports; a call
// that fails returns the zero SettleResult.
func testSettleResult(t *testing.T, b *testBundle) {
	const topic = "settle.result"
	jobs := []*core.Job{DueJob(topic), DueJob(topic), DueJob(topic)}
	b.put(t, jobs...)
	claimed := claimUntil(t, b.ctx, b.store, topic, 3, 3, dueWait)
	acked, later, now := claimed[0], claimed[1], claimed[2]
	check := func(what string, got core.SettleResult, err error, id string, want core.SettleResult) {
		t.Helper()
		require.NoError(t, err, what)
		require.Equal(t, want, got, what)
		b.requireState(t, id, want.State)
	}

	res, err := b.store.AckJob(b.ctx, &core.AckJobParams{ID: acked.ID, Lease: acked.Lease})
	check("ack", res, err, acked.ID, core.SettleResult{Topic: topic, Attempt: 1, State: core.StateDone})
	res, err = b.store.AckJob(b.ctx, &core.AckJobParams{ID: acked.ID, Lease: acked.Lease})
	require.ErrorIs(t, err, core.ErrLeaseLost, "second ack")
	require.Zero(t, res, "the result of a failed ack")

	res, err = b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: later.ID, Lease: later.Lease,
		RunAt: time.Now().Add(time.Hour), Error: "later"})
	check("retry later", res, err, later.ID, core.SettleResult{Topic: topic, Attempt: 1, State: core.StateScheduled})
	res, err = b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: later.ID, Lease: later.Lease, Error: "again"})
	require.ErrorIs(t, err, core.ErrLeaseLost, "second retry")
	require.Zero(t, res, "the result of a failed retry")

	res, err = b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: now.ID, Lease: now.Lease, Error: "now"})
	check("retry now", res, err, now.ID, core.SettleResult{Topic: topic, Attempt: 1, State: core.StateReady})
	again := b.claimOne(t, topic, dueWait)
	require.Equal(t, now.ID, again.ID)
	res, err = b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: again.ID, Lease: again.Lease, Error: "boom"})
	check("bury", res, err, again.ID, core.SettleResult{Topic: topic, Attempt: 2, State: core.StateDead})
	res, err = b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: again.ID, Lease: again.Lease, Error: "boom"})
	require.ErrorIs(t, err, core.ErrLeaseLost, "second bury")
	require.Zero(t, res, "the result of a failed bury")

	res, err = b.store.AckJob(b.ctx, &core.AckJobParams{ID: core.NewID(), Lease: "x"})
	require.ErrorIs(t, err, core.ErrNotFound, "ack of an unknown job")
	require.Zero(t, res, "the result of an ack of an unknown job")
}

// testBuryAndDeadList: BuryJob makes the job dead with LastError; dead jobs
// are listed oldest death first, per topic, up to Limit, and counted.
func testBuryAndDeadList(t *testing.T, b *testBundle) {
	const topic = "bury"
	var jobs []*core.Job
	for i := range 3 {
		jobs = append(jobs, NewJob(topic, time.Now().Add(time.Duration(i-10)*time.Second)))
	}
	other := DueJob(topic + ".other")
	b.put(t, append(jobs, other)...)
	claimed := claimUntil(t, b.ctx, b.store, topic, 3, 3, dueWait)
	require.Equal(t, ids(jobs), ids(claimed))
	require.Empty(t, listDead(t, b, topic, 10), "no dead job yet")

	// Bury in reverse run_at order, so death order differs from run_at order.
	for i := 2; i >= 0; i-- {
		c := claimed[i]
		require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: fmt.Sprintf("error %d", i)})))
		require.ErrorIs(t, ack(b, c), core.ErrLeaseLost, "ack after bury")
	}
	c := b.claimOne(t, other.Topic, dueWait)
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "other"})))

	dead := listDead(t, b, topic, 10)
	require.Equal(t, []string{jobs[2].ID, jobs[1].ID, jobs[0].ID}, ids(dead), "dead jobs oldest death first")
	for i, j := range dead {
		require.Equal(t, fmt.Sprintf("error %d", 2-i), j.LastError)
		require.Equal(t, 1, j.Attempt)
		requireSameJob(t, jobs[2-i], j)
	}
	require.Equal(t, []string{jobs[2].ID, jobs[1].ID}, ids(listDead(t, b, topic, 2)), "Limit")
	require.Equal(t, []string{other.ID}, ids(listDead(t, b, other.Topic, 10)))
	b.requireCounts(t, topic, core.Counts{Dead: 3})
	b.requireCounts(t, other.Topic, core.Counts{Dead: 1})
	require.Empty(t, b.claim(t, topic, 10, 0), "a dead job was claimed")
}

// testLeaseExpiryLastAttempt: a lease that expires on the job's last attempt
// sends the job dead with LastError "lease expired" instead of delivering it
// again.
func testLeaseExpiryLastAttempt(t *testing.T, b *testBundle) {
	const topic = "last"
	job := shortJob(topic)
	job.MaxAttempts = 2
	b.put(t, job)
	first := b.claimOne(t, topic, dueWait)
	require.Equal(t, 1, first.Attempt)
	second := b.claimOne(t, topic, 3*time.Second)
	require.Equal(t, 2, second.Attempt)

	wait := time.Until(second.LeaseExpiresAt.Add(600 * time.Millisecond))
	require.Empty(t, b.claim(t, topic, 1, wait), "delivered past max_attempts")
	got := b.requireState(t, job.ID, core.StateDead)
	require.Equal(t, core.LeaseExpired, got.LastError)
	require.Equal(t, 2, got.Attempt)
	require.ErrorIs(t, ack(b, second), core.ErrLeaseLost)
	require.Equal(t, []string{job.ID}, ids(listDead(t, b, topic, 10)))
	b.requireCounts(t, topic, core.Counts{Dead: 1})
}

// testRequeue: RequeueJob makes a dead job ready now with a fresh attempt
// count; other states conflict, unknown ids are not found.
func testRequeue(t *testing.T, b *testBundle) {
	const topic = "requeue"
	job := DueJob(topic)
	job.MaxAttempts = 1
	scheduled := NewJob(topic, time.Now().Add(time.Hour))
	b.put(t, job, scheduled)
	c := b.claimOne(t, topic, dueWait)
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "boom"})))

	require.ErrorIs(t, b.store.RequeueJob(b.ctx, scheduled.ID), core.ErrConflict, "requeue of a scheduled job")
	require.ErrorIs(t, b.store.RequeueJob(b.ctx, core.NewID()), core.ErrNotFound, "requeue of an unknown job")

	require.NoError(t, b.store.RequeueJob(b.ctx, job.ID))
	got := b.requireState(t, job.ID, core.StateReady)
	require.Equal(t, 0, got.Attempt, "requeue resets the attempt count")
	require.Empty(t, listDead(t, b, topic, 10))
	b.requireCounts(t, topic, core.Counts{Scheduled: 1, Ready: 1})

	again := b.claimOne(t, topic, dueWait)
	require.Equal(t, job.ID, again.ID)
	require.Equal(t, 1, again.Attempt)
	require.Equal(t, string(job.Body), string(again.Body))
	require.ErrorIs(t, b.store.RequeueJob(b.ctx, job.ID), core.ErrConflict, "requeue of a reserved job")
	require.NoError(t, ack(b, again))
}

// testAckBatch: AckJobs settles each ack as AckJob would, in order, with a
// result of its own: acks of two topics together, a wrong lease, an
// unknown id and an unclaimed job in the middle fail alone, an id acked
// twice settles once, and the failed acks change nothing.
func testAckBatch(t *testing.T, b *testBundle) {
	const topicA, topicB = "ackbatch.a", "ackbatch.b"
	b.put(t, DueJob(topicA), DueJob(topicA), DueJob(topicA), DueJob(topicB))
	unclaimed := NewJob(topicA, time.Now().Add(time.Hour))
	b.put(t, unclaimed)
	a := claimUntil(t, b.ctx, b.store, topicA, 3, 3, dueWait)
	c := b.claimOne(t, topicB, dueWait)

	acks := []core.AckJobParams{
		{ID: a[0].ID, Lease: a[0].Lease},
		{ID: a[1].ID, Lease: a[1].Lease + "x"},
		{ID: core.NewID(), Lease: a[1].Lease},
		{ID: c.ID, Lease: c.Lease},
		{ID: a[0].ID, Lease: a[0].Lease},
		{ID: unclaimed.ID, Lease: a[2].Lease},
		{ID: a[2].ID, Lease: a[2].Lease},
	}
	res, err := b.store.AckJobs(b.ctx, &core.AckJobsParams{Acks: acks})
	require.NoError(t, err)
	require.Len(t, res, len(acks), "one result per ack")
	done := func(topic string) core.SettleResult {
		return core.SettleResult{Topic: topic, Attempt: 1, State: core.StateDone}
	}
	for i, want := range []struct {
		settled core.SettleResult
		err     error
	}{
		{done(topicA), nil},
		{err: core.ErrLeaseLost},
		{err: core.ErrNotFound},
		{done(topicB), nil},
		{err: core.ErrLeaseLost},
		{err: core.ErrLeaseLost},
		{done(topicA), nil},
	} {
		if want.err != nil {
			require.ErrorIs(t, res[i].Err, want.err, "ack %d", i)
			require.Zero(t, res[i].Settled, "the result of failed ack %d", i)
			continue
		}
		require.NoError(t, res[i].Err, "ack %d", i)
		require.Equal(t, want.settled, res[i].Settled, "ack %d", i)
	}
	b.requireState(t, a[0].ID, core.StateDone)
	b.requireState(t, a[2].ID, core.StateDone)
	b.requireState(t, c.ID, core.StateDone)
	b.requireState(t, a[1].ID, core.StateReserved)
	b.requireState(t, unclaimed.ID, core.StateScheduled)
	b.requireCounts(t, topicA, core.Counts{Scheduled: 1, Reserved: 1, Done: 2})
	b.requireCounts(t, topicB, core.Counts{Done: 1})

	// A later batch: the finished job's ack is lost, the left one settles.
	res, err = b.store.AckJobs(b.ctx, &core.AckJobsParams{Acks: []core.AckJobParams{
		{ID: a[0].ID, Lease: a[0].Lease}, {ID: a[1].ID, Lease: a[1].Lease},
	}})
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.ErrorIs(t, res[0].Err, core.ErrLeaseLost, "ack of a done job")
	require.NoError(t, res[1].Err)
	require.Equal(t, done(topicA), res[1].Settled)
	b.requireCounts(t, topicA, core.Counts{Scheduled: 1, Done: 3})

	res, err = b.store.AckJobs(b.ctx, &core.AckJobsParams{})
	require.NoError(t, err)
	require.Empty(t, res, "no acks, no results")
}

// testDeadSince: ListDeadJobs with Since lists the deaths at or after it,
// oldest first, so that a reader follows deaths as they come.
func testDeadSince(t *testing.T, b *testBundle) {
	const topic = "dead.since"
	b.put(t, DueJob(topic), DueJob(topic), DueJob(topic))
	claimed := claimUntil(t, b.ctx, b.store, topic, 3, 3, dueWait)
	require.Len(t, claimed, 3)
	var died []*core.Job
	for _, c := range claimed {
		require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "boom"})))
		died = append(died, b.requireState(t, c.ID, core.StateDead))
		b.pass(t, 20*time.Millisecond)
	}
	since := func(at time.Time, limit int) []string {
		t.Helper()
		jobs, err := b.store.ListDeadJobs(b.ctx, &core.ListDeadJobsParams{Topic: topic, Limit: limit, Since: at})
		require.NoError(t, err)
		return ids(jobs)
	}
	require.Equal(t, ids(died), since(time.Time{}, 10))
	require.Equal(t, ids(died[1:]), since(died[1].UpdatedAt, 10), "at or after Since")
	require.Equal(t, ids(died[1:2]), since(died[1].UpdatedAt, 1), "Limit")
	require.Equal(t, ids(died[2:]), since(died[1].UpdatedAt.Add(time.Millisecond), 10))
	require.Empty(t, since(died[2].UpdatedAt.Add(time.Millisecond), 10))
}
