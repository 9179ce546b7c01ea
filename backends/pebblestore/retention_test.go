package pebblestore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/core/storetest"
)

// retentionStart is when the fake clocks of these tests begin.
var retentionStart = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// finishOne advances clock by step, then puts a job due now in topic and
// finishes it, done when cancel is false (claimed and acknowledged), else
// cancelled, so that finish times order the jobs.
func finishOne(t *testing.T, s *Store, clock *coretest.FakeClock, step time.Duration, topic string, cancel bool) string {
	t.Helper()
	ctx := context.Background()
	clock.Advance(step)
	j := storetest.NewJob(topic, clock.Now())
	res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	if cancel {
		require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: j.ID}))
		return j.ID
	}
	claimed, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic, Max: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, j.ID, claimed[0].ID)
	_, err = s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: claimed[0].Lease})
	require.NoError(t, err)
	return j.ID
}

// requireKept requires the finished jobs of ids that gone names to be
// gone (GetJob: not found) and the others kept in their finished state.
func requireKept(t *testing.T, s *Store, ids []string, gone map[string]bool) {
	t.Helper()
	for _, id := range ids {
		j, err := s.GetJob(context.Background(), id)
		if gone[id] {
			require.ErrorIs(t, err, core.ErrNotFound, "job %s should be pruned", id)
			continue
		}
		require.NoError(t, err, "job %s should be kept", id)
		require.True(t, j.State.Finished(), "job %s is %s", id, j.State)
	}
}

// finishedCountsOf returns the done and cancelled counts of the topics.
func finishedCountsOf(t *testing.T, s *Store, topics ...string) (done, cancelled int64) {
	t.Helper()
	for _, name := range topics {
		tp, err := s.GetTopicState(context.Background(), name)
		require.NoError(t, err)
		done += tp.Counts.Done
		cancelled += tp.Counts.Cancelled
	}
	return done, cancelled
}

// kept returns the finished jobs s counts as kept, as the prune reads
// them.
func kept(s *Store) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finishedKept()
}

// countKeys returns how many c keys (finished count buckets) the disk
// holds.
func countKeys(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	require.NoError(t, s.scan(prefixCount, func(_, _ []byte) error { n++; return nil }))
	return n
}

