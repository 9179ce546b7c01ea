package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// listAll walks ListJobs of topic and state by pages of limit, requiring
// each page to hold at most limit jobs of the topic in the state and no job
// twice, and returns them in the order listed.
func (b *testBundle) listAll(t *testing.T, topic string, state core.State, limit int) []*core.Job {
	t.Helper()
	var all []*core.Job
	seen := map[string]bool{}
	after := ""
	for range 1000 {
		page, err := b.store.ListJobs(b.ctx, &core.ListJobsParams{Topic: topic, State: state, After: after, Limit: limit})
		require.NoError(t, err, "list %s %s after %q", topic, state, after)
		require.NotNil(t, page.Jobs, "an empty slice, not nil")
		require.LessOrEqual(t, len(page.Jobs), limit, "more jobs than Limit")
		for _, j := range page.Jobs {
			require.Equal(t, topic, j.Topic, "listed job %s of another topic", j.ID)
			require.Equal(t, state, j.State, "listed job %s", j.ID)
			require.False(t, seen[j.ID], "job %s listed twice (%s by pages of %d)", j.ID, state, limit)
			seen[j.ID] = true
		}
		all = append(all, page.Jobs...)
		if page.Next == "" {
			return all
		}
		require.NotEqual(t, after, page.Next, "a cursor that does not move")
		after = page.Next
	}
	require.FailNow(t, "listing does not end", "%s %s", topic, state)
	return nil
}

// requireListed requires the listing of topic and state to hold want's
// jobs, each as GetJob reports it, the same by pages of 2 as in one page,
// and returns it.
func (b *testBundle) requireListed(t *testing.T, topic string, state core.State, want ...*core.Job) []*core.Job {
	t.Helper()
	got := b.listAll(t, topic, state, 1000)
	wantIDs := slices.Sorted(slices.Values(ids(want)))
	require.Equal(t, wantIDs, slices.Sorted(slices.Values(ids(got))), "%s jobs of %s", state, topic)
	for _, j := range got {
		cur := b.get(t, j.ID)
		requireSameState(t, cur, j)
		require.True(t, core.StoreTime(cur.UpdatedAt).Equal(core.StoreTime(j.UpdatedAt)), "updated_at of %s", j.ID)
		require.True(t, core.StoreTime(cur.LeaseExpiresAt).Equal(core.StoreTime(j.LeaseExpiresAt)), "lease_expires_at of %s", j.ID)
	}
	require.Equal(t, ids(got), ids(b.listAll(t, topic, state, 2)), "%s jobs of %s by pages of 2", state, topic)
	require.Equal(t, ids(got), ids(b.listAll(t, topic, state, 1)), "%s jobs of %s by pages of 1", state, topic)
	return got
}

// requireOrdered requires jobs to be sorted by the time at gives each, ms
// precision (the precision of the coarsest store), descending when newest;
// ties by id when byID.
func requireOrdered(t *testing.T, jobs []*core.Job, at func(*core.Job) time.Time, newest, byID bool, what string) {
	t.Helper()
	ok := slices.IsSortedFunc(jobs, func(a, b *core.Job) int {
		c := core.StoreTime(at(a)).Compare(core.StoreTime(at(b)))
		if newest {
			c = -c
		}
		if c == 0 && byID {
			return strings.Compare(a.ID, b.ID)
		}
		return c
	})
	require.True(t, ok, "%s out of order: %v", what, ids(jobs))
}

