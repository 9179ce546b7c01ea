package storetest

import (
	"cmp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// The subtests of ClaimJobsParams.KeyConcurrency. A store that refuses a
// topic with key_concurrency (core.TopicChecker) skips them.

// keyConcurrency skips t when the bundle's store refuses key_concurrency.
func (b *testBundle) keyConcurrency(t *testing.T) {
	t.Helper()
	if err := core.CheckTopicOn(b.store, &core.Topic{Name: "kc", KeyConcurrency: 1}); err != nil {
		t.Skipf("the store refuses key_concurrency: %v", err)
	}
}

// testKeyConcurrencyRefused: a store that refuses key_concurrency says so
// on the field, naming the backend, and refuses nothing else of a topic.
func testKeyConcurrencyRefused(t *testing.T, b *testBundle) {
	err := core.CheckTopicOn(b.store, &core.Topic{Name: "kc", KeyConcurrency: 1})
	if err == nil {
		t.Skip("the store honours key_concurrency")
	}
	var fe *core.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "key_concurrency", fe.Field)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.Contains(t, err.Error(), "backend", "the message names the backend")
	full := coretest.FullTopic(t)
	full.KeyConcurrency, full.Fair, full.Rate.PerKey = 0, false, false
	require.NoError(t, core.CheckTopicOn(b.store, full), "every other setting")
}

// claimKC claims up to max jobs of topic on s with KeyConcurrency kc,
// waiting up to wait.
func (b *testBundle) claimKC(t *testing.T, s core.Store, topic string, max, kc int, wait time.Duration) []*core.Job {
	t.Helper()
	jobs, err := s.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: max, Wait: wait, KeyConcurrency: kc})
	require.NoError(t, err)
	require.LessOrEqual(t, len(jobs), max)
	for _, j := range jobs {
		requireClaimed(t, j, topic)
	}
	return jobs
}

// keyedDue returns jobs of topic, each with the key of keys at its place
// ("" for none), due in that order: the first a second ago, each next a
// millisecond later.
func keyedDue(topic string, keys ...string) []*core.Job {
	start := time.Now().Add(-time.Second)
	jobs := make([]*core.Job, len(keys))
	for i, k := range keys {
		jobs[i] = keyed(topic, k, start.Add(time.Duration(i)*time.Millisecond))
	}
	return jobs
}

// testKeyConcurrencyOrder: with KeyConcurrency 1 each key has one job
// reserved at most, its jobs going out one at a time in claim order (FIFO
// per key), two keys interleaved; jobs without a key are not bounded, and
// the jobs held back count as ready.
func testKeyConcurrencyOrder(t *testing.T, b *testBundle) {
	b.keyConcurrency(t)
	const topic = "kc.order"
	jobs := keyedDue(topic, "a", "b", "", "a", "b", "", "a", "b")
	b.put(t, jobs...)
	a1, b1, u1, a2, b2, u2, a3, b3 := jobs[0], jobs[1], jobs[2], jobs[3], jobs[4], jobs[5], jobs[6], jobs[7]

	got := b.claimKC(t, b.store, topic, 10, 1, dueWait)
	require.Equal(t, ids([]*core.Job{a1, b1, u1, u2}), ids(got), "the head of each key and every job without one")
	require.Empty(t, b.claimKC(t, b.store, topic, 10, 1, 0), "each key has its one job reserved")
	b.requireCounts(t, topic, core.Counts{Ready: 4, Reserved: 4})
	for _, j := range got {
		require.NoError(t, ack(b, j))
	}
	for _, want := range [][]*core.Job{{a2, b2}, {a3, b3}} {
		got := b.claimKC(t, b.store, topic, 10, 1, dueWait)
		require.Equal(t, ids(want), ids(got), "the next of each key")
		require.Empty(t, b.claimKC(t, b.store, topic, 10, 1, 0))
		for _, j := range got {
			require.NoError(t, ack(b, j))
		}
	}
	b.requireCounts(t, topic, core.Counts{Done: int64(len(jobs))})
}

// testKeyConcurrencyBound: claims racing on two instances with
// KeyConcurrency 2 never have more than two jobs of a key reserved at
// once, and one claim takes two of a key, not fewer.
func testKeyConcurrencyBound(t *testing.T, b *testBundle) {
	b.keyConcurrency(t)
	const topic = "kc.bound"
	keys := []string{}
	for range 8 {
		keys = append(keys, "x", "y", "z")
	}
	b.put(t, keyedDue(topic, keys...)...)
	stores := []core.Store{b.store, b.open(t)}

	first := b.claimKC(t, b.store, topic, 10, 2, dueWait)
	require.Len(t, first, 6, "two of each of the three keys")
	for _, j := range first {
		require.NoError(t, ack(b, j))
	}

	var (
		mu       sync.Mutex
		held     = map[string]int{} // counted after the claim, uncounted before the ack: never above the store's
		over     []string
		acked    int
		wg       sync.WaitGroup
		failures = make(chan error, 4)
	)
	for w := range 4 {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for {
				mu.Lock()
				done := acked == len(keys)-len(first)
				mu.Unlock()
				if done {
					return
				}
				jobs, err := s.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: 3, Wait: 50 * time.Millisecond, KeyConcurrency: 2})
				if err != nil {
					failures <- err
					return
				}
				mu.Lock()
				for _, j := range jobs {
					if held[j.Key]++; held[j.Key] > 2 {
						over = append(over, j.Key)
					}
				}
				mu.Unlock()
				for _, j := range jobs {
					mu.Lock()
					held[j.Key]--
					mu.Unlock()
					if _, err := s.AckJob(b.ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease}); err != nil {
						failures <- err
						return
					}
					mu.Lock()
					acked++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		require.NoError(t, err)
	}
	require.Empty(t, over, "keys with a third job reserved")
	b.requireCounts(t, topic, core.Counts{Done: int64(len(keys))})
}