// TestRetentionMaxJobs: with a bound on finished jobs, the prune deletes
// the oldest finished jobs over it, in finish order and across topics,
// long before their retention ends; GetJob no longer finds them and the
// done and cancelled counts stop counting them. The count the bound is
// checked against is the count buckets' sum, which a put reusing a
// finished id lowers, a restart keeps, and a smaller bound at the next
// start prunes down to. The prune past retention takes its jobs out of
// the buckets too, so nothing is counted once all are gone.
func TestRetentionMaxJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clock := coretest.NewFakeClockAt(retentionStart)
	cfg := Config{Dir: dir, Clock: clock, Retention: time.Hour, RetentionMaxJobs: 5}
	s, err := Open(cfg)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()

	// Ten finished jobs, in two topics, every third cancelled.
	var ids []string
	cancelled := map[string]bool{}
	for i := range 10 {
		topic := []string{"ret.a", "ret.b"}[i%2]
		id := finishOne(t, s, clock, time.Millisecond, topic, i%3 == 2)
		ids = append(ids, id)
		cancelled[id] = i%3 == 2
	}
	done, canc := finishedCountsOf(t, s, "ret.a", "ret.b")
	require.Equal(t, int64(10), done+canc)

	require.NoError(t, s.prune(s.now()))
	gone := map[string]bool{}
	for _, id := range ids[:5] {
		gone[id] = true
	}
	requireKept(t, s, ids, gone)
	// The five kept: ids[5:], of which ids[5] and ids[8] were cancelled.
	done, canc = finishedCountsOf(t, s, "ret.a", "ret.b")
	require.Equal(t, [2]int64{3, 2}, [2]int64{done, canc})
	require.Equal(t, int64(5), kept(s))
	// Per topic too: ret.a kept ids[6] and ids[8] (cancelled), ret.b
	// ids[5] (cancelled), ids[7] and ids[9].
	a, err := s.GetTopicState(ctx, "ret.a")
	require.NoError(t, err)
	require.Equal(t, core.Counts{Done: 1, Cancelled: 1}, a.Counts)
	b, err := s.GetTopicState(ctx, "ret.b")
	require.NoError(t, err)
	require.Equal(t, core.Counts{Done: 2, Cancelled: 1}, b.Counts)

	// A prune at the bound deletes nothing.
	require.NoError(t, s.prune(s.now()))
	requireKept(t, s, ids, gone)

	// A put that reuses a kept finished id takes it out of the count: four
	// kept, under the bound, so nothing more goes.
	again := storetest.NewJob("ret.a", clock.Now().Add(time.Hour))
	again.ID = ids[6]
	res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{again}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, int64(4), kept(s))
	require.NoError(t, s.prune(s.now()))
	requireKept(t, s, []string{ids[5], ids[7], ids[8], ids[9]}, nil)

	// A restart keeps the count (from the count buckets, no scan).
	require.NoError(t, s.Close())
	s, err = Open(cfg)
	require.NoError(t, err)
	require.Equal(t, int64(4), kept(s))
	done, canc = finishedCountsOf(t, s, "ret.a", "ret.b")
	require.Equal(t, [2]int64{2, 2}, [2]int64{done, canc})

	// Three more finished: seven kept, the two oldest go.
	for range 3 {
		ids = append(ids, finishOne(t, s, clock, time.Millisecond, "ret.b", false))
	}
	require.NoError(t, s.prune(s.now()))
	gone[ids[5]], gone[ids[7]] = true, true
	requireKept(t, s, []string{ids[5], ids[7], ids[8], ids[9], ids[10], ids[11], ids[12]}, gone)
	require.Equal(t, int64(5), kept(s))
	done, canc = finishedCountsOf(t, s, "ret.a", "ret.b")
	require.Equal(t, [2]int64{4, 1}, [2]int64{done, canc})

	// A smaller bound at the next start prunes down to it at the first
	// prune; the job put again stays, unfinished.
	require.NoError(t, s.Close())
	cfg.RetentionMaxJobs = 2
	s, err = Open(cfg)
	require.NoError(t, err)
	require.NoError(t, s.prune(s.now()))
	gone[ids[8]], gone[ids[9]], gone[ids[10]] = true, true, true
	requireKept(t, s, ids[8:], gone)
	require.Equal(t, int64(2), kept(s))
	done, canc = finishedCountsOf(t, s, "ret.a", "ret.b")
	require.Equal(t, [2]int64{2, 0}, [2]int64{done, canc})
	j, err := s.GetJob(ctx, ids[6])
	require.NoError(t, err)
	require.Equal(t, core.StateScheduled, j.State)

	// Past retention the last two go, and their buckets with them.
	clock.Advance(time.Hour + time.Second)
	require.NoError(t, s.prune(s.now()))
	requireKept(t, s, ids[11:], map[string]bool{ids[11]: true, ids[12]: true})
	require.Zero(t, kept(s))
	require.Zero(t, countKeys(t, s))
	done, canc = finishedCountsOf(t, s, "ret.a", "ret.b")
	require.Zero(t, done+canc)
}

