package memstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/core/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStore runs the conformance suite: opening a namespace again gives the
// same *Store, the closest a memory store comes to a second instance.
func TestStore(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		stores = map[string]*memstore.Store{}
	)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, ns string) core.Store {
			mu.Lock()
			defer mu.Unlock()
			s, ok := stores[ns]
			if !ok {
				s = memstore.New(memstore.Config{})
				stores[ns] = s
			}
			return s
		},
		OpenRetention: func(t *testing.T, ns string, retention time.Duration) core.Store {
			return memstore.New(memstore.Config{Retention: retention})
		},
		OpenClock: func(t *testing.T, ns string, clock core.Clock) core.Store {
			return memstore.New(memstore.Config{Clock: clock})
		},
		Durable: false,
	})
}

type testBundle struct {
	clock *coretest.FakeClock
	store *memstore.Store
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Config{Clock: clock, Retention: time.Hour})
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return &testBundle{clock: clock, store: s}
}

type claimResult struct {
	jobs []*core.Job
	err  error
}

func (b *testBundle) claimAsync(t *testing.T, topic string, wait time.Duration) <-chan claimResult {
	ch := make(chan claimResult, 1)
	go func() {
		jobs, err := b.store.ClaimJobs(t.Context(), &core.ClaimJobsParams{Topic: topic, Max: 10, Wait: wait})
		ch <- claimResult{jobs, err}
	}()
	return ch
}

func (b *testBundle) put(t *testing.T, jobs ...*core.Job) {
	t.Helper()
	res, err := b.store.PutJobs(t.Context(), &core.PutJobsParams{Jobs: jobs})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
}

// TestFakeClockWakesClaim: a claim waiting on a topic is woken by the fake
// clock passing the run_at of a scheduled job, not before, and reserves it
// at exactly its run_at.
func TestFakeClockWakesClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	job := storetest.NewJob("orders.close", b.clock.Now().Add(1500*time.Millisecond))
	b.put(t, job)

	ch := b.claimAsync(t, "orders.close", 10*time.Second)
	// The claim's wait timer and the topic's timer for job's run_at.
	require.NoError(t, b.clock.BlockUntilContext(t.Context(), 2))
	b.clock.Advance(1499 * time.Millisecond)
	select {
	case r := <-ch:
		require.Failf(t, "claim returned before run_at", "%+v", r)
	default:
	}
	b.clock.Advance(time.Millisecond)
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	c := r.jobs[0]
	require.Equal(t, job.ID, c.ID)
	require.Equal(t, 1, c.Attempt)
	require.Equal(t, job.RunAt.Add(job.TTR), c.LeaseExpiresAt, "reserved at exactly run_at")
}

// TestFakeClockLeaseExpiry: a claim waiting on a topic is woken when a lease
// expires and gets the job again; on the last attempt the job goes dead.
func TestFakeClockLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	job := storetest.NewJob("t", b.clock.Now())
	job.TTR = time.Second
	job.MaxAttempts = 2
	b.put(t, job)
	jobs, err := b.store.ClaimJobs(t.Context(), &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	ch := b.claimAsync(t, "t", 10*time.Second)
	require.NoError(t, b.clock.BlockUntilContext(t.Context(), 2))
	b.clock.Advance(time.Second)
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, 2, r.jobs[0].Attempt)
	require.Equal(t, core.LeaseExpired, r.jobs[0].LastError)

	ch = b.claimAsync(t, "t", 10*time.Second)
	require.NoError(t, b.clock.BlockUntilContext(t.Context(), 2))
	b.clock.Advance(time.Second)
	got, err := b.store.GetJob(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDead, got.State)
	require.Equal(t, core.LeaseExpired, got.LastError)
	require.Equal(t, b.clock.Now().UTC(), got.UpdatedAt, "died when the lease expired")
	// The waiting claim gets nothing: its wait runs out.
	require.NoError(t, b.clock.BlockUntilContext(t.Context(), 1))
	b.clock.Advance(9 * time.Second)
	r = <-ch
	require.NoError(t, r.err)
	require.Empty(t, r.jobs)
}