// testListJobs: ListJobs lists a topic's jobs of each state as GetJob
// reports them now (a scheduled job past its run_at is ready, an expired
// lease ready or dead), in the orders the store promises, and by pages
// every job once.
func testListJobs(t *testing.T, b *testBundle) {
	const topic, other = "list.jobs", "list.other"
	now := time.Now()
	at := func(d time.Duration) time.Time { return now.Add(d) }

	// Reserved, with leases that expire in another order than claimed.
	var reserved []*core.Job
	for i, ttr := range []time.Duration{30 * time.Second, 10 * time.Second, 20 * time.Second} {
		j := NewJob(topic, at(time.Duration(i-20)*time.Second))
		j.TTR = ttr
		reserved = append(reserved, j)
	}
	b.put(t, reserved...)
	reserved = claimUntil(t, b.ctx, b.store, topic, 3, 3, dueWait)

	// Buried and acknowledged, one after the other.
	var buried, acked []*core.Job
	for i := range 3 {
		j := NewJob(topic, at(time.Duration(i-13)*time.Second))
		b.put(t, j)
		c := b.claimOne(t, topic, dueWait)
		_, err := b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "boom"})
		require.NoError(t, err)
		buried = append(buried, j)
	}
	for i := range 3 {
		j := NewJob(topic, at(time.Duration(i-10)*time.Second))
		b.put(t, j)
		c := b.claimOne(t, topic, dueWait)
		require.NoError(t, ack(b, c))
		acked = append(acked, j)
	}
	// Leases that run out during the test: one back to ready, one, on its
	// last attempt, dead.
	expiring, expiringLast := shortJob(topic), shortJob(topic)
	expiring.RunAt, expiringLast.RunAt = core.StoreTime(at(-5*time.Minute)), core.StoreTime(at(-4*time.Minute))
	expiringLast.MaxAttempts = 1
	b.put(t, expiring, expiringLast)
	leased := claimUntil(t, b.ctx, b.store, topic, 2, 2, dueWait)

	cancelled := []*core.Job{NewJob(topic, at(time.Hour)), NewJob(topic, at(-time.Second))}
	b.put(t, cancelled...)
	for _, j := range cancelled {
		require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: j.ID}))
	}

	// Scheduled and ready, put out of order; soon becomes ready during
	// the test, without a claim.
	var scheduled, ready []*core.Job
	for _, k := range []int{3, 1, 4, 0, 2} {
		scheduled = append(scheduled, NewJob(topic, at(time.Hour+time.Duration(k)*time.Minute)))
	}
	for _, k := range []int{2, 0, 3, 1} {
		ready = append(ready, NewJob(topic, at(-time.Duration(k+2)*time.Second)))
	}
	// Two ready jobs due at the same ms: ties by id.
	tie := NewJob(topic, at(-5*time.Second))
	tie.RunAt = ready[0].RunAt
	ready = append(ready, tie)
	soon := NewJob(topic, time.Now().Add(300*time.Millisecond))
	b.put(t, append(append(slices.Clone(scheduled), ready...), soon)...)
	b.put(t, NewJob(other, at(time.Hour)), NewJob(other, at(-time.Second)))
	ready = append(ready, soon, expiring)

	// Until soon is due and the 1s leases have run out.
	b.passUntil(t, maxTime(soon.RunAt, leased[0].LeaseExpiresAt, leased[1].LeaseExpiresAt).Add(50*time.Millisecond))

	ordered := !b.h.ListInStreamOrder
	got := b.requireListed(t, topic, core.StateScheduled, scheduled...)
	if ordered {
		requireOrdered(t, got, func(j *core.Job) time.Time { return j.RunAt }, false, true, "scheduled")
	}
	got = b.requireListed(t, topic, core.StateReady, ready...)
	if ordered {
		requireOrdered(t, got, func(j *core.Job) time.Time { return j.RunAt }, false, true, "ready")
	}
	got = b.requireListed(t, topic, core.StateReserved, reserved...)
	if ordered {
		requireOrdered(t, got, func(j *core.Job) time.Time { return j.LeaseExpiresAt }, false, false, "reserved")
	}
	got = b.requireListed(t, topic, core.StateDead, append(slices.Clone(buried), expiringLast)...)
	if ordered {
		requireOrdered(t, got, func(j *core.Job) time.Time { return j.UpdatedAt }, false, false, "dead")
	}
	got = b.requireListed(t, topic, core.StateDone, acked...)
	if ordered {
		requireOrdered(t, got, func(j *core.Job) time.Time { return j.UpdatedAt }, true, false, "done")
	}
	b.requireListed(t, topic, core.StateCancelled, cancelled...)
	b.requireListed(t, "list.none", core.StateReady)

	for _, p := range []core.ListJobsParams{
		{Topic: topic, State: core.StateReady, Limit: 0},
		{Topic: topic, State: "waiting", Limit: 10},
		{Topic: topic, State: core.StateReady, After: "not a cursor!", Limit: 10},
	} {
		_, err := b.store.ListJobs(b.ctx, &p)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "list %+v", p)
	}

	if !b.h.Durable {
		return
	}
	require.NoError(t, b.store.Close())
	b.store = b.open(t)
	b.requireListed(t, topic, core.StateScheduled, scheduled...)
	b.requireListed(t, topic, core.StateDone, acked...)
	b.requireListed(t, topic, core.StateDead, append(slices.Clone(buried), expiringLast)...)
}

