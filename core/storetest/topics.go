package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// testCounts: GetTopicState and ListTopicStates count a topic's jobs in every state,
// done and cancelled ones included.
func testCounts(t *testing.T, b *testBundle) {
	const topic = "counts"
	b.requireCountsAbsent(t, topic)
	var ready []*core.Job
	for i := range 4 {
		ready = append(ready, NewJob(topic, time.Now().Add(time.Duration(i-10)*time.Second)))
	}
	b.put(t, ready...)
	claimed := claimUntil(t, b.ctx, b.store, topic, 3, 3, dueWait)
	require.Equal(t, ids(ready[:3]), ids(claimed))
	require.NoError(t, ack(b, claimed[0]))
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: claimed[1].ID, Lease: claimed[1].Lease, Error: "x"})))

	var scheduled []*core.Job
	for range 3 {
		scheduled = append(scheduled, NewJob(topic, time.Now().Add(time.Hour)))
	}
	soon := NewJob(topic, time.Now().Add(300*time.Millisecond))
	cancelled := NewJob(topic, time.Now().Add(time.Hour))
	b.put(t, append(scheduled, soon, cancelled)...)
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: cancelled.ID}))
	b.requireCounts(t, topic, core.Counts{Scheduled: 4, Ready: 1, Reserved: 1, Done: 1, Dead: 1, Cancelled: 1})

	// Once soon is due, it counts as ready.
	b.passUntil(t, soon.RunAt.Add(500*time.Millisecond))
	b.requireCounts(t, topic, core.Counts{Scheduled: 3, Ready: 2, Reserved: 1, Done: 1, Dead: 1, Cancelled: 1})

	// Claim both ready jobs, cancel a scheduled one, requeue the dead one.
	got := claimUntil(t, b.ctx, b.store, topic, 2, 2, dueWait)
	require.Equal(t, []string{ready[3].ID, soon.ID}, ids(got))
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: scheduled[0].ID}))
	require.NoError(t, b.store.RequeueJob(b.ctx, claimed[1].ID))
	b.requireCounts(t, topic, core.Counts{Scheduled: 2, Ready: 1, Reserved: 3, Done: 1, Cancelled: 2})
}

// testFinishedCounts: acknowledged and cancelled jobs count as done and
// cancelled; a finished job whose id is used again (created, or replaced)
// counts once, in its new state, and again as finished once it finishes
// again, never twice.
func testFinishedCounts(t *testing.T, b *testBundle) {
	const topic = "fin"
	var jobs []*core.Job
	for i := range 4 {
		jobs = append(jobs, NewJob(topic, time.Now().Add(time.Duration(i-10)*time.Second)))
	}
	later := []*core.Job{NewJob(topic, time.Now().Add(time.Hour)), NewJob(topic, time.Now().Add(time.Hour))}
	b.put(t, append(jobs, later...)...)
	claimed := claimUntil(t, b.ctx, b.store, topic, 4, 4, dueWait)
	require.Equal(t, ids(jobs), ids(claimed))
	for _, c := range claimed[:3] {
		require.NoError(t, ack(b, c))
	}
	require.ErrorIs(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: jobs[3].ID}), core.ErrConflict, "cancel of a reserved job")
	b.requireCounts(t, topic, core.Counts{Scheduled: 2, Reserved: 1, Done: 3})
	require.NoError(t, settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: claimed[3].ID, Lease: claimed[3].Lease, RunAt: time.Now().Add(time.Hour), Error: "x"})))
	for _, j := range append([]*core.Job{jobs[3]}, later...) {
		require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: j.ID}))
	}
	b.requireCounts(t, topic, core.Counts{Done: 3, Cancelled: 3})

	// A second ack or cancel changes nothing.
	require.ErrorIs(t, ack(b, claimed[0]), core.ErrLeaseLost)
	require.ErrorIs(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: later[0].ID}), core.ErrNotFound)
	require.ErrorIs(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: jobs[0].ID}), core.ErrNotFound)
	b.requireCounts(t, topic, core.Counts{Done: 3, Cancelled: 3})

	// Ids used again: a done and a cancelled one created, a done and a
	// cancelled one replaced, due now; each counts in its new state only.
	var reuse []*core.Job
	for _, old := range []*core.Job{jobs[0], later[0], jobs[1], later[1]} {
		j := DueJob(topic)
		j.ID = old.ID
		reuse = append(reuse, j)
	}
	b.put(t, reuse[:2]...)
	res := b.putResults(t, true, reuse[2:]...)
	for i, r := range res {
		require.NoError(t, r.Err, "replace of finished %s", reuse[2+i].ID)
		require.False(t, r.Replaced, "a finished job is overwritten, not replaced")
	}
	b.requireCounts(t, topic, core.Counts{Ready: 4, Done: 1, Cancelled: 1})

	// Finished again: each counts once more, where it counted before.
	again := claimUntil(t, b.ctx, b.store, topic, 4, 4, dueWait)
	require.ElementsMatch(t, ids(reuse), ids(again))
	b.requireCounts(t, topic, core.Counts{Reserved: 4, Done: 1, Cancelled: 1})
	for _, c := range again {
		require.NoError(t, ack(b, c))
	}
	b.requireCounts(t, topic, core.Counts{Done: 5, Cancelled: 1})

	// Reused once more, into another topic: it leaves this topic's counts.
	moved := NewJob(topic+".other", time.Now().Add(time.Hour))
	moved.ID = jobs[0].ID
	b.put(t, moved)
	b.requireCounts(t, topic, core.Counts{Done: 4, Cancelled: 1})
	b.requireCounts(t, moved.Topic, core.Counts{Scheduled: 1})
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: moved.ID}))
	b.requireCounts(t, moved.Topic, core.Counts{Cancelled: 1})
	b.requireCounts(t, topic, core.Counts{Done: 4, Cancelled: 1})
}

