package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// claimFrom claims exactly one job of topic as an engine named instance
// would for the consumer at address consumer, by pull.
func (b *testBundle) claimFrom(t *testing.T, topic, instance, consumer string) *core.Job {
	t.Helper()
	jobs, err := b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: 1, Wait: dueWait, Via: core.ViaPull,
		Instance: instance, Consumer: consumer})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "claim on %s", topic)
	requireClaimed(t, jobs[0], topic)
	return jobs[0]
}

// testClaimOrigin: the attempt a claim starts keeps the claim's Instance
// and Consumer, in progress and once ended, each attempt its own; a claim
// without them keeps none.
func testClaimOrigin(t *testing.T, b *testBundle) {
	const topic = "claim-origin"
	job := DueJob(topic)
	b.put(t, job)

	c := b.claimFrom(t, topic, "host-a", "127.0.0.1:40001")
	last := c.History[len(c.History)-1]
	require.Equal(t, "host-a", last.Instance, "instance of the attempt the claim returned")
	require.Equal(t, "127.0.0.1:40001", last.Consumer, "consumer of the attempt the claim returned")
	got := b.requireState(t, job.ID, core.StateReserved).History
	require.Len(t, got, 1)
	require.Equal(t, "host-a", got[0].Instance, "instance of the attempt in progress")
	require.Equal(t, "127.0.0.1:40001", got[0].Consumer, "consumer of the attempt in progress")
	_, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, Error: "again"})
	require.NoError(t, err)

	c = b.claimFrom(t, topic, "host-b", "[::1]:40002")
	require.NoError(t, ack(b, c))
	c2 := DueJob(topic)
	b.put(t, c2)
	plain := b.claimVia(t, topic, core.ViaWebhook, dueWait)
	require.NoError(t, ack(b, plain))

	h := b.requireState(t, job.ID, core.StateDone).History
	require.Len(t, h, 2)
	require.Equal(t, []string{"host-a", "127.0.0.1:40001", core.OutcomeRetried}, []string{h[0].Instance, h[0].Consumer, h[0].Outcome})
	require.Equal(t, []string{"host-b", "[::1]:40002", core.OutcomeAcked}, []string{h[1].Instance, h[1].Consumer, h[1].Outcome})
	h = b.requireState(t, c2.ID, core.StateDone).History
	require.Len(t, h, 1)
	require.Equal(t, core.ViaWebhook, h[0].Via)
	require.Empty(t, h[0].Instance+h[0].Consumer, "a claim without instance or consumer keeps none")
}

// requireChanges requires j's Changes to be of the kinds, vias and tokens
// want gives (kind, via, token each), oldest first, each at or after the
// one before.
func requireChanges(t *testing.T, j *core.Job, want ...[3]string) {
	t.Helper()
	require.Len(t, j.Changes, len(want), "changes of %s: %+v", j.ID, j.Changes)
	for k, w := range want {
		c := j.Changes[k]
		require.Equal(t, w, [3]string{c.Kind, c.Via, c.Token}, "changes[%d] of %s", k, j.ID)
		require.Equal(t, time.UTC, c.At.Location(), "changes[%d].at of %s in UTC", k, j.ID)
		require.True(t, core.StoreTime(c.At).Equal(c.At), "changes[%d].at of %s at store precision", k, j.ID)
		if k > 0 {
			require.False(t, c.At.Before(j.Changes[k-1].At), "changes[%d] of %s before the one before", k, j.ID)
		}
	}
}

// withChange returns a copy of j whose put says it came by via from token.
func withChange(j *core.Job, via, token string) *core.Job {
	c := j.Clone()
	c.Changes = []core.Change{{Kind: core.ChangeCreated, Via: via, Token: token}}
	return c
}