// testKeyConcurrencySlots: each way a delivery ends gives its key's slot
// back, and the key's next job goes out: ack (to a claim waiting for it),
// retry, bury, a cancel of the running job, a lease that runs out.
func testKeyConcurrencySlots(t *testing.T, b *testBundle) {
	b.keyConcurrency(t)
	for _, end := range []struct {
		name string
		ttr  time.Duration
		end  func(j *core.Job) error
	}{
		{"ack", 0, func(j *core.Job) error { return ack(b, j) }},
		{"retry", 0, func(j *core.Job) error {
			return settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: j.ID, Lease: j.Lease, Error: "x", RunAt: time.Now().Add(time.Hour)}))
		}},
		{"unsent", 0, func(j *core.Job) error {
			return settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: j.ID, Lease: j.Lease, Unsent: true, RunAt: time.Now().Add(time.Hour)}))
		}},
		{"bury", 0, func(j *core.Job) error {
			return settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: j.ID, Lease: j.Lease, Error: "x"}))
		}},
		{"cancel", 0, func(j *core.Job) error {
			return b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: j.ID, Running: true})
		}},
		{"expiry", core.TTRMin, func(j *core.Job) error {
			b.passUntil(t, j.LeaseExpiresAt.Add(100*time.Millisecond))
			return nil
		}},
	} {
		topic := "kc.slot." + end.name
		jobs := keyedDue(topic, "k", "k")
		jobs[0].TTR = cmp.Or(end.ttr, jobs[0].TTR)
		jobs[0].MaxAttempts = 1 // a lease that runs out kills it, so that the next goes
		b.put(t, jobs...)
		got := b.claimKC(t, b.store, topic, 5, 1, dueWait)
		require.Equal(t, ids(jobs[:1]), ids(got), end.name)
		if end.ttr == 0 { // (a short lease may have run out already on a loaded machine)
			require.Empty(t, b.claimKC(t, b.store, topic, 5, 1, 0), "%s: the key's slot is taken", end.name)
		}

		waiting := make(chan []*core.Job, 1)
		go func() {
			jobs, err := b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: 5, Wait: 2 * dueWait, KeyConcurrency: 1})
			if err != nil {
				jobs = nil
			}
			waiting <- jobs
		}()
		require.NoError(t, end.end(got[0]), end.name)
		require.Equal(t, ids(jobs[1:]), ids(<-waiting), "%s gives the slot back to a waiting claim", end.name)
	}
}

// testKeyConcurrencyChanged: jobs held back under a limit go out when a
// claim comes with a higher one, or none; and a limit set while jobs of a
// key are reserved without one counts them from its first claim.
func testKeyConcurrencyChanged(t *testing.T, b *testBundle) {
	b.keyConcurrency(t)
	const topic = "kc.changed"
	jobs := keyedDue(topic, "k", "k", "k", "k")
	b.put(t, jobs...)
	require.Equal(t, ids(jobs[:1]), ids(b.claimKC(t, b.store, topic, 10, 1, dueWait)))
	require.Empty(t, b.claimKC(t, b.store, topic, 10, 1, 0), "held back under 1")
	require.Equal(t, ids(jobs[1:2]), ids(b.claimKC(t, b.store, topic, 10, 2, dueWait)), "raised to 2: one more")
	require.Empty(t, b.claimKC(t, b.store, topic, 10, 1, 0), "lowered to 1: none")
	require.Equal(t, ids(jobs[2:]), ids(b.claimKC(t, b.store, topic, 10, 0, dueWait)), "dropped: the rest")
	b.requireCounts(t, topic, core.Counts{Reserved: 4})

	const set = "kc.set"
	jobs = keyedDue(set, "k", "k", "k", "k")
	b.put(t, jobs...)
	first := b.claimKC(t, b.store, set, 1, 0, dueWait)
	require.Equal(t, ids(jobs[:1]), ids(first), "no limit")
	require.Empty(t, b.claimKC(t, b.store, set, 10, 1, 0), "set to 1: the job reserved without it holds the key's slot")
	require.NoError(t, ack(b, first[0]))
	second := b.claimKC(t, b.store, set, 10, 1, dueWait)
	require.Equal(t, ids(jobs[1:2]), ids(second), "the slot came back with the ack")
	require.Equal(t, ids(jobs[2:3]), ids(b.claimKC(t, b.store, set, 1, 0, dueWait)), "no limit again")
	require.Empty(t, b.claimKC(t, b.store, set, 10, 2, 0), "set to 2: one job reserved with a limit, one without")
	require.NoError(t, ack(b, second[0]))
	require.Equal(t, ids(jobs[3:]), ids(b.claimKC(t, b.store, set, 10, 2, dueWait)), "a slot came back")
}

