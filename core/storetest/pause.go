package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// testPause: a paused topic's claims take nothing, waiting as if nothing
// were due, while intake, counts and settling go on and other topics are
// untouched; a resume wakes a waiting claim; the state outlives the
// engine's PutTopic and DeleteTopic; a topic paused with neither jobs nor
// configuration is listed until resumed.
func testPause(t *testing.T, b *testBundle) {
	const topic, other = "paused", "running"
	ctx, s := b.ctx, b.store

	held := shortJob(topic)
	b.put(t, held)
	reserved := b.claimOne(t, topic, dueWait)
	jobs := []*core.Job{DueJob(topic), DueJob(topic), DueJob(topic)}
	b.put(t, jobs...)
	b.put(t, DueJob(other))

	require.NoError(t, s.SetTopicPaused(ctx, topic, true))
	require.NoError(t, s.SetTopicPaused(ctx, topic, true), "pausing twice")
	require.Empty(t, b.claim(t, topic, 10, 0), "claim of a paused topic")
	start := time.Now()
	require.Empty(t, b.claim(t, topic, 10, 300*time.Millisecond), "waiting claim of a paused topic")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond-waitSlack,
		"a claim of a paused topic waits out its Wait, as when nothing is due")
	require.Len(t, b.claim(t, other, 10, dueWait), 1, "another topic is not paused")

	tp := b.topicOf(t, topic)
	require.True(t, tp.Paused, "GetTopic of a paused topic")
	if time.Now().Before(reserved.LeaseExpiresAt.Add(-clockSlack)) {
		require.Equal(t, core.Counts{Ready: 3, Reserved: 1}, tp.Counts)
	} else {
		// A slow host let the held job's lease of TTRMin run out: it
		// may be back among the ready ones already.
		require.Contains(t, []core.Counts{{Ready: 3, Reserved: 1}, {Ready: 4}}, tp.Counts)
	}
	requirePausedListed(t, b, map[string]bool{topic: true, other: false})

	// Intake goes on; a job reserved before the pause expires back to
	// ready and is not claimed either.
	b.put(t, DueJob(topic))
	b.eventuallyCounts(t, topic, core.Counts{Ready: 5}, reserved.LeaseExpiresAt.Add(3*time.Second))
	require.Empty(t, b.claim(t, topic, 10, 0), "claim of a paused topic after a lease expired")

	// The state is not configuration: the engine's PutTopic and
	// DeleteTopic keep it, and show it.
	e := b.engine(t)
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: topic, MaxAttempts: 9}))
	require.True(t, b.topicOf(t, topic).Paused, "PutTopic keeps the pause")
	got, err := e.GetTopic(ctx, topic)
	require.NoError(t, err)
	require.True(t, got.Paused && got.Configured && got.MaxAttempts == 9, "the engine's topic: %+v", got)
	require.NoError(t, e.DeleteTopic(ctx, topic))
	require.True(t, b.topicOf(t, topic).Paused, "DeleteTopic keeps the pause")

	// A resume wakes a claim waiting on the paused topic.
	ch := claimAsync(ctx, s, topic, 10, 5*time.Second)
	b.pass(t, 300*time.Millisecond) // let the claim wait
	resumedAt := time.Now()
	require.NoError(t, s.SetTopicPaused(ctx, topic, false))
	r := <-ch
	require.NoError(t, r.err)
	require.NotEmpty(t, r.jobs, "claim waiting on a paused topic, after the resume")
	t.Logf("claim woken %s after resume", r.at.Sub(resumedAt))
	require.Less(t, r.at.Sub(resumedAt), time.Second, "claim not woken by the resume")
	all := append(r.jobs, claimUntil(t, ctx, s, topic, 5-len(r.jobs), 10, dueWait)...)
	require.Len(t, all, 5, "every job of the topic after the resume")
	for _, j := range all {
		if j.ID == held.ID {
			require.Equal(t, 2, j.Attempt, "the job whose lease expired while paused")
		}
	}
	require.NoError(t, s.SetTopicPaused(ctx, topic, false), "resuming twice")
	require.False(t, b.topicOf(t, topic).Paused)

	// A topic with neither jobs nor configuration can be paused ahead.
	const ahead = "ahead"
	b.requireCountsAbsent(t, ahead)
	require.NoError(t, s.SetTopicPaused(ctx, ahead, true))
	tp = b.topicOf(t, ahead)
	require.True(t, tp.Paused)
	require.Equal(t, core.Counts{}, tp.Counts)
	got, err = e.GetTopic(ctx, ahead)
	require.NoError(t, err, "a topic only paused is a topic")
	require.True(t, got.Paused && !got.Configured, "the engine's topic paused ahead: %+v", got)
	requirePausedListed(t, b, map[string]bool{ahead: true, topic: false})
	b.put(t, DueJob(ahead))
	require.Empty(t, b.claim(t, ahead, 1, 0), "a topic paused before its first job")
	require.NoError(t, s.SetTopicPaused(ctx, ahead, false))
	require.Len(t, b.claim(t, ahead, 1, dueWait), 1)
	require.NoError(t, s.SetTopicPaused(ctx, "never", false), "resuming a topic never paused")
	b.requireCountsAbsent(t, "never")

	// A topic that was only paused is gone once resumed, listings included.
	require.NoError(t, s.SetTopicPaused(ctx, "brief", true))
	require.NoError(t, s.SetTopicPaused(ctx, "brief", false))
	b.requireCountsAbsent(t, "brief")
	_, err = e.GetTopic(ctx, "brief")
	require.ErrorIs(t, err, core.ErrNotFound, "a topic only paused, then resumed")
	topics, err := e.ListTopics(ctx)
	require.NoError(t, err)
	for _, tp := range topics {
		require.NotEqual(t, "brief", tp.Name, "a topic only paused, then resumed, is not listed")
	}
}