// Retention of the FinishedRetention subtest.
const (
	// finRetention is the retention of the stores it opens: whole seconds
	// (NATS TTLs), long enough that the second round finishes half of it
	// after the first, more than finSlack apart.
	finRetention = 3 * time.Second
	// finSlack is how long past its retention a finished job may still
	// count: NATS expires messages by a timer of its own, and the Redis
	// store counts finished jobs in buckets of retention/64.
	finSlack = 1500 * time.Millisecond
)

// shortRetention returns a bundle of a store the harness opens with a
// retention of finRetention, or skips when it opens none.
func (b *testBundle) shortRetention(t *testing.T) *testBundle {
	t.Helper()
	if b.h.OpenRetention == nil {
		t.Skip("the harness opens no store with a short retention")
	}
	rb := &testBundle{h: b.h, ns: namespace(t), ctx: b.ctx}
	rb.store = b.h.OpenRetention(t, rb.ns, finRetention)
	require.NotNil(t, rb.store, "Harness.OpenRetention returned nil")
	t.Cleanup(func() { _ = rb.store.Close() })
	return rb
}

// testFinishedRetention: done and cancelled jobs count for the retention
// period from when each finished, and no longer once it has passed; their
// entries in the record of finished jobs are dropped alike. It runs
// on a store the harness opens with a short retention, on the real clock.
func testFinishedRetention(t *testing.T, b *testBundle) {
	rb := b.shortRetention(t)
	const topic = "fin.ret"

	// finish puts n due jobs and acknowledges them, and cancels m others;
	// it returns when the first of them finished.
	finish := func(n, m int) time.Time {
		t.Helper()
		var due, later []*core.Job
		for range n {
			due = append(due, keyed(topic, "fin", time.Now()))
		}
		for range m {
			later = append(later, keyed(topic, "fin", time.Now().Add(time.Hour)))
		}
		rb.put(t, append(due, later...)...)
		claimed := claimUntil(t, rb.ctx, rb.store, topic, n, n, dueWait)
		require.Len(t, claimed, n)
		start := time.Now()
		for _, c := range claimed {
			require.NoError(t, ack(rb, c))
		}
		for _, j := range later {
			require.NoError(t, rb.store.CancelJob(rb.ctx, &core.CancelJobParams{ID: j.ID}))
		}
		return start
	}
	// A pending job keeps the topic listed once the finished ones are gone.
	rb.put(t, NewJob(topic, time.Now().Add(time.Hour)))
	first := finish(2, 1)
	rb.requireCounts(t, topic, core.Counts{Scheduled: 1, Done: 2, Cancelled: 1})
	rb.eventuallyFinished(t, 3, time.Now().Add(finSlack))

	// Half a retention later, a second round.
	rb.passUntil(t, first.Add(finRetention/2))
	rb.requireCounts(t, topic, core.Counts{Scheduled: 1, Done: 2, Cancelled: 1})
	second := finish(1, 2)
	rb.requireCounts(t, topic, core.Counts{Scheduled: 1, Done: 3, Cancelled: 3})
	rb.eventuallyFinished(t, 6, time.Now().Add(finSlack))

	// Past the first round's retention it no longer counts; the second
	// does, within its own.
	rb.passUntil(t, first.Add(finRetention))
	rb.eventuallyCounts(t, topic, core.Counts{Scheduled: 1, Done: 1, Cancelled: 2}, first.Add(finRetention+finSlack))
	rb.eventuallyFound(t, topic, "fin", 3, first.Add(finRetention+finSlack))
	rb.eventuallyFinished(t, 3, first.Add(finRetention+finSlack))
	require.True(t, time.Now().Before(second.Add(finRetention)),
		"the first round counted until %s after the second, past the second's retention", time.Since(second))

	// Past the second round's retention nothing finished counts.
	rb.passUntil(t, second.Add(finRetention))
	rb.eventuallyCounts(t, topic, core.Counts{Scheduled: 1}, second.Add(finRetention+finSlack))
	rb.eventuallyFound(t, topic, "fin", 0, second.Add(finRetention+finSlack))
	rb.eventuallyFinished(t, 0, second.Add(finRetention+finSlack))
}