// TestRetentionMaxJobsPrunesOnItsOwn: the background prune applies the
// bound every pruneIntervalBounded of the store's clock.
func TestRetentionMaxJobsPrunesOnItsOwn(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(retentionStart)
	s, err := Open(Config{Dir: t.TempDir(), Clock: clock, Retention: 24 * time.Hour, RetentionMaxJobs: 1})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	require.Equal(t, pruneIntervalBounded, s.pruneInterval())
	var ids []string
	for range 3 {
		ids = append(ids, finishOne(t, s, clock, time.Millisecond, "ret.tick", false))
	}
	require.Eventually(t, func() bool {
		clock.Advance(pruneIntervalBounded)
		_, err := s.GetJob(context.Background(), ids[1])
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
	requireKept(t, s, ids, map[string]bool{ids[0]: true, ids[1]: true})
	done, _ := finishedCountsOf(t, s, "ret.tick")
	require.Equal(t, int64(1), done)
}

// TestRetentionWithoutBound: without a bound, the prune past retention
// takes each job out of its count bucket as it deletes it, so a job
// stops being counted at the prune, and a bucket half past retention
// counts only the jobs still kept.
func TestRetentionWithoutBound(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(retentionStart)
	retention := 64 * time.Minute // buckets of a minute
	s, err := Open(Config{Dir: t.TempDir(), Clock: clock, Retention: retention})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	require.Equal(t, time.Minute, s.pruneInterval())
	clock.Advance(50 * time.Second) // 12:00:50, ten seconds before the first tick
	var ids []string
	for range 5 { // a second apart, from 12:00:51, in one bucket
		ids = append(ids, finishOne(t, s, clock, time.Second, "ret.time", false))
	}
	require.Equal(t, int64(5), kept(s))
	// Retention ends for the first two only (finished at :51 and :52).
	clock.Advance(retention - 2500*time.Millisecond)
	require.NoError(t, s.prune(s.now()))
	requireKept(t, s, ids, map[string]bool{ids[0]: true, ids[1]: true})
	require.Equal(t, int64(3), kept(s))
	done, _ := finishedCountsOf(t, s, "ret.time")
	require.Equal(t, int64(3), done)
}

// TestRetentionMaxJobsValidate refuses a negative bound.
func TestRetentionMaxJobsValidate(t *testing.T) {
	t.Parallel()
	_, err := Open(Config{Dir: t.TempDir(), RetentionMaxJobs: -1})
	require.ErrorContains(t, err, "RetentionMaxJobs")
}

// TestKeyIndexFollowsJobs: a job's k key goes when the job does (a prune
// past retention, a put that reuses its finished id) or moves (a replace
// with another key), so the index holds one key per kept job with a key.
func TestKeyIndexFollowsJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := coretest.NewFakeClockAt(retentionStart)
	retention := 64 * time.Minute
	s, err := Open(Config{Dir: t.TempDir(), Clock: clock, Retention: retention})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	indexed := func() []string {
		var keys []string
		require.NoError(t, s.scan(prefixKey, func(k, _ []byte) error { keys = append(keys, string(k)); return nil }))
		return keys
	}
	put := func(replace bool, j *core.Job) {
		t.Helper()
		res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j}, Replace: replace})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	const topic = "keys.index"
	pruned, reused, moved := storetest.NewJob(topic, clock.Now()), storetest.NewJob(topic, clock.Now()), storetest.NewJob(topic, clock.Now().Add(time.Hour))
	pruned.Key, reused.Key, moved.Key = "a", "b", "c"
	put(false, pruned)
	put(false, reused)
	put(false, moved)
	require.Equal(t, []string{
		string(keyIndexKey(topic, "a", pruned.ID)),
		string(keyIndexKey(topic, "b", reused.ID)),
		string(keyIndexKey(topic, "c", moved.ID)),
	}, indexed())

	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: pruned.ID}))
	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: reused.ID}))
	again := reused.Clone()
	again.Key = "d"
	put(false, again)
	m := moved.Clone()
	m.Key = ""
	put(true, m)
	require.ElementsMatch(t, []string{
		string(keyIndexKey(topic, "a", pruned.ID)),
		string(keyIndexKey(topic, "d", reused.ID)),
	}, indexed())

	clock.Advance(retention + time.Second)
	require.NoError(t, s.prune(s.now()))
	require.Equal(t, []string{string(keyIndexKey(topic, "d", reused.ID))}, indexed())
}

