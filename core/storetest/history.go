package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// claimVia claims exactly one job of topic as a transport would, saying
// how it delivers it.
func (b *testBundle) claimVia(t *testing.T, topic, via string, wait time.Duration) *core.Job {
	t.Helper()
	jobs, err := b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: 1, Wait: wait, Via: via})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "claim on %s", topic)
	requireClaimed(t, jobs[0], topic)
	return jobs[0]
}

// wantAttempt is what a test expects of one attempt of a History: the
// times within [from, to] (give or take clockSlack), ended when outcome
// is set.
type wantAttempt struct {
	attempt          int
	via, outcome     string
	err              string
	started, ended   time.Time // exact (at store precision) when set
	from, to, endsBy time.Time // bounds: started in [from, to], ended in [from, endsBy]
}

// requireHistory requires j's History to be want, oldest first.
func requireHistory(t *testing.T, j *core.Job, want ...wantAttempt) {
	t.Helper()
	require.Len(t, j.History, len(want), "history of %s: %+v", j.ID, j.History)
	for k, w := range want {
		a := j.History[k]
		what := func(f string) string { return fmt.Sprintf("history[%d].%s of %s", k, f, j.ID) }
		require.Equal(t, w.attempt, a.Attempt, what("attempt"))
		require.Equal(t, w.via, a.Via, what("via"))
		require.Equal(t, w.outcome, a.Outcome, what("outcome"))
		require.Equal(t, w.err, a.Error, what("error"))
		require.Equal(t, time.UTC, a.StartedAt.Location(), what("started_at in UTC"))
		if !w.started.IsZero() {
			require.True(t, core.StoreTime(w.started).Equal(a.StartedAt), "%s: want %s, got %s", what("started_at"), w.started, a.StartedAt)
		} else if !w.from.IsZero() {
			requireBetween(t, a.StartedAt, w.from, w.to, clockSlack, what("started_at"))
		}
		switch {
		case w.outcome == "":
			require.True(t, a.EndedAt.IsZero(), "%s of an attempt in progress: %s", what("ended_at"), a.EndedAt)
		case !w.ended.IsZero():
			require.True(t, core.StoreTime(w.ended).Equal(a.EndedAt), "%s: want %s, got %s", what("ended_at"), w.ended, a.EndedAt)
		default:
			require.False(t, a.EndedAt.IsZero(), what("ended_at"))
			require.False(t, a.EndedAt.Before(a.StartedAt), "%s before started_at", what("ended_at"))
			if !w.endsBy.IsZero() {
				requireBetween(t, a.EndedAt, w.from, w.endsBy, clockSlack, what("ended_at"))
			}
		}
	}
}

// testHistory: claim, retry, claim, ack gives two attempts, each with its
// via, times, outcome and error; the attempt in progress shows, unended,
// in what the claim returns and what GetJob reports.
func testHistory(t *testing.T, b *testBundle) {
	const topic = "history"
	job := DueJob(topic)
	b.put(t, job)
	require.Empty(t, b.get(t, job.ID).History, "history of a job never delivered")

	t0 := time.Now()
	c1 := b.claimVia(t, topic, core.ViaPull, dueWait)
	t1 := time.Now()
	first := wantAttempt{attempt: 1, via: core.ViaPull, from: t0, to: t1}
	requireHistory(t, c1, first)
	requireHistory(t, b.get(t, job.ID), first)

	_, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c1.ID, Lease: c1.Lease, Error: "boom"})
	require.NoError(t, err)
	t2 := time.Now()
	first.outcome, first.err, first.endsBy = core.OutcomeRetried, "boom", t2
	got := b.requireState(t, job.ID, core.StateReady)
	requireHistory(t, got, first)

	c2 := b.claimVia(t, topic, core.ViaWebSocket, dueWait)
	t3 := time.Now()
	second := wantAttempt{attempt: 2, via: core.ViaWebSocket, from: t2, to: t3}
	requireHistory(t, c2, first, second)
	require.NoError(t, ack(b, c2))
	second.outcome, second.endsBy = core.OutcomeAcked, time.Now()
	requireHistory(t, b.requireState(t, job.ID, core.StateDone), first, second)
	require.False(t, got.History[0].EndedAt.After(b.get(t, job.ID).History[1].StartedAt), "attempts out of order")
}

