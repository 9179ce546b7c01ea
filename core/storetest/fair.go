package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// The subtests of ClaimJobsParams.Fair. A store that refuses a fair topic
// (core.TopicChecker) skips them.

// fair skips t when the bundle's store refuses fair.
func (b *testBundle) fair(t *testing.T) {
	t.Helper()
	if err := core.CheckTopicOn(b.store, &core.Topic{Name: "fair", Fair: true}); err != nil {
		t.Skipf("the store refuses fair: %v", err)
	}
}

// claimFair claims up to max jobs of topic with Fair fair and
// KeyConcurrency kc, waiting up to wait.
func (b *testBundle) claimFair(t *testing.T, topic string, max, kc int, fair bool, wait time.Duration) []*core.Job {
	t.Helper()
	jobs, err := b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: max, Wait: wait, KeyConcurrency: kc, Fair: fair})
	require.NoError(t, err)
	for _, j := range jobs {
		requireClaimed(t, j, topic)
	}
	return jobs
}

// putFair stores jobs of topic, naming it fair as the engine's puts of a
// fair topic do (PutJobsParams.Fair), requiring each to be created.
func (b *testBundle) putFair(t *testing.T, topic string, jobs ...*core.Job) {
	t.Helper()
	res, err := b.store.PutJobs(b.ctx, &core.PutJobsParams{Jobs: jobs, Fair: []string{topic}})
	require.NoError(t, err)
	require.Len(t, res, len(jobs))
	for i, r := range res {
		require.NoError(t, r.Err, "job %d (%s)", i, jobs[i].ID)
		require.False(t, r.Replaced, "job %d (%s) was created, not replaced", i, jobs[i].ID)
	}
}

// repeat returns key n times.
func repeat(key string, n int) []string {
	return slices.Repeat([]string{key}, n)
}

// testFairRefused: a store that refuses fair says so on the field, naming
// the backend, and refuses nothing else of a topic.
func testFairRefused(t *testing.T, b *testBundle) {
	err := core.CheckTopicOn(b.store, &core.Topic{Name: "fair", Fair: true})
	if err == nil {
		t.Skip("the store honours fair")
	}
	var fe *core.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "fair", fe.Field)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.Contains(t, err.Error(), "backend", "the message names the backend")
	full := coretest.FullTopic(t)
	full.Fair, full.KeyConcurrency, full.Rate.PerKey = false, 0, false
	require.NoError(t, core.CheckTopicOn(b.store, full), "every other setting")
}

// testFairOrder: a fair claim takes one job of each key with due jobs in
// turn, the keys in the order their first job came due, each key's jobs in
// claim order; a key served goes to the back of the ring, one with no due
// job left leaves it.
func testFairOrder(t *testing.T, b *testBundle) {
	b.fair(t)
	const topic = "fair.order"
	jobs := keyedDue(topic, slices.Concat(repeat("a", 5), repeat("b", 2), repeat("c", 1))...)
	b.put(t, jobs...)
	a, bb, c := jobs[:5], jobs[5:7], jobs[7]

	got := b.claimFair(t, topic, 3, 0, true, dueWait)
	require.Equal(t, ids([]*core.Job{a[0], bb[0], c}), ids(got), "one of each key, in the order they came due")
	got = b.claimFair(t, topic, 3, 0, true, 0)
	require.Equal(t, ids([]*core.Job{a[1], bb[1], a[2]}), ids(got), "the ring goes on where the last claim left it")
	b.requireCounts(t, topic, core.Counts{Ready: 2, Reserved: 6})
	got = b.claimFair(t, topic, 10, 0, true, 0)
	require.Equal(t, ids(a[3:]), ids(got), "the one key left")
	require.Empty(t, b.claimFair(t, topic, 10, 0, true, 0))
	t.Run("Backlog", func(t *testing.T) { testFairBacklog(t, b) })
}

// fairBacklog is how many due jobs of one key testFairBacklog puts ahead
// of another key's: more than a Redis claim script walks (claim.lua's
// PARK_MAX), and than a fair claim on a Redis Cluster reads of its 16
// shards' queues (1 000 of each), for a store that would reach a key only
// by walking the topic's due jobs in claim order.
const fairBacklog = 20_000

// testFairBacklog: a key's backlog does not hold up another key: with
// fairBacklog due jobs of one key put before one of another, on a topic
// the puts name fair and before its first claim, the first claim takes
// one of each. A job put there to come due later is scheduled until then,
// to every reader; the waiting jobs can be cancelled and replaced; a
// claim that is not fair takes the due jobs in claim order again.
func testFairBacklog(t *testing.T, b *testBundle) {
	const topic = "fair.backlog"
	// Due in that order, the last a second ago.
	keys := slices.Concat(repeat("a", fairBacklog), repeat("b", 1))
	start := time.Now().Add(-time.Second - time.Duration(len(keys))*time.Millisecond)
	jobs := make([]*core.Job, len(keys))
	for i, k := range keys {
		jobs[i] = keyed(topic, k, start.Add(time.Duration(i)*time.Millisecond))
	}
	later := keyed(topic, "c", time.Now().Add(time.Hour))
	for i := 0; i < len(jobs); i += 1000 {
		b.putFair(t, topic, jobs[i:min(i+1000, len(jobs))]...)
	}
	b.putFair(t, topic, later)
	a, bb := jobs[:fairBacklog], jobs[fairBacklog]
	b.requireCounts(t, topic, core.Counts{Scheduled: 1, Ready: fairBacklog + 1})

	got := b.claimFair(t, topic, 2, 0, true, 0)
	require.Equal(t, ids([]*core.Job{a[0], bb}), ids(got), "one of each key")
	b.requireState(t, later.ID, core.StateScheduled)
	if _, ok := b.store.(core.JobExporter); ok {
		exported := b.export(t)
		require.Contains(t, exported, later.ID)
		require.Equal(t, core.StateScheduled, exported[later.ID].State, "exported as it is")
		require.Contains(t, exported, a[1].ID)
		require.Equal(t, core.StateReady, exported[a[1].ID].State)
	}
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: a[1].ID}))
	replaced := later.Clone()
	replaced.Body = []byte(`{"n":2}`)
	res := b.putResults(t, true, replaced)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	require.JSONEq(t, `{"n":2}`, string(b.requireState(t, later.ID, core.StateScheduled).Body))
	got = b.claimFair(t, topic, 2, 0, false, 0)
	require.Equal(t, ids(a[2:4]), ids(got), "not fair: in claim order, the cancelled one left out")
	b.requireCounts(t, topic, core.Counts{Scheduled: 1, Ready: fairBacklog - 4, Reserved: 4, Cancelled: 1})
}

