package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// The subtests of core.ClaimSource, the store's side of core.Claim: a
// decorator (breaker, telemetry) is not one and skips them.

// claimSource returns the bundle's store as a core.ClaimSource, or skips.
func (b *testBundle) claimSource(t *testing.T) core.ClaimSource {
	t.Helper()
	src, ok := b.store.(core.ClaimSource)
	if !ok {
		t.Skipf("%T is not a core.ClaimSource", b.store)
	}
	return src
}

// take calls TakeJobs on topic with max and inFlightMax, requiring no error.
func take(t *testing.T, b *testBundle, src core.ClaimSource, topic string, max, inFlightMax int) core.Taken {
	t.Helper()
	taken, err := src.TakeJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: max, InFlightMax: inFlightMax})
	require.NoError(t, err)
	require.NotNil(t, taken.Jobs, "TakeJobs returns an empty slice, not nil")
	require.LessOrEqual(t, len(taken.Jobs), max)
	for _, j := range taken.Jobs {
		requireClaimed(t, j, topic)
	}
	return taken
}

// requireWoken requires ch to close within a few seconds.
func requireWoken(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("the watch was not woken by %s", what)
	}
}

// requireNextNotAfter requires a Next that is zero (the store will
// notify) or at, within clockSlack (a store that converts from a server's
// clock), so that a claim neither wakes late nor polls.
func requireNextNotAfter(t *testing.T, taken core.Taken, at time.Time) {
	t.Helper()
	require.Empty(t, taken.Jobs)
	if taken.Next.IsZero() {
		return
	}
	require.False(t, taken.Next.After(at.Add(clockSlack)), "Next %v after the earliest due time %v", taken.Next, at)
	require.False(t, taken.Next.Before(at.Add(-clockSlack)), "Next %v well before the earliest due time %v", taken.Next, at)
}

// testTakeNow: TakeJobs takes what is due and never waits; with nothing
// due it says when to look again, no later than the earliest run_at (or
// lease expiry).
func testTakeNow(t *testing.T, b *testBundle) {
	src := b.claimSource(t)
	const topic = "take"
	empty := take(t, b, src, topic, 5, 0)
	require.Empty(t, empty.Jobs)
	require.False(t, empty.Full)

	later := NewJob(topic, time.Now().Add(time.Hour))
	due := DueJob(topic)
	b.put(t, later, due)
	var got []*core.Job
	require.Eventually(t, func() bool {
		got = append(got, take(t, b, src, topic, 5, 0).Jobs...)
		return len(got) > 0
	}, 5*time.Second, 10*time.Millisecond, "the due job is taken")
	require.Len(t, got, 1)
	require.Equal(t, due.ID, got[0].ID)
	b.requireState(t, due.ID, core.StateReserved)
	// Its lease would be the earliest due time.
	_, err := b.store.AckJob(b.ctx, &core.AckJobParams{ID: due.ID, Lease: got[0].Lease})
	require.NoError(t, err)

	start := time.Now()
	requireNextNotAfter(t, take(t, b, src, topic, 5, 0), later.RunAt)
	require.Less(t, time.Since(start), time.Second, "TakeJobs waited")
	b.requireState(t, later.ID, core.StateScheduled)
}