// TestKeysIndexedAtFirstOpen: a database from before the index of business
// keys (no k keys, no mark) gets the k keys of its jobs, unfinished and
// finished, at its next Open.
func TestKeysIndexedAtFirstOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	require.NoError(t, err)
	waiting, done := storetest.NewJob("keys.old", time.Now().Add(time.Hour)), storetest.DueJob("keys.old")
	waiting.Key, done.Key = "order:1", "order:1"
	storetest.Put(t, ctx, s, waiting, done, storetest.NewJob("keys.old", time.Now().Add(time.Hour)))
	claimed, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "keys.old", Max: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = s.AckJob(ctx, &core.AckJobParams{ID: done.ID, Lease: claimed[0].Lease})
	require.NoError(t, err)
	// As an earlier version left it.
	b := s.db.NewBatch()
	require.NoError(t, s.scan(prefixKey, func(k, _ []byte) error { return b.Delete(slices.Clone(k), nil) }))
	require.NoError(t, b.Delete([]byte(keysIndexedKey), nil))
	require.NoError(t, b.Commit(pebble.Sync))
	got, err := s.FindJobs(ctx, &core.FindJobsParams{Topic: "keys.old", Key: "order:1", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, s.Close())

	s, err = Open(Config{Dir: dir})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	got, err = s.FindJobs(ctx, &core.FindJobsParams{Topic: "keys.old", Key: "order:1", Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.ElementsMatch(t, []string{waiting.ID, done.ID}, []string{got[0].ID, got[1].ID})
	mark, err := s.get([]byte(keysIndexedKey))
	require.NoError(t, err)
	require.NotNil(t, mark)
}

// TestPutOverFinishedAcrossReopen: a put that reuses the id of a finished
// job takes it out of its topic's done count and makes it pending again,
// in the process that finished it and after a reopen, where the newest
// finished generated id (core.NewID's form) is read from the disk, past
// an id of another form at the end of the finished jobs.
func TestPutOverFinishedAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := coretest.NewFakeClockAt(retentionStart)
	open := func() *Store {
		s, err := Open(Config{Dir: dir, Clock: clock})
		require.NoError(t, err)
		return s
	}
	s := open()
	older := finishOne(t, s, clock, time.Second, "reuse", false)
	newer := finishOne(t, s, clock, time.Second, "reuse", false)
	client := storetest.NewJob("reuse", clock.Now())
	client.ID = "7-a-client-id"
	_, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{client}})
	require.NoError(t, err)
	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: client.ID}))
	require.Equal(t, newer, s.newestFinished)
	require.NoError(t, s.Close())

	s = open()
	defer func() { require.NoError(t, s.Close()) }()
	require.Equal(t, newer, s.newestFinished, "read from the disk at Open")
	done, cancelled := finishedCountsOf(t, s, "reuse")
	require.Equal(t, [2]int64{2, 1}, [2]int64{done, cancelled})
	for _, id := range []string{newer, older, client.ID} {
		j := storetest.NewJob("reuse", clock.Now().Add(time.Hour))
		j.ID = id
		res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		got, err := s.GetJob(ctx, id)
		require.NoError(t, err)
		require.Equal(t, core.StateScheduled, got.State, id)
	}
	done, cancelled = finishedCountsOf(t, s, "reuse")
	require.Zero(t, done)
	require.Zero(t, cancelled)
}

// TestGeneratedID tells the ids core.NewID gives from others.
func TestGeneratedID(t *testing.T) {
	require.True(t, generatedID(core.NewID()))
	for _, id := range []string{"", "7-a-client-id", "k-0123456789abcdef0123456789abcdef", "01ARZ3NDEKTSV4RRFFQ69G5FA", "01ARZ3NDEKTSV4RRFFQ69G5FAVV", "81ARZ3NDEKTSV4RRFFQ69G5FAV", "01arz3ndektsv4rrffq69g5fav"} {
		require.False(t, generatedID(id), id)
	}
}