// testHistoryLeaseExpired: a lease that ran out reads as a lease_expired
// attempt ended at the lease's expiry, as of now (as GetJob reports the
// state), before any claim or sweep wrote it; the next attempt follows it,
// and the last attempt's expiry leaves the job dead with both.
func testHistoryLeaseExpired(t *testing.T, b *testBundle) {
	const topic = "history-expiry"
	job := shortJob(topic)
	job.MaxAttempts = 2
	b.put(t, job)
	c1 := b.claimVia(t, topic, core.ViaGRPC, dueWait)
	b.passUntil(t, c1.LeaseExpiresAt.Add(200*time.Millisecond))

	first := wantAttempt{attempt: 1, via: core.ViaGRPC, outcome: core.OutcomeLeaseExpired, started: c1.History[0].StartedAt, ended: c1.LeaseExpiresAt}
	got := b.requireState(t, job.ID, core.StateReady)
	require.Equal(t, core.LeaseExpired, got.LastError)
	requireHistory(t, got, first)

	c2 := b.claimVia(t, topic, core.ViaWebhook, dueWait)
	second := wantAttempt{attempt: 2, via: core.ViaWebhook, started: c2.History[1].StartedAt}
	requireHistory(t, c2, first, second)
	require.Empty(t, b.claim(t, topic, 1, time.Until(c2.LeaseExpiresAt.Add(600*time.Millisecond))), "delivered past max_attempts")
	second.outcome, second.ended = core.OutcomeLeaseExpired, c2.LeaseExpiresAt
	requireHistory(t, b.requireState(t, job.ID, core.StateDead), first, second)
}

// testHistoryBuryRequeue: a bury ends the attempt buried with its error;
// a requeue keeps the history, and the attempts after it count from 1
// again.
func testHistoryBuryRequeue(t *testing.T, b *testBundle) {
	const topic = "history-bury"
	job := DueJob(topic)
	b.put(t, job)
	c1 := b.claimVia(t, topic, core.ViaNATS, dueWait)
	_, err := b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c1.ID, Lease: c1.Lease, Error: "fatal"})
	require.NoError(t, err)
	first := wantAttempt{attempt: 1, via: core.ViaNATS, outcome: core.OutcomeBuried, err: "fatal", started: c1.History[0].StartedAt}
	requireHistory(t, b.requireState(t, job.ID, core.StateDead), first)
	dead := listDead(t, b, topic, 10)
	require.Len(t, dead, 1)
	requireHistory(t, dead[0], first)

	require.NoError(t, b.store.RequeueJob(b.ctx, job.ID))
	requireHistory(t, b.requireState(t, job.ID, core.StateReady), first)
	c2 := b.claimVia(t, topic, core.ViaPull, dueWait)
	require.Equal(t, 1, c2.Attempt)
	require.NoError(t, ack(b, c2))
	requireHistory(t, b.get(t, job.ID), first, wantAttempt{attempt: 1, via: core.ViaPull, outcome: core.OutcomeAcked})
}

// testHistoryCap: History keeps the last core.HistoryMax attempts, the
// oldest dropped.
func testHistoryCap(t *testing.T, b *testBundle) {
	const topic = "history-cap"
	n := core.HistoryMax + 3
	job := DueJob(topic)
	job.MaxAttempts = n
	b.put(t, job)
	for k := 1; k <= n; k++ {
		c := b.claimVia(t, topic, core.ViaPull, dueWait)
		require.Equal(t, k, c.Attempt)
		require.Len(t, c.History, min(k, core.HistoryMax), "history of claim %d", k)
		if k < n {
			_, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, Error: "again"})
			require.NoError(t, err)
			continue
		}
		require.NoError(t, ack(b, c))
	}
	var want []wantAttempt
	for k := n - core.HistoryMax + 1; k <= n; k++ {
		w := wantAttempt{attempt: k, via: core.ViaPull, outcome: core.OutcomeRetried, err: "again"}
		if k == n {
			w.outcome, w.err = core.OutcomeAcked, ""
		}
		want = append(want, w)
	}
	requireHistory(t, b.get(t, job.ID), want...)
}