// testJobRetention: a job's own Retention, shorter or longer than the
// store's, is how long it is kept once finished: found by id and by key,
// listed, and counted until then, and not after. It runs on a store the
// harness opens with a short retention, on the real clock.
func testJobRetention(t *testing.T, b *testBundle) {
	rb := b.shortRetention(t)
	const topic = "job.ret"

	// Whole seconds, as NATS TTLs are: short, the store's, long.
	retentions := []time.Duration{finRetention / 3, 0, finRetention * 5 / 3}
	var jobs []*core.Job
	for i, r := range retentions {
		runAt := time.Now().Add(time.Hour)
		if i == 0 {
			runAt = time.Now()
		}
		j := keyed(topic, "ret", runAt)
		j.ID = fmt.Sprintf("ret-%d", i)
		j.Retention = r
		jobs = append(jobs, j)
	}
	// A pending job keeps the topic listed once the finished ones are gone.
	rb.put(t, append(jobs, NewJob(topic, time.Now().Add(time.Hour)))...)
	start := time.Now()
	for i, j := range jobs {
		if i == 0 {
			// One done: retention holds for either finish.
			claimed := claimUntil(t, rb.ctx, rb.store, topic, 1, 1, dueWait)
			require.Len(t, claimed, 1)
			require.NoError(t, ack(rb, claimed[0]))
			continue
		}
		require.NoError(t, rb.store.CancelJob(rb.ctx, &core.CancelJobParams{ID: j.ID}))
	}
	got := rb.get(t, jobs[2].ID)
	require.Equal(t, jobs[2].Retention, got.Retention, "a job's retention is kept")
	rb.requireCounts(t, topic, core.Counts{Scheduled: 1, Done: 1, Cancelled: 2})

	// kept requires the jobs from the i-th on, and no other, to be found,
	// listed and counted by the deadline.
	kept := func(i int, deadline time.Time) {
		t.Helper()
		want := core.Counts{Scheduled: 1, Cancelled: int64(len(jobs) - max(i, 1))}
		if i == 0 {
			want.Done = 1
		}
		rb.eventuallyCounts(t, topic, want, deadline)
		rb.eventuallyFound(t, topic, "ret", len(jobs)-i, deadline)
		for k, j := range jobs {
			_, err := rb.store.GetJob(rb.ctx, j.ID)
			if k < i {
				require.ErrorIs(t, err, core.ErrNotFound, "job %s past its retention", j.ID)
			} else {
				require.NoError(t, err, "job %s within its retention", j.ID)
			}
		}
		page, err := rb.store.ListJobs(rb.ctx, &core.ListJobsParams{Topic: topic, State: core.StateCancelled, Limit: 10})
		require.NoError(t, err)
		require.Len(t, page.Jobs, len(jobs)-max(i, 1), "cancelled jobs listed")
	}
	for i, r := range retentions {
		until := start.Add(cmp.Or(r, finRetention))
		rb.passUntil(t, until)
		kept(i+1, until.Add(finSlack))
		if i+1 < len(retentions) {
			require.True(t, time.Now().Before(start.Add(cmp.Or(retentions[i+1], finRetention))),
				"job %d was kept until %s after the next one's retention began to run out", i, time.Since(until))
		}
	}
}

