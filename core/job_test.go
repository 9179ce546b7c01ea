package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// The job-state rules are the stores' shared definition of each change;
// core/storetest checks that every store (and redisstore's Lua copy of
// them) applies them. These tests pin the rules themselves.

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func reservedJob(attempt, max int) *core.Job {
	return &core.Job{
		ID: "j", Topic: "t", RunAt: t0, TTR: time.Minute, MaxAttempts: max,
		Attempt: attempt, State: core.StateReserved, Lease: "l", LeaseExpiresAt: t0.Add(time.Minute),
	}
}

func TestJobAsOf(t *testing.T) {
	sched := &core.Job{State: core.StateScheduled, RunAt: t0, UpdatedAt: t0.Add(-time.Hour)}
	sched.AsOf(t0.Add(-time.Millisecond))
	require.Equal(t, core.StateScheduled, sched.State, "not due yet")
	sched.AsOf(t0)
	require.Equal(t, core.StateReady, sched.State, "due at run_at")
	require.Equal(t, t0, sched.UpdatedAt, "ready since run_at")

	held := reservedJob(1, 3)
	held.AsOf(t0.Add(time.Minute - time.Millisecond))
	require.Equal(t, core.StateReserved, held.State, "lease holds until its expiry")
	held.AsOf(t0.Add(time.Minute))
	require.Equal(t, core.StateReady, held.State)
	require.Equal(t, core.LeaseExpired, held.LastError)
	require.Empty(t, held.Lease)
	require.True(t, held.LeaseExpiresAt.IsZero())
	require.Equal(t, t0.Add(time.Minute), held.UpdatedAt, "ready since the expiry")

	last := reservedJob(3, 3)
	last.AsOf(t0.Add(time.Hour))
	require.Equal(t, core.StateDead, last.State, "an expired last attempt is dead")
	require.Equal(t, t0.Add(time.Minute), last.UpdatedAt, "dead since the expiry")

	for _, st := range []core.State{core.StateReady, core.StateDead, core.StateDone, core.StateCancelled} {
		j := &core.Job{State: st, RunAt: t0}
		j.AsOf(t0.Add(time.Hour))
		require.Equal(t, st, j.State)
	}
}

func TestJobRedelivered(t *testing.T) {
	j := reservedJob(1, 3)
	j.ExpireLease()
	j.Reserve("l2", &core.ClaimJobsParams{Via: core.ViaPull}, t0.Add(2*time.Minute))
	require.True(t, j.Redelivered())
	require.Equal(t, 2, j.Attempt)
	require.Equal(t, "l2", j.Lease)
	require.Equal(t, t0.Add(3*time.Minute), j.LeaseExpiresAt)

	j.Retry(time.Time{}, "boom", t0.Add(3*time.Minute))
	j.Reserve("l3", &core.ClaimJobsParams{Via: core.ViaPull}, t0.Add(3*time.Minute))
	require.False(t, j.Redelivered(), "a retry after a failure is not a redelivery")

	first := &core.Job{LastError: core.LeaseExpired, Attempt: 0}
	first.Reserve("l", &core.ClaimJobsParams{Via: core.ViaPull}, t0)
	require.False(t, first.Redelivered(), "a requeued job's first delivery is not one")
}

func TestJobReset(t *testing.T) {
	created := t0.Add(-time.Hour)
	j := reservedJob(2, 3)
	j.LastError = "boom"
	j.RunAt = t0.Add(1500 * time.Microsecond)
	j.Reset(created, t0)
	require.Equal(t, core.StateScheduled, j.State)
	require.Equal(t, t0.Add(time.Millisecond), j.RunAt, "store precision")
	require.Zero(t, j.Attempt)
	require.Empty(t, j.LastError)
	require.Empty(t, j.Lease)
	require.True(t, j.LeaseExpiresAt.IsZero())
	require.Equal(t, created, j.CreatedAt)
	require.Equal(t, t0, j.UpdatedAt)

	due := &core.Job{RunAt: t0}
	due.Reset(t0, t0)
	require.Equal(t, core.StateReady, due.State, "a job due now is ready at once")
}

func TestJobSettling(t *testing.T) {
	now := t0.Add(10 * time.Second)

	r := reservedJob(1, 3)
	r.Retry(time.Time{}, strings.Repeat("x", 10_000), now)
	require.Equal(t, core.StateReady, r.State, "a zero run_at retries now")
	require.Equal(t, now, r.RunAt)
	require.Less(t, len(r.LastError), 10_000, "the reason is cut")
	require.Empty(t, r.Lease)
	require.Equal(t, core.SettleResult{Topic: "t", Attempt: 1, State: core.StateReady}, r.Settled())

	r = reservedJob(1, 3)
	r.Retry(now.Add(time.Minute), "later", now)
	require.Equal(t, core.StateScheduled, r.State)
	require.Equal(t, "later", r.LastError)

	b := reservedJob(1, 3)
	b.Bury("bad", now)
	require.Equal(t, core.StateDead, b.State)
	require.Equal(t, now, b.UpdatedAt)
	require.Empty(t, b.Lease)

	b.Requeue(now.Add(time.Second))
	require.Equal(t, core.StateReady, b.State)
	require.Zero(t, b.Attempt)
	require.Equal(t, "bad", b.LastError, "a requeue keeps the last error")
	require.Equal(t, now.Add(time.Second), b.RunAt)

	a := reservedJob(1, 3)
	a.Finish(core.StateDone, now)
	require.Equal(t, core.StateDone, a.State)
	require.Empty(t, a.Lease)
	require.True(t, a.LeaseExpiresAt.IsZero())
}

