package storetest

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// findKey is a business key with what a store might take for a separator in
// its own names: NATS subject tokens and wildcards, Redis key parts, a path.
const findKey = "order:42 *.>/é"

// keyed returns NewJob(topic, runAt) with key.
func keyed(topic, key string, runAt time.Time) *core.Job {
	j := NewJob(topic, runAt)
	j.Key = key
	return j
}

// find returns what FindJobs answers, requiring no error.
func (b *testBundle) find(t *testing.T, topic, key, after string, limit int) []*core.Job {
	t.Helper()
	got, err := b.store.FindJobs(b.ctx, &core.FindJobsParams{Topic: topic, Key: key, After: after, Limit: limit})
	require.NoError(t, err, "find %s key %q after %q", topic, key, after)
	return got
}

// requireFound requires FindJobs of topic and key to answer want's ids in
// id order, each job as GetJob reports it.
func (b *testBundle) requireFound(t *testing.T, topic, key string, want ...*core.Job) {
	t.Helper()
	wantIDs := slices.Sorted(slices.Values(ids(want)))
	got := b.find(t, topic, key, "", 100)
	require.NotNil(t, got, "an empty slice, not nil")
	if len(wantIDs) == 0 {
		wantIDs = []string{}
	}
	require.Equal(t, wantIDs, ids(got), "jobs of %s with key %q", topic, key)
	for _, j := range got {
		requireSameState(t, b.get(t, j.ID), j)
		require.Equal(t, key, j.Key)
	}
}

// testFindByKey: FindJobs finds a topic's jobs by key in every state, in id
// order and by pages, under the topic and key each job has now.
func testFindByKey(t *testing.T, b *testBundle) {
	const topic, other = "keys.find", "keys.other"
	now := time.Now()
	later := now.Add(time.Hour)
	waiting := keyed(topic, findKey, later)
	due := keyed(topic, findKey, now.Add(-time.Second))
	gone := keyed(topic, findKey, later)
	dead := keyed(topic, findKey, now.Add(-2*time.Second))
	elsewhere := keyed(other, findKey, later)
	longer := keyed(topic, findKey+"2", later)
	moved := keyed(topic, findKey, later)
	reused := keyed(topic, findKey, later)
	b.put(t, waiting, due, gone, dead, elsewhere, longer, moved, reused, NewJob(topic, later))
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: gone.ID}))

	// A replace moves a job to its new key and topic; so does a put that
	// reuses a finished job's id.
	m := moved.Clone()
	m.Key, m.Topic = "order:44", other
	res := b.putResults(t, true, m)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: reused.ID}))
	r := reused.Clone()
	r.Key = "order:45"
	b.put(t, r)

	b.pass(t, 200*time.Millisecond)
	first := b.claimOne(t, topic, dueWait)
	require.Equal(t, dead.ID, first.ID, "the job due first")
	_, err := b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: first.ID, Lease: first.Lease, Error: "boom"})
	require.NoError(t, err)
	reserved := b.claimOne(t, topic, dueWait)
	require.Equal(t, due.ID, reserved.ID)

	all := []*core.Job{waiting, due, gone, dead}
	b.requireFound(t, topic, findKey, all...)
	b.requireFound(t, topic, findKey+"2", longer)
	b.requireFound(t, topic, "order")
	b.requireFound(t, other, findKey, elsewhere)
	b.requireFound(t, other, "order:44", moved)
	b.requireFound(t, topic, "order:44")
	b.requireFound(t, topic, "order:45", reused)
	b.requireFound(t, "keys.none", findKey)

	// Pages: each starts after the last id of the one before.
	wantIDs := slices.Sorted(slices.Values(ids(all)))
	page := b.find(t, topic, findKey, "", 3)
	require.Equal(t, wantIDs[:3], ids(page))
	page = b.find(t, topic, findKey, page[2].ID, 3)
	require.Equal(t, wantIDs[3:], ids(page))
	require.Empty(t, b.find(t, topic, findKey, wantIDs[3], 3))

	// Once acknowledged, the job is found done.
	require.NoError(t, ack(b, reserved))
	b.requireFound(t, topic, findKey, all...)

	for _, p := range []core.FindJobsParams{
		{Topic: topic, Key: findKey, Limit: 0},
		{Topic: topic, Key: "", Limit: 10},
	} {
		_, err := b.store.FindJobs(b.ctx, &p)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "find %+v", p)
	}

	if !b.h.Durable {
		return
	}
	require.NoError(t, b.store.Close())
	b.store = b.open(t)
	b.requireFound(t, topic, findKey, all...)
	b.requireFound(t, other, "order:44", moved)
	b.requireFound(t, topic, "order:44")
}