// TestFakeClockKeySlotOnExpiry: with key_concurrency 1, a lease that
// expires gives its key's slot back on the clock, to the millisecond: the
// claim waiting on the topic gets the key's next job, held back until then.
func TestFakeClockKeySlotOnExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := storetest.NewJob("t", b.clock.Now().Add(-time.Millisecond))
	first.Key, first.TTR, first.MaxAttempts = "k", time.Second, 1
	next := storetest.NewJob("t", b.clock.Now())
	next.Key = "k"
	b.put(t, first, next)
	claim := func(wait time.Duration) <-chan claimResult {
		ch := make(chan claimResult, 1)
		go func() {
			jobs, err := b.store.ClaimJobs(t.Context(), &core.ClaimJobsParams{Topic: "t", Max: 10, Wait: wait, KeyConcurrency: 1})
			ch <- claimResult{jobs, err}
		}()
		return ch
	}
	r := <-claim(0)
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, first.ID, r.jobs[0].ID)

	ch := claim(10 * time.Second)
	// The claim's wait timer and the topic's timer for the lease's expiry.
	require.NoError(t, b.clock.BlockUntilContext(t.Context(), 2))
	b.clock.Advance(time.Second - time.Millisecond)
	select {
	case r := <-ch:
		require.Failf(t, "claimed before the lease expired", "%+v", r)
	default:
	}
	b.clock.Advance(time.Millisecond)
	r = <-ch
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, next.ID, r.jobs[0].ID, "the key's next job, once the lease expired")
	got, err := b.store.GetJob(t.Context(), first.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDead, got.State, "its last attempt")
}

// TestRetention: finished jobs are dropped after the retention period, to
// the nanosecond of the clock, and with them their counts and a topic that
// has nothing else.
func TestRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	done := storetest.NewJob("t", b.clock.Now())
	cancelled := storetest.NewJob("t", b.clock.Now().Add(time.Hour))
	b.put(t, done, cancelled)
	jobs, err := b.store.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.NoError(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: done.ID, Lease: jobs[0].Lease})))
	b.clock.Advance(time.Minute)
	require.NoError(t, b.store.CancelJob(ctx, &core.CancelJobParams{ID: cancelled.ID}))
	b.requireCounts(t, "t", core.Counts{Done: 1, Cancelled: 1})

	b.clock.Advance(time.Hour - time.Minute - time.Nanosecond)
	_, err = b.store.GetJob(ctx, done.ID)
	require.NoError(t, err, "within retention")
	b.requireCounts(t, "t", core.Counts{Done: 1, Cancelled: 1})
	b.clock.Advance(time.Nanosecond)
	b.requireCounts(t, "t", core.Counts{Cancelled: 1})
	_, err = b.store.GetJob(ctx, done.ID)
	require.ErrorIs(t, err, core.ErrNotFound, "past retention")
	got, err := b.store.GetJob(ctx, cancelled.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateCancelled, got.State)
	topics, err := b.store.ListTopicStates(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 1)

	b.clock.Advance(time.Minute)
	_, err = b.store.GetJob(ctx, cancelled.ID)
	require.ErrorIs(t, err, core.ErrNotFound)
	topics, err = b.store.ListTopicStates(ctx)
	require.NoError(t, err)
	require.Empty(t, topics, "a topic with no jobs left")
}

// requireCounts requires the counts of topic, from GetTopicState and ListTopicStates.
func (b *testBundle) requireCounts(t *testing.T, topic string, want core.Counts) {
	t.Helper()
	tp, err := b.store.GetTopicState(t.Context(), topic)
	require.NoError(t, err)
	require.Equal(t, want, tp.Counts, "GetTopicState")
	topics, err := b.store.ListTopicStates(t.Context())
	require.NoError(t, err)
	for _, tp := range topics {
		if tp.Name == topic {
			require.Equal(t, want, tp.Counts, "ListTopicStates")
			return
		}
	}
	require.Fail(t, "not listed", topic)
}

// settleErr drops the result of a settling call (AckJob, RetryJob,
// BuryJob), for checks of its error alone.
func settleErr(_ core.SettleResult, err error) error { return err }