func TestJobImport(t *testing.T) {
	now := t0.Add(time.Hour)

	held := reservedJob(1, 3)
	held.RunAt = now.Add(time.Hour)
	held.Import(now)
	require.Equal(t, core.StateReady, held.State, "a reserved job is ready at once")
	require.Equal(t, now, held.RunAt)
	require.Equal(t, 1, held.Attempt, "its attempt is kept")
	require.Empty(t, held.Lease)
	require.Equal(t, now, held.CreatedAt, "a missing creation time is now")

	died := t0.Add(time.Minute)
	dead := &core.Job{State: core.StateDead, RunAt: t0, UpdatedAt: died, CreatedAt: t0, LastError: "x"}
	dead.Import(now)
	require.Equal(t, died, dead.UpdatedAt, "dead since it died")
	require.Equal(t, t0, dead.CreatedAt)

	future := &core.Job{State: core.StateDead, UpdatedAt: now.Add(time.Hour)}
	future.Import(now)
	require.Equal(t, now, future.UpdatedAt, "a death in the future is now")

	sched := &core.Job{State: core.StateScheduled, RunAt: t0}
	sched.Import(now)
	require.Equal(t, core.StateReady, sched.State, "a scheduled job that is due is ready")
}

func TestJobHistory(t *testing.T) {
	j := &core.Job{ID: "j", Topic: "t", RunAt: t0, TTR: time.Minute, MaxAttempts: 30, State: core.StateReady}
	j.Reserve("l1", &core.ClaimJobsParams{Via: core.ViaPull}, t0.Add(1500*time.Microsecond))
	require.Equal(t, []core.Attempt{{Attempt: 1, StartedAt: t0.Add(time.Millisecond), Via: core.ViaPull}}, j.History,
		"a claim starts an attempt, at store precision")
	j.Retry(time.Time{}, "boom", t0.Add(time.Second))
	require.Equal(t, core.Attempt{Attempt: 1, StartedAt: t0.Add(time.Millisecond), EndedAt: t0.Add(time.Second),
		Via: core.ViaPull, Outcome: core.OutcomeRetried, Error: "boom"}, j.History[0])

	j.Reserve("l2", &core.ClaimJobsParams{Via: core.ViaWebhook}, t0.Add(2*time.Second))
	c := j.Clone()
	c.History[0].Error = "changed"
	require.Equal(t, "boom", j.History[0].Error, "Clone copies History")
	j.AsOf(t0.Add(time.Hour))
	require.Equal(t, core.StateReady, j.State)
	require.Equal(t, core.Attempt{Attempt: 2, StartedAt: t0.Add(2 * time.Second), EndedAt: t0.Add(62 * time.Second),
		Via: core.ViaWebhook, Outcome: core.OutcomeLeaseExpired}, j.History[1], "an expiry ends the attempt at the expiry")
	j.AsOf(t0.Add(2 * time.Hour))
	require.Len(t, j.History, 2)

	j.Reserve("l3", &core.ClaimJobsParams{Via: core.ViaNATS}, t0.Add(3*time.Hour))
	j.Bury("fatal", t0.Add(4*time.Hour))
	require.Equal(t, core.OutcomeBuried, j.History[2].Outcome)
	require.Equal(t, "fatal", j.History[2].Error)
	j.Requeue(t0.Add(5 * time.Hour))
	require.Len(t, j.History, 3, "a requeue keeps the history")
	j.Finish(core.StateCancelled, t0.Add(6*time.Hour))
	require.Len(t, j.History, 3, "a cancel ends no attempt")
	require.Equal(t, core.OutcomeBuried, j.History[2].Outcome)

	for k := range core.HistoryMax {
		j.Reserve("l", &core.ClaimJobsParams{Via: core.ViaGRPC}, t0.Add(time.Duration(k)*time.Minute))
		j.Finish(core.StateDone, t0.Add(time.Duration(k)*time.Minute+time.Second))
	}
	require.Len(t, j.History, core.HistoryMax, "at most HistoryMax kept")
	require.Equal(t, core.ViaGRPC, j.History[0].Via, "the oldest dropped")
	require.Equal(t, core.OutcomeAcked, j.History[core.HistoryMax-1].Outcome)

	j.Reset(t0, t0)
	require.Empty(t, j.History, "a put starts with none")
}

func TestJobImportHistory(t *testing.T) {
	j := reservedJob(2, 3)
	j.History = []core.Attempt{
		{Attempt: 1, StartedAt: t0, EndedAt: t0.Add(time.Second), Via: core.ViaPull, Outcome: core.OutcomeRetried, Error: "x"},
		{Attempt: 2, StartedAt: t0.Add(time.Minute), Via: core.ViaPull},
	}
	exported := j.Clone()
	j.Import(t0.Add(time.Hour))
	require.Equal(t, exported.History[0], j.History[0])
	require.Equal(t, core.OutcomeLeaseExpired, j.History[1].Outcome, "an attempt in progress ends with the old store's lease")
	require.Equal(t, t0.Add(time.Hour), j.History[1].EndedAt)
	require.Empty(t, exported.History[1].Outcome, "Import changes its own copy")
}