// testChanges: a put keeps the change it names, created, at the job's
// creation; a replace keeps the replaced job's changes and adds its own,
// replaced, at the replace; a put over a finished job starts over; a
// requeue adds requeued; a put without a change keeps a bare created; the
// oldest go past core.ChangesMax.
func testChanges(t *testing.T, b *testBundle) {
	const topic = "changes"
	job := withChange(NewJob(topic, time.Now().Add(time.Hour)), core.OriginHTTP, "team-a")
	bare := NewJob(topic, time.Now().Add(time.Hour))
	bare.Changes = nil
	b.put(t, job, bare)
	got := b.get(t, job.ID)
	requireChanges(t, got, [3]string{core.ChangeCreated, core.OriginHTTP, "team-a"})
	require.True(t, core.StoreTime(got.CreatedAt).Equal(got.Changes[0].At), "created at %s, change at %s", got.CreatedAt, got.Changes[0].At)
	requireChanges(t, b.get(t, bare.ID), [3]string{core.ChangeCreated, "", ""})

	res := b.putResults(t, true, withChange(job, core.OriginGRPC, "team-b"))
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	got = b.get(t, job.ID)
	requireChanges(t, got, [3]string{core.ChangeCreated, core.OriginHTTP, "team-a"}, [3]string{core.ChangeReplaced, core.OriginGRPC, "team-b"})
	require.True(t, core.StoreTime(got.UpdatedAt).Equal(got.Changes[1].At), "updated at %s, replaced at %s", got.UpdatedAt, got.Changes[1].At)

	// Dead, requeued, delivered and done; then a put of its id starts over.
	dead := withChange(DueJob(topic+"-dead"), core.OriginNATS, "")
	dead.MaxAttempts = 1
	b.put(t, dead)
	c := b.claimOne(t, topic+"-dead", dueWait)
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "boom"})))
	require.NoError(t, b.store.RequeueJob(b.ctx, dead.ID))
	got = b.requireState(t, dead.ID, core.StateReady)
	requireChanges(t, got, [3]string{core.ChangeCreated, core.OriginNATS, ""}, [3]string{core.ChangeRequeued, "", ""})
	require.True(t, core.StoreTime(got.UpdatedAt).Equal(got.Changes[1].At), "requeued at %s, change at %s", got.UpdatedAt, got.Changes[1].At)
	require.NoError(t, ack(b, b.claimOne(t, topic+"-dead", dueWait)))
	requireChanges(t, b.requireState(t, dead.ID, core.StateDone),
		[3]string{core.ChangeCreated, core.OriginNATS, ""}, [3]string{core.ChangeRequeued, "", ""})
	b.put(t, withChange(dead, core.OriginKafka, "k"))
	requireChanges(t, b.get(t, dead.ID), [3]string{core.ChangeCreated, core.OriginKafka, "k"})

	// The cap: the oldest go.
	for k := 2; k <= core.ChangesMax+2; k++ {
		res := b.putResults(t, true, withChange(job, core.OriginHTTP, "t"+string(rune('a'+k))))
		require.NoError(t, res[0].Err)
	}
	got = b.get(t, job.ID)
	require.Len(t, got.Changes, core.ChangesMax)
	for k, c := range got.Changes {
		want := "t" + string(rune('a'+k+3))
		require.Equal(t, [3]string{core.ChangeReplaced, core.OriginHTTP, want}, [3]string{c.Kind, c.Via, c.Token}, "changes[%d]", k)
	}
}

// testHistoryBytes: History keeps the newest attempts whose sizes
// (core.AttemptSize) fit in core.HistoryMaxBytes, as core.TrimHistory
// keeps them, when long errors fill it before core.HistoryMax attempts do.
func testHistoryBytes(t *testing.T, b *testBundle) {
	const topic = "history-bytes"
	reason := strings.Repeat("e", core.MaxErrorLen-100)
	per := core.AttemptSize(&core.Attempt{Error: reason, Instance: "host-a", Consumer: "127.0.0.1:40001"})
	n := core.HistoryMaxBytes/per + 3
	job := DueJob(topic)
	job.MaxAttempts = n
	b.put(t, job)
	var all []core.Attempt
	for k := 1; k <= n; k++ {
		c := b.claimFrom(t, topic, "host-a", "127.0.0.1:40001")
		_, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, Error: reason})
		require.NoError(t, err)
		all = append(all, core.Attempt{Attempt: k, Error: reason, Instance: "host-a", Consumer: "127.0.0.1:40001"})
	}
	want := core.TrimHistory(all)
	require.Less(t, len(want), n, "the bound drops attempts")
	h := b.get(t, job.ID).History
	require.Len(t, h, len(want))
	size := 0
	for k := range h {
		require.Equal(t, want[k].Attempt, h[k].Attempt, "history[%d]", k)
		require.Equal(t, reason, h[k].Error, "history[%d].error", k)
		size += core.AttemptSize(&h[k])
	}
	require.LessOrEqual(t, size, core.HistoryMaxBytes)
}