// eventuallyFound requires FindJobs of topic and key to find n jobs by
// deadline, read every 50 ms: finished jobs past their retention are not
// found.
func (b *testBundle) eventuallyFound(t *testing.T, topic, key string, n int, deadline time.Time) {
	t.Helper()
	for {
		got := b.find(t, topic, key, "", 100)
		if len(got) == n {
			return
		}
		if time.Now().After(deadline) {
			require.Len(t, got, n, "jobs of %s with key %q %s after the deadline", topic, key, time.Since(deadline))
		}
		b.pass(t, 50*time.Millisecond)
	}
}

// eventuallyCounts requires topic's counts, from GetTopicState and from
// ListTopicStates, to be want by deadline, read every 50 ms.
func (b *testBundle) eventuallyCounts(t *testing.T, topic string, want core.Counts, deadline time.Time) {
	t.Helper()
	var last core.Counts
	for {
		last = b.topicOf(t, topic).Counts
		if last == want {
			topics, err := b.store.ListTopicStates(b.ctx)
			require.NoError(t, err)
			for _, tp := range topics {
				if tp.Name == topic {
					last = tp.Counts
				}
			}
			if last == want {
				return
			}
		}
		if time.Now().After(deadline) {
			require.Equal(t, want, last, "counts of %s %s after the deadline", topic, time.Since(deadline))
		}
		b.pass(t, 50*time.Millisecond)
	}
}

// requireCountsAbsent requires that the store holds nothing of topic: its
// state is zero, with no error, and ListTopicStates leaves it out or
// lists it zero.
func (b *testBundle) requireCountsAbsent(t *testing.T, topic string) {
	t.Helper()
	require.Equal(t, core.TopicState{Name: topic}, b.topicOf(t, topic), "topic %s without jobs or pause", topic)
	b.requireCounts(t, topic, core.Counts{})
}

// testTopics: topic configurations, records the engine writes, round trip,
// replace and drop, merged with the store's counts and pause; topics with
// jobs but no configuration are listed unconfigured; ListTopics sorts by
// name; ListTopicStates sorts by name too.
func testTopics(t *testing.T, b *testBundle) {
	ctx, e := b.ctx, b.engine(t)
	topics, err := e.ListTopics(ctx)
	require.NoError(t, err)
	require.Empty(t, topics, "a fresh namespace has no topics")

	full := &core.Topic{
		Name:        "b.x",
		TTR:         45 * time.Second,
		MaxAttempts: 16,
		Backoff: core.Backoff{Initial: 2 * time.Second, Max: time.Hour, Factor: 1.5, Jitter: 0.1,
			Delays: []time.Duration{time.Minute, 3 * time.Minute, 0, 250 * time.Millisecond}},
		Concurrency: 64,
		UniqueKeys:  core.UniqueKeysReplace,
		MaxInFlight: 12,
		Rate:        core.Rate{Limit: 5, Period: time.Second, Burst: 10},
		OnDead:      "b.dead",
	}
	plain := &core.Topic{Name: "a"}
	require.NoError(t, e.PutTopic(ctx, full))
	require.NoError(t, e.PutTopic(ctx, plain))
	b.put(t, DueJob("c"))

	want := *full
	want.Configured = true
	require.Equal(t, &want, engineTopic(t, b, e, "b.x"), "configuration round trip")
	require.True(t, engineTopic(t, b, e, "a").Configured)
	c := engineTopic(t, b, e, "c")
	require.False(t, c.Configured, "a topic with jobs but no configuration")
	require.Equal(t, core.Counts{Ready: 1}, c.Counts)
	requireListed(t, b, e, []string{"a", "b.x", "c"}, map[string]bool{"a": true, "b.x": true, "c": false})
	states, err := b.store.ListTopicStates(ctx)
	require.NoError(t, err)
	require.True(t, slices.IsSortedFunc(states, func(x, y core.TopicState) int { return strings.Compare(x.Name, y.Name) }),
		"ListTopicStates sorted by name")

	// PutTopic replaces the whole configuration.
	other := &core.Topic{Name: "b.x", TTR: 5 * time.Second}
	require.NoError(t, e.PutTopic(ctx, other))
	want = *other
	want.Configured = true
	require.Equal(t, &want, engineTopic(t, b, e, "b.x"))

	// DeleteTopic drops the configuration; a topic with jobs stays, listed
	// unconfigured with its jobs.
	require.NoError(t, e.DeleteTopic(ctx, "a"))
	_, err = e.GetTopic(ctx, "a")
	require.ErrorIs(t, err, core.ErrNotFound, "a topic deleted, without jobs")
	require.ErrorIs(t, e.DeleteTopic(ctx, "a"), core.ErrNotFound, "second delete")
	require.ErrorIs(t, e.DeleteTopic(ctx, "c"), core.ErrNotFound, "delete of a topic never configured")
	require.ErrorIs(t, e.DeleteTopic(ctx, "nope"), core.ErrNotFound, "delete of an unknown topic")
	b.requireCountsAbsent(t, "nope")

	b.put(t, NewJob("b.x", time.Now().Add(time.Hour)))
	require.NoError(t, e.DeleteTopic(ctx, "b.x"))
	bx := engineTopic(t, b, e, "b.x")
	require.False(t, bx.Configured)
	require.Equal(t, core.Counts{Scheduled: 1}, bx.Counts, "DeleteTopic keeps the jobs")
	requireListed(t, b, e, []string{"b.x", "c"}, map[string]bool{"b.x": false, "c": false})

	// Configuring a topic that has jobs keeps its counts.
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "c", MaxAttempts: 3}))
	c = engineTopic(t, b, e, "c")
	require.True(t, c.Configured)
	require.Equal(t, 3, c.MaxAttempts)
	require.Equal(t, core.Counts{Ready: 1}, c.Counts)
}