// testKeyOutlivesFinished: a job put under a key that only a finished job
// holds is found by it after that job's retention ran out.
func testKeyOutlivesFinished(t *testing.T, b *testBundle) {
	const topic, key = "keys.outlive", "order:46"
	old := keyed(topic, key, time.Now().Add(-time.Second))
	old.Retention = core.RetentionMin
	b.put(t, old)
	require.NoError(t, ack(b, b.claimOne(t, topic, dueWait)))
	acked := time.Now()
	b.requireFound(t, topic, key, old)
	fresh := keyed(topic, key, time.Now().Add(time.Hour))
	b.put(t, fresh)
	b.passUntil(t, acked.Add(old.Retention+500*time.Millisecond))
	require.Equal(t, []string{fresh.ID}, ids(slices.DeleteFunc(b.find(t, topic, key, "", 10),
		func(j *core.Job) bool { return j.ID == old.ID })), "the job put under the key, after the finished one's retention")
}

// testImportFindsKeys: imported jobs are found by their keys.
func testImportFindsKeys(t *testing.T, b *testBundle) {
	const topic = "keys.import"
	a := keyed(topic, findKey, time.Now().Add(time.Hour))
	c := keyed(topic, findKey, time.Now().Add(-time.Second))
	b.put(t, a, c)
	c = b.claimOne(t, topic, dueWait)
	_, err := b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "boom"})
	require.NoError(t, err)
	exported := b.export(t)

	f := b.fresh(t)
	var in []*core.Job
	for _, id := range []string{a.ID, c.ID} {
		require.Contains(t, exported, id)
		in = append(in, exported[id])
	}
	require.Equal(t, allTrue(2), f.importJobs(t, in...))
	f.requireFound(t, topic, findKey, a, c)
}

// testCreateRace: creates of one id, from two instances at once, store one
// job: one create succeeds, every other gets the conflict with the job it
// made. Unique keys rest on it (core.KeyID): the id stands for the key, so
// this is what keeps two pushes of a key from both storing a job. The same
// holds once the job finished and its id is free again.
func testCreateRace(t *testing.T, b *testBundle) {
	const topic, racers = "keys.race", 8
	stores := []core.Store{b.store, b.open(t)}
	id := core.KeyID(topic, "order-1")
	for round := range 2 {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created []string
		)
		for i := range racers {
			wg.Go(func() {
				j := keyed(topic, "order-1", time.Now().Add(time.Hour))
				j.ID = id
				j.Body = json.RawMessage(strconv.Itoa(i))
				res, err := stores[i%2].PutJobs(b.ctx, &core.PutJobsParams{Jobs: []*core.Job{j}})
				if !assert.NoError(t, err) || !assert.Len(t, res, 1) {
					return
				}
				if res[0].Err == nil {
					mu.Lock()
					created = append(created, string(j.Body))
					mu.Unlock()
					return
				}
				assert.ErrorIs(t, res[0].Err, core.ErrConflict)
			})
		}
		wg.Wait()
		require.Len(t, created, 1, "round %d: one create stores the job", round)
		got := b.get(t, id)
		require.Equal(t, created[0], string(got.Body), "round %d: the job of the create that won", round)
		b.requireFound(t, topic, "order-1", got)
		if round == 0 {
			require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: id}))
		}
	}
}