// testHistoryReplace: a replace starts the history over, as it starts the
// attempt count over, and so does a put that reuses a finished job's id.
func testHistoryReplace(t *testing.T, b *testBundle) {
	const topic = "history-replace"
	job := DueJob(topic)
	done := DueJob(topic)
	b.put(t, job, done)
	for range 2 {
		c := b.claimVia(t, topic, core.ViaPull, dueWait)
		if c.ID == job.ID {
			_, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, Error: "x", RunAt: time.Now().Add(time.Hour)})
			require.NoError(t, err)
			continue
		}
		require.NoError(t, ack(b, c))
	}
	require.Len(t, b.get(t, job.ID).History, 1)
	require.Len(t, b.requireState(t, done.ID, core.StateDone).History, 1)

	res := b.putResults(t, true, job.Clone(), done.Clone())
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	require.NoError(t, res[1].Err)
	for _, id := range []string{job.ID, done.ID} {
		got := b.requireState(t, id, core.StateReady)
		require.Equal(t, 0, got.Attempt)
		require.Empty(t, got.History, "history of %s after the put", id)
	}
	c := b.claimVia(t, topic, core.ViaWebSocket, dueWait)
	require.Len(t, c.History, 1)
	require.Equal(t, core.ViaWebSocket, c.History[0].Via)
}

// testExportImportHistory: an export carries each job's History; an
// import keeps it, ending an attempt in progress (a reserved job's, whose
// lease went with the old store) as lease_expired.
func testExportImportHistory(t *testing.T, b *testBundle) {
	const topic = "history-export"
	job := DueJob(topic)
	b.put(t, job)
	c := b.claimVia(t, topic, core.ViaPull, dueWait)
	_, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, Error: "boom"})
	require.NoError(t, err)
	c = b.claimVia(t, topic, core.ViaGRPC, dueWait)

	// A replicated store's export may read a replica a moment behind (the
	// NATS store on a cluster): export until it shows the claim, bounded.
	var exported *core.Job
	for deadline := time.Now().Add(10 * time.Second); ; {
		exported = b.export(t)[job.ID]
		if exported != nil && exported.State == core.StateReserved || time.Now().After(deadline) {
			break
		}
		b.pass(t, 50*time.Millisecond)
	}
	require.NotNil(t, exported)
	require.Equal(t, core.StateReserved, exported.State, "the export shows the claim")
	first := wantAttempt{attempt: 1, via: core.ViaPull, outcome: core.OutcomeRetried, err: "boom", started: c.History[0].StartedAt, ended: c.History[0].EndedAt}
	requireHistory(t, exported, first, wantAttempt{attempt: 2, via: core.ViaGRPC, started: c.History[1].StartedAt})

	into := b.fresh(t)
	before := time.Now()
	require.Equal(t, []bool{true}, into.importJobs(t, exported))
	got := into.requireState(t, job.ID, core.StateReady)
	requireHistory(t, got, first, wantAttempt{attempt: 2, via: core.ViaGRPC, outcome: core.OutcomeLeaseExpired,
		started: c.History[1].StartedAt, from: before, endsBy: time.Now()})
	again := into.claimVia(t, topic, core.ViaWebhook, dueWait)
	require.Equal(t, 3, again.Attempt)
	require.Len(t, again.History, 3)
	require.Equal(t, core.ViaWebhook, again.History[2].Via)
}

// testRetryUnsent: a retry of a delivery that never reached its destination
// (RetryJobParams.Unsent) gives its attempt back: the job is due again with
// Attempt one lower, the attempt ends released in the history, the settle
// result says so, and a job on its last attempt is delivered once more
// rather than dead.
func testRetryUnsent(t *testing.T, b *testBundle) {
	const topic = "retry-unsent"
	job := DueJob(topic)
	job.MaxAttempts = 1
	b.put(t, job)
	c1 := b.claimVia(t, topic, core.ViaWebhook, dueWait)
	require.Equal(t, 1, c1.Attempt)
	res, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c1.ID, Lease: c1.Lease, Error: "not sent", Unsent: true})
	require.NoError(t, err)
	require.Equal(t, core.SettleResult{Topic: topic, Attempt: 0, State: core.StateReady}, res)
	first := wantAttempt{attempt: 1, via: core.ViaWebhook, outcome: core.OutcomeReleased, err: "not sent", started: c1.History[0].StartedAt}
	got := b.requireState(t, job.ID, core.StateReady)
	require.Equal(t, 0, got.Attempt)
	require.Equal(t, "not sent", got.LastError)
	requireHistory(t, got, first)

	c2 := b.claimVia(t, topic, core.ViaWebhook, dueWait)
	require.Equal(t, 1, c2.Attempt, "the attempt given back is counted again")
	require.NoError(t, ack(b, c2))
	requireHistory(t, b.get(t, job.ID), first, wantAttempt{attempt: 1, via: core.ViaWebhook, outcome: core.OutcomeAcked})
}