// testKeyConcurrencyHeldBack: a job held back behind its key's reserved
// one is ready to every reader (get, list, counts); it can be cancelled
// and replaced, is no dead job to requeue, and once the key's slot comes
// back the key's jobs left go out in order, the replaced one with its new
// body; a dead job of the key requeued meanwhile waits its turn too.
func testKeyConcurrencyHeldBack(t *testing.T, b *testBundle) {
	b.keyConcurrency(t)
	const topic = "kc.held"
	jobs := keyedDue(topic, "k", "k", "k", "k")
	b.put(t, jobs...)
	j2, j3, j4 := jobs[1], jobs[2], jobs[3]
	first := b.claimKC(t, b.store, topic, 10, 1, dueWait)
	require.Equal(t, ids(jobs[:1]), ids(first))
	require.Empty(t, b.claimKC(t, b.store, topic, 10, 1, 0), "held back")

	b.requireState(t, j2.ID, core.StateReady)
	page, err := b.store.ListJobs(b.ctx, &core.ListJobsParams{Topic: topic, State: core.StateReady, Limit: 10})
	require.NoError(t, err)
	require.ElementsMatch(t, ids(jobs[1:]), ids(page.Jobs), "listed ready")
	b.requireCounts(t, topic, core.Counts{Ready: 3, Reserved: 1})

	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: j2.ID}))
	b.requireState(t, j2.ID, core.StateCancelled)
	replaced := j3.Clone()
	replaced.Body = []byte(`{"n":2}`)
	res := b.putResults(t, true, replaced)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	require.ErrorIs(t, b.store.RequeueJob(b.ctx, j4.ID), core.ErrConflict, "not dead")
	b.requireCounts(t, topic, core.Counts{Ready: 2, Reserved: 1, Cancelled: 1})

	require.NoError(t, ack(b, first[0]))
	got := b.claimKC(t, b.store, topic, 10, 1, dueWait)
	require.Equal(t, []string{j3.ID}, ids(got), "the replaced job, in its place")
	require.JSONEq(t, `{"n":2}`, string(got[0].Body))
	require.NoError(t, ack(b, got[0]))
	j4got := b.claimKC(t, b.store, topic, 10, 1, dueWait)
	require.Equal(t, []string{j4.ID}, ids(j4got))
	require.Empty(t, b.claimKC(t, b.store, topic, 10, 1, 0))

	// A dead job of the key requeued while the key's slot is taken waits
	// behind it, ready, and goes once the slot comes back.
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: j4.ID, Lease: j4got[0].Lease, Error: "x"})))
	dead := keyedDue(topic, "k")[0]
	b.put(t, dead)
	held := b.claimKC(t, b.store, topic, 10, 1, dueWait)
	require.Equal(t, []string{dead.ID}, ids(held))
	require.NoError(t, b.store.RequeueJob(b.ctx, j4.ID))
	require.Empty(t, b.claimKC(t, b.store, topic, 10, 1, 0), "the requeued job waits")
	b.requireState(t, j4.ID, core.StateReady)
	require.NoError(t, ack(b, held[0]))
	require.Equal(t, []string{j4.ID}, ids(b.claimKC(t, b.store, topic, 10, 1, dueWait)), "the requeued job, once the slot came back")
}

// testKeyConcurrencyRestart: with a durable backend, a restart keeps a
// key's reserved job holding its slot, lease and all (a job held back
// behind it is ready, and stays back), until the lease ends.
func testKeyConcurrencyRestart(t *testing.T, b *testBundle) {
	b.keyConcurrency(t)
	if !b.h.Durable {
		t.Skip("the backend is not durable")
	}
	const topic = "kc.restart"
	jobs := keyedDue(topic, "k", "k", "")
	b.put(t, jobs...)
	first := b.claimKC(t, b.store, topic, 1, 1, dueWait)
	require.Equal(t, ids(jobs[:1]), ids(first))

	require.NoError(t, b.store.Close())
	b.store = b.open(t)
	b.requireCounts(t, topic, core.Counts{Ready: 2, Reserved: 1})
	require.Equal(t, ids(jobs[2:]), ids(b.claimKC(t, b.store, topic, 10, 1, dueWait)), "the job without a key; the key's slot is still taken")
	require.NoError(t, ack(b, first[0]))
	require.Equal(t, ids(jobs[1:2]), ids(b.claimKC(t, b.store, topic, 10, 1, dueWait)), "the slot came back with the ack")
}