// engineTopic returns the topic name as e.GetTopic gives it, requiring
// ListTopics to give the same.
func engineTopic(t *testing.T, b *testBundle, e *core.Engine, name string) *core.Topic {
	t.Helper()
	tp, err := e.GetTopic(b.ctx, name)
	require.NoError(t, err, "get topic %s", name)
	list, err := e.ListTopics(b.ctx)
	require.NoError(t, err)
	i := slices.IndexFunc(list, func(x *core.Topic) bool { return x.Name == name })
	require.GreaterOrEqual(t, i, 0, "ListTopics has no %s", name)
	require.Equal(t, tp, list[i], "ListTopics and GetTopic of %s", name)
	return tp
}

// requireListed requires e.ListTopics to give exactly names, in order,
// with the Configured flags of configured.
func requireListed(t *testing.T, b *testBundle, e *core.Engine, names []string, configured map[string]bool) {
	t.Helper()
	topics, err := e.ListTopics(b.ctx)
	require.NoError(t, err)
	var got []string
	for _, tp := range topics {
		got = append(got, tp.Name)
		require.Equal(t, configured[tp.Name], tp.Configured, "Configured of %s", tp.Name)
	}
	require.Equal(t, names, got, "ListTopics sorted by name")
}

// testTopicIsolation: claims, counts and dead lists of one topic never see
// another's jobs, for names that share prefixes or differ in case.
func testTopicIsolation(t *testing.T, b *testBundle) {
	names := []string{"a", "a.b", "a.b.c", "ab", "a-b", "A", "b.a"}
	byTopic := map[string][]*core.Job{}
	var all []*core.Job
	for i := range 3 {
		for _, name := range names {
			j := NewJob(name, time.Now().Add(time.Duration(i-5)*time.Second))
			byTopic[name] = append(byTopic[name], j)
			all = append(all, j)
		}
	}
	b.put(t, all...)
	for _, name := range names {
		b.requireCounts(t, name, core.Counts{Ready: 3})
	}
	for _, name := range names {
		got := claimUntil(t, b.ctx, b.store, name, 3, 10, dueWait)
		require.Equal(t, ids(byTopic[name]), ids(got), "claims on %s", name)
		require.Empty(t, b.claim(t, name, 10, 0), "more jobs on %s", name)
		b.requireCounts(t, name, core.Counts{Reserved: 3})
		x := got[0]
		require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: x.ID, Lease: x.Lease, Error: name})))
	}
	for _, name := range names {
		dead := listDead(t, b, name, 10)
		require.Len(t, dead, 1, "dead jobs of %s", name)
		require.Equal(t, name, dead[0].LastError)
	}

	// A claim waiting on a is not handed a job put on a.b.
	ch := claimAsync(b.ctx, b.store, "a", 1, 600*time.Millisecond)
	b.put(t, DueJob("a.b"))
	r := <-ch
	require.NoError(t, r.err)
	require.Empty(t, r.jobs, "a claim on a got a job of a.b")
	require.Len(t, b.claim(t, "a.b", 10, dueWait), 1)
}