// testPauseTwoInstances: a pause on one instance stops the claims of
// another (on the NATS store once that instance has heard of it, which
// GetTopicState shows), and a resume on one wakes a claim waiting on the other.
func testPauseTwoInstances(t *testing.T, b *testBundle) {
	const topic = "paused2"
	s1, s2 := b.store, b.open(t)
	job := DueJob(topic)
	Put(t, b.ctx, s1, job)

	require.NoError(t, s1.SetTopicPaused(b.ctx, topic, true))
	deadline := time.Now().Add(5 * time.Second)
	for {
		tp, err := s2.GetTopicState(b.ctx, topic)
		require.NoError(t, err)
		if tp.Paused {
			break
		}
		require.True(t, time.Now().Before(deadline), "the other instance did not hear of the pause")
		b.pass(t, 20*time.Millisecond)
	}
	require.Empty(t, Claim(t, b.ctx, s2, topic, 1, 0), "claim on the other instance of a paused topic")

	ch := claimAsync(b.ctx, s2, topic, 1, 5*time.Second)
	b.pass(t, 300*time.Millisecond)
	resumedAt := time.Now()
	require.NoError(t, s1.SetTopicPaused(b.ctx, topic, false))
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, job.ID, r.jobs[0].ID)
	t.Logf("claim on the other instance woken %s after resume", r.at.Sub(resumedAt))
	require.Less(t, r.at.Sub(resumedAt), time.Second, "claim not woken by a resume on the other instance")
}

// requirePausedListed requires ListTopicStates to list each topic of want
// with Paused as want says.
func requirePausedListed(t *testing.T, b *testBundle, want map[string]bool) {
	t.Helper()
	topics, err := b.store.ListTopicStates(b.ctx)
	require.NoError(t, err)
	got := map[string]bool{}
	for _, tp := range topics {
		if _, ok := want[tp.Name]; ok {
			got[tp.Name] = tp.Paused
		}
	}
	require.Equal(t, want, got, "ListTopicStates: the paused topics")
}

// testInFlightMax: a claim with InFlightMax leaves at most that many jobs
// of its topic reserved, counted over every instance; an ack or a lease
// that runs out gives a slot back, and wakes a claim that waits for one.
func testInFlightMax(t *testing.T, b *testBundle) {
	const topic = "inflight"
	short := NewJob(topic, time.Now().Add(-time.Second)) // due first: one of the two held
	// Its lease runs out last in the test, in real time, and must outlast
	// the checks before: a lease of TTRMin ran out under them on a loaded
	// machine (an instance then claimed while the bound was full).
	short.TTR = 3 * time.Second
	jobs := []*core.Job{short, DueJob(topic), DueJob(topic), DueJob(topic), DueJob(topic)}
	b.put(t, jobs...)
	other := b.open(t)
	claim := func(s core.Store, max int, wait time.Duration) []*core.Job {
		t.Helper()
		got, err := s.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: max, Wait: wait, InFlightMax: 2})
		require.NoError(t, err)
		return got
	}
	var held []*core.Job
	for len(held) < 2 {
		got := claim(b.store, 5, dueWait)
		require.NotEmpty(t, got)
		held = append(held, got...)
	}
	require.Len(t, held, 2, "no more than the bound at once")
	require.Empty(t, claim(b.store, 5, 0), "full")
	require.Empty(t, claim(other, 5, 200*time.Millisecond), "full for every instance")

	// An ack frees a slot and wakes a claim that waits for one.
	got := make(chan []*core.Job, 1)
	go func() {
		// (On this instance: with NATS, the due jobs are held by the
		// instance whose claims fetched them.)
		jobs, err := b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: 5, Wait: dueWait, InFlightMax: 2})
		if err != nil {
			jobs = nil
		}
		got <- jobs
	}()
	b.pass(t, 100*time.Millisecond)
	var acked *core.Job
	for _, j := range held {
		if j.ID != jobs[0].ID {
			acked = j
		}
	}
	require.NoError(t, ack(b, acked))
	woken := <-got
	require.Len(t, woken, 1, "one slot came back")
	require.Empty(t, claim(b.store, 5, 0), "full again")

	// The short job's lease runs out unacknowledged: its slot comes back.
	held0 := b.requireState(t, short.ID, core.StateReserved)
	b.passUntil(t, held0.LeaseExpiresAt.Add(100*time.Millisecond))
	require.Len(t, claim(b.store, 5, dueWait), 1, "the expired lease's slot")
	b.requireCounts(t, topic, core.Counts{Reserved: 2, Ready: 2, Done: 1})
}