// testTakeNotify: a watch made before an empty take is woken by a put of
// a due job, and by a put of a job due sooner than the Next it answered.
func testTakeNotify(t *testing.T, b *testBundle) {
	src := b.claimSource(t)
	n := src.ClaimNotifier()
	const topic = "notify"
	b.put(t, NewJob(topic, time.Now().Add(time.Hour)))

	w := n.Watch(topic)
	defer w.Stop()
	take(t, b, src, topic, 1, 0)
	due := DueJob(topic)
	b.put(t, due)
	requireWoken(t, w.Due, "a put of a due job")
	w.Stop()
	require.Eventually(t, func() bool {
		jobs := take(t, b, src, topic, 1, 0).Jobs
		return len(jobs) == 1 && jobs[0].ID == due.ID
	}, 5*time.Second, 10*time.Millisecond, "the due job is taken")

	w = n.Watch(topic)
	defer w.Stop()
	taken := take(t, b, src, topic, 1, 0)
	soon := NewJob(topic, time.Now().Add(2*time.Second))
	b.put(t, soon)
	if !taken.Next.IsZero() && !taken.Next.After(soon.RunAt) {
		t.Fatalf("Next %v before the job just put, due at %v", taken.Next, soon.RunAt)
	}
	requireWoken(t, w.Due, "a put of a job due sooner")
	w.Stop()
	requireNextNotAfter(t, take(t, b, src, topic, 1, 0), soon.RunAt)
}

// testTakeInFlight: a take held back by InFlightMax says Full, and a
// delivery that ends wakes its watch's Freed, or its Next comes within
// InFlightRecheck (a shared store, which hears of no delivery ending on
// another instance).
func testTakeInFlight(t *testing.T, b *testBundle) {
	src := b.claimSource(t)
	const topic = "inflight"
	b.put(t, DueJob(topic), DueJob(topic))
	var first []*core.Job
	require.Eventually(t, func() bool {
		first = take(t, b, src, topic, 2, 1).Jobs
		return len(first) > 0
	}, 5*time.Second, 10*time.Millisecond, "a due job is taken")
	require.Len(t, first, 1, "InFlightMax 1 bounds the take")

	w := src.ClaimNotifier().Watch(topic)
	defer w.Stop()
	before := time.Now()
	full := take(t, b, src, topic, 2, 1)
	require.Empty(t, full.Jobs)
	require.True(t, full.Full, "a take held back by InFlightMax says Full")
	_, err := b.store.AckJob(b.ctx, &core.AckJobParams{ID: first[0].ID, Lease: first[0].Lease})
	require.NoError(t, err)
	if full.Next.IsZero() || full.Next.After(before.Add(core.InFlightRecheck+clockSlack)) {
		requireWoken(t, w.Freed, "an ack of the topic held back by InFlightMax")
	}
	w.Stop()
	require.Eventually(t, func() bool {
		return len(take(t, b, src, topic, 2, 1).Jobs) == 1
	}, 5*time.Second, 10*time.Millisecond, "the second job is taken once the first is acknowledged")
}

// testTakeResume: a paused topic's take gives nothing, and a resume wakes
// the watch.
func testTakeResume(t *testing.T, b *testBundle) {
	src := b.claimSource(t)
	const topic = "resume"
	require.NoError(t, b.store.SetTopicPaused(b.ctx, topic, true))
	job := DueJob(topic)
	b.put(t, job)
	w := src.ClaimNotifier().Watch(topic)
	defer w.Stop()
	require.Empty(t, take(t, b, src, topic, 1, 0).Jobs, "a paused topic gives nothing")
	require.NoError(t, b.store.SetTopicPaused(b.ctx, topic, false))
	requireWoken(t, w.Due, "a resume")
	w.Stop()
	require.Eventually(t, func() bool {
		jobs := take(t, b, src, topic, 1, 0).Jobs
		return len(jobs) == 1 && jobs[0].ID == job.ID
	}, 5*time.Second, 10*time.Millisecond, "the job is taken after the resume")
}

// testTakeClose: closing the store wakes every watch, and a take after it
// answers ErrClosed.
func testTakeClose(t *testing.T, b *testBundle) {
	src := b.claimSource(t)
	const topic = "close"
	w := src.ClaimNotifier().Watch(topic)
	defer w.Stop()
	take(t, b, src, topic, 1, 0)
	require.NoError(t, b.store.Close())
	requireWoken(t, w.Due, "Close")
	_, err := src.TakeJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: 1})
	require.ErrorIs(t, err, core.ErrClosed)
}