// testFairUnkeyed: the jobs without a key are one group of the ring, served
// in turn as a key is.
func testFairUnkeyed(t *testing.T, b *testBundle) {
	b.fair(t)
	const topic = "fair.unkeyed"
	jobs := keyedDue(topic, "", "", "", "a", "b")
	b.put(t, jobs...)
	got := b.claimFair(t, topic, 3, 0, true, dueWait)
	require.Equal(t, ids([]*core.Job{jobs[0], jobs[3], jobs[4]}), ids(got), "one job without a key, then each key")
	got = b.claimFair(t, topic, 3, 0, true, 0)
	require.Equal(t, ids(jobs[1:3]), ids(got))
}

// testFairKeyConcurrency: with KeyConcurrency a key at its bound is out of
// the ring, taking no turn, until a slot of it comes back.
func testFairKeyConcurrency(t *testing.T, b *testBundle) {
	b.fair(t)
	b.keyConcurrency(t)
	const topic = "fair.kc"
	jobs := keyedDue(topic, slices.Concat(repeat("a", 3), repeat("b", 2), repeat("c", 1))...)
	b.put(t, jobs...)
	a, bb, c := jobs[:3], jobs[3:5], jobs[5]

	first := b.claimFair(t, topic, 10, 1, true, dueWait)
	require.Equal(t, ids([]*core.Job{a[0], bb[0], c}), ids(first), "one of each key")
	require.Empty(t, b.claimFair(t, topic, 10, 1, true, 0), "each key at its bound")
	require.NoError(t, ack(b, first[0]))
	got := b.claimFair(t, topic, 10, 1, true, dueWait)
	require.Equal(t, ids(a[1:2]), ids(got), "a's slot back: a's next, and no other key's")
	require.NoError(t, ack(b, first[1]))
	require.NoError(t, ack(b, got[0]))
	got = b.claimFair(t, topic, 10, 1, true, dueWait)
	require.ElementsMatch(t, ids([]*core.Job{a[2], bb[1]}), ids(got))
	got = b.claimFair(t, topic, 10, 2, true, 0)
	require.Empty(t, got, "nothing left due")
}

// testFairToggled: fair is read at each claim: a claim without it takes
// the jobs a fair claim left in the plain claim order, those put on the
// topic named fair too, and a fair claim after it serves the keys in turn
// again.
func testFairToggled(t *testing.T, b *testBundle) {
	b.fair(t)
	const topic = "fair.toggled"
	jobs := keyedDue(topic, slices.Concat(repeat("a", 5), repeat("b", 2))...)
	b.putFair(t, topic, jobs...)
	a, bb := jobs[:5], jobs[5:]

	got := b.claimFair(t, topic, 2, 0, true, dueWait)
	require.Equal(t, ids([]*core.Job{a[0], bb[0]}), ids(got), "fair")
	got = b.claimFair(t, topic, 2, 0, false, 0)
	require.Equal(t, ids(a[1:3]), ids(got), "plain claim order")
	got = b.claimFair(t, topic, 2, 0, true, 0)
	require.Equal(t, ids([]*core.Job{a[3], bb[1]}), ids(got), "fair again")
	got = b.claimFair(t, topic, 2, 0, false, 0)
	require.Equal(t, ids(a[4:]), ids(got))
}

// testFairChanged: a job of a key waiting its turn can be cancelled or
// replaced: the cancelled one is not claimed, the replaced one goes out in
// its place with its new body, and a key whose jobs are all cancelled
// takes no turn.
func testFairChanged(t *testing.T, b *testBundle) {
	b.fair(t)
	const topic = "fair.changed"
	jobs := keyedDue(topic, "a", "a", "a", "b", "c")
	b.put(t, jobs...)
	a, bj, c := jobs[:3], jobs[3], jobs[4]

	got := b.claimFair(t, topic, 1, 0, true, dueWait)
	require.Equal(t, ids(a[:1]), ids(got))
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: a[1].ID}))
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: c.ID}))
	replaced := a[2].Clone()
	replaced.Body = []byte(`{"n":2}`)
	res := b.putResults(t, true, replaced)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	b.requireCounts(t, topic, core.Counts{Ready: 2, Reserved: 1, Cancelled: 2})

	got = b.claimFair(t, topic, 10, 0, true, 0)
	require.Equal(t, ids([]*core.Job{bj, a[2]}), ids(got), "b, then a from the back of the ring; c cancelled")
	require.JSONEq(t, `{"n":2}`, string(got[1].Body))
}