// testListManyJobs: pages over more jobs than one page of the store's own
// reads (a Lua script's or a stream fetch's batch) still list each once.
func testListManyJobs(t *testing.T, b *testBundle) {
	const topic = "list.many"
	now := time.Now()
	jobs := make([]*core.Job, 0, 1200)
	for i := range cap(jobs) {
		jobs = append(jobs, NewJob(topic, now.Add(time.Hour+time.Duration(i%7)*time.Second)))
	}
	b.put(t, jobs...)
	got := b.listAll(t, topic, core.StateScheduled, 1000)
	require.ElementsMatch(t, ids(jobs), ids(got))
	require.Equal(t, ids(got), ids(b.listAll(t, topic, core.StateScheduled, 333)))
	if !b.h.ListInStreamOrder {
		requireOrdered(t, got, func(j *core.Job) time.Time { return j.RunAt }, false, true, "scheduled")
	}
}

func maxTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// testListWhileLeaving: a walk by pages that takes every job of a page out
// of the listing before it reads the next (cancels the scheduled jobs,
// requeues the dead ones, as the bulk operations of the service do) still
// meets every job once: a cursor does not depend on the jobs before it.
func testListWhileLeaving(t *testing.T, b *testBundle) {
	const topic = "list.leaving"
	now := time.Now()
	var scheduled []*core.Job
	for i := range 7 {
		scheduled = append(scheduled, NewJob(topic, now.Add(time.Hour+time.Duration(i%3)*time.Second)))
	}
	b.put(t, scheduled...)
	var dead []*core.Job
	for i := range 5 {
		dead = append(dead, NewJob(topic+".dead", now.Add(time.Duration(i-10)*time.Second)))
	}
	b.put(t, dead...)
	for _, c := range claimUntil(t, b.ctx, b.store, topic+".dead", len(dead), len(dead), dueWait) {
		require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "gone"})))
	}
	walk := func(topic string, state core.State, leave func(id string) error) []string {
		var seen []string
		after := ""
		for range 100 {
			page, err := b.store.ListJobs(b.ctx, &core.ListJobsParams{Topic: topic, State: state, After: after, Limit: 2})
			require.NoError(t, err)
			for _, j := range page.Jobs {
				require.NotContains(t, seen, j.ID, "listed twice")
				seen = append(seen, j.ID)
				require.NoError(t, leave(j.ID))
			}
			if page.Next == "" {
				return seen
			}
			after = page.Next
		}
		require.FailNow(t, "listing does not end")
		return nil
	}
	cancel := func(id string) error { return b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: id}) }
	require.ElementsMatch(t, ids(scheduled), walk(topic, core.StateScheduled, cancel))
	requeue := func(id string) error { return b.store.RequeueJob(b.ctx, id) }
	require.ElementsMatch(t, ids(dead), walk(topic+".dead", core.StateDead, requeue))
	b.requireCounts(t, topic+".dead", core.Counts{Ready: int64(len(dead))})
}
