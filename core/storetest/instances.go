package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// dueWait is how long a claim that expects a due job waits for it: a claim
// returns as soon as a job is there, so a correct store never waits it out.
const dueWait = 2 * time.Second

// reopenWait bounds a claim of a job due before its store was reopened:
// a NATS store that had fetched the job before it closed leaves it to the
// consumer's ack wait (10 s, docs/backends.md) to come back.
const reopenWait = 10 * time.Second

// claimAllConcurrently claims from topic with workers goroutines per store,
// max at a time, until n jobs were claimed (then claims still waiting are
// ended through their ctx) or each worker had a claim wait out its wait. It
// returns how often each job was claimed, and the claimed jobs.
func claimAllConcurrently(t *testing.T, b *testBundle, stores []core.Store, topic string, n, workers, max int,
	wait time.Duration) (map[string]int, map[string]*core.Job) {
	t.Helper()
	ctx, stop := context.WithCancel(b.ctx)
	defer stop()
	var (
		mu       sync.Mutex
		claimed  = map[string]int{}
		got      = map[string]*core.Job{}
		total    int
		failures errs
		wg       sync.WaitGroup
	)
	for si, s := range stores {
		for range workers {
			wg.Go(func() {
				for {
					jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic, Max: max, Wait: wait})
					if err != nil {
						failures.add(fmt.Errorf("store %d: %w", si, err))
						return
					}
					if len(jobs) > max {
						failures.add(fmt.Errorf("store %d: claim of %d returned %d", si, max, len(jobs)))
					}
					for i := 1; i < len(jobs); i++ {
						if jobs[i].RunAt.Before(jobs[i-1].RunAt) {
							failures.add(fmt.Errorf("store %d: one claim out of run_at order", si))
						}
					}
					mu.Lock()
					for _, j := range jobs {
						claimed[j.ID]++
						got[j.ID] = j
					}
					total += len(jobs)
					if total >= n {
						stop()
					}
					mu.Unlock()
					if len(jobs) == 0 {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	require.NoError(t, failures.err())
	return claimed, got
}

// requireOnce requires each job to be claimed exactly once and nothing else.
func requireOnce(t *testing.T, jobs []*core.Job, claimed map[string]int) {
	t.Helper()
	for _, j := range jobs {
		require.Equal(t, 1, claimed[j.ID], "job %s claimed %d times", j.ID, claimed[j.ID])
	}
	require.Len(t, claimed, len(jobs), "claimed jobs that were not put")
}

// testTwoInstances: two stores over one namespace see the same jobs, and
// claims from both, concurrently, deliver each job once while its lease
// holds; a lease from one acknowledges on the other.
func testTwoInstances(t *testing.T, b *testBundle) {
	const (
		topic = "shared"
		n     = 200
	)
	s1, s2 := b.store, b.open(t)
	var jobs []*core.Job
	for i := range n {
		jobs = append(jobs, NewJob(topic, time.Now().Add(time.Duration(i-n)*time.Millisecond)))
	}
	Put(t, b.ctx, s1, jobs[:n/2]...)
	Put(t, b.ctx, s2, jobs[n/2:]...)
	for _, s := range []core.Store{s1, s2} {
		got, err := s.GetJob(b.ctx, jobs[0].ID)
		require.NoError(t, err)
		require.Equal(t, core.StateReady, got.State)
		got, err = s.GetJob(b.ctx, jobs[n-1].ID)
		require.NoError(t, err)
		require.Equal(t, core.StateReady, got.State)
	}

	claimed, _ := claimAllConcurrently(t, b, []core.Store{s1, s2}, topic, n, 3, 10, dueWait)
	requireOnce(t, jobs, claimed)
	for _, s := range []core.Store{s1, s2} {
		require.Empty(t, Claim(t, b.ctx, s, topic, 10, 300*time.Millisecond), "a job was delivered again while its lease held")
	}

	// Claimed on one, acknowledged on the other; cancelled on one, seen
	// cancelled on the other.
	j := DueJob(topic + ".x")
	k := NewJob(topic+".x", time.Now().Add(time.Hour))
	Put(t, b.ctx, s1, j, k)
	c := Claim(t, b.ctx, s1, j.Topic, 1, dueWait)
	require.Len(t, c, 1)
	got, err := s2.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, got.State)
	require.NoError(t, settleErr(s2.AckJob(b.ctx, &core.AckJobParams{ID: c[0].ID, Lease: c[0].Lease})))
	require.NoError(t, s2.CancelJob(b.ctx, &core.CancelJobParams{ID: k.ID}))
	for id, state := range map[string]core.State{j.ID: core.StateDone, k.ID: core.StateCancelled} {
		got, err := s1.GetJob(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, state, got.State)
	}
	tp, err := s2.GetTopicState(b.ctx, topic)
	require.NoError(t, err)
	require.Equal(t, core.Counts{Reserved: n}, tp.Counts)
	tp, err = s2.GetTopicState(b.ctx, j.Topic)
	require.NoError(t, err)
	require.Equal(t, core.Counts{Done: 1, Cancelled: 1}, tp.Counts, "counts where the jobs finished")
}

// testTwoInstancesWakeUp: a claim waiting on one store is woken by a job put
// through the other, due now or due while it waits.
func testTwoInstancesWakeUp(t *testing.T, b *testBundle) {
	const topic = "wake2"
	s1, s2 := b.store, b.open(t)

	ch := claimAsync(b.ctx, s2, topic, 1, 5*time.Second)
	b.pass(t, 300*time.Millisecond)
	job := DueJob(topic)
	putAt := time.Now()
	Put(t, b.ctx, s1, job)
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, job.ID, r.jobs[0].ID)
	t.Logf("claim on the other instance woken %s after put", r.at.Sub(putAt))
	require.Less(t, r.at.Sub(putAt), time.Second, "claim not woken by a put on the other instance")

	ch = claimAsync(b.ctx, s2, topic, 1, 5*time.Second)
	b.pass(t, 200*time.Millisecond)
	later := NewJob(topic, time.Now().Add(400*time.Millisecond))
	Put(t, b.ctx, s1, later)
	r = <-ch
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, later.ID, r.jobs[0].ID)
	t.Logf("claim on the other instance woken %s after run_at", r.at.Sub(later.RunAt))
	require.False(t, r.at.Before(later.RunAt.Add(-earlySlack)), "claimed before run_at")
	require.Less(t, r.at.Sub(later.RunAt), time.Second, "claim not woken at run_at")
}

// testRestart: with a durable backend, closing every store of a namespace
// and opening it again loses nothing: scheduled, ready and reserved jobs are
// all delivered (the reserved ones once their lease expires), finished and
// dead jobs and paused topics (records: RecordsRestart) are still there, and
// jobs keep their fields (requireSameJob).
func testRestart(t *testing.T, b *testBundle) {
	if !b.h.Durable {
		t.Skip("the backend is not durable")
	}
	const topic = "restart"
	s1 := b.store
	var pending []*core.Job
	for i := range 5 {
		pending = append(pending, NewJob(topic, time.Now().Add(time.Duration(i-10)*time.Second)))
	}
	for i := range 5 {
		pending = append(pending, NewJob(topic, time.Now().Add(time.Duration(400+100*i)*time.Millisecond)))
	}
	var reserved []*core.Job
	for range 3 {
		reserved = append(reserved, shortJob(topic+".reserved"))
	}
	pending[0].URL = "https://hooks.example/pending"
	pending[0].ExpiresAt = core.StoreTime(time.Now().Add(time.Hour))
	reserved[0].URL = "https://hooks.example/reserved"
	done, dead := DueJob(topic+".done"), DueJob(topic+".dead")
	dead.URL = "https://hooks.example/dead"
	dead.ExpiresAt = core.StoreTime(time.Now().Add(time.Hour))
	Put(t, b.ctx, s1, slices.Concat(pending, reserved, []*core.Job{done, dead})...)
	leases := claimUntil(t, b.ctx, s1, topic+".reserved", 3, 3, dueWait)
	require.Len(t, leases, 3)
	d := Claim(t, b.ctx, s1, done.Topic, 1, dueWait)
	require.Len(t, d, 1)
	require.NoError(t, settleErr(s1.AckJob(b.ctx, &core.AckJobParams{ID: d[0].ID, Lease: d[0].Lease})))
	x := Claim(t, b.ctx, s1, dead.Topic, 1, dueWait)
	require.Len(t, x, 1)
	require.NoError(t, settleErr(s1.BuryJob(b.ctx, &core.BuryJobParams{ID: x[0].ID, Lease: x[0].Lease, Error: "boom"})))
	require.NoError(t, s1.SetTopicPaused(b.ctx, topic+".paused", true))

	require.NoError(t, s1.Close())
	s2 := b.open(t)
	b.store = s2

	for _, j := range pending {
		got := b.get(t, j.ID)
		requireSameJob(t, j, got)
		require.Contains(t, []core.State{core.StateScheduled, core.StateReady}, got.State)
	}
	for _, j := range reserved {
		got := b.get(t, j.ID)
		requireSameJob(t, j, got)
		require.Equal(t, 1, got.Attempt)
	}
	b.requireState(t, done.ID, core.StateDone)
	deadAgain := b.requireState(t, dead.ID, core.StateDead)
	require.Equal(t, "boom", deadAgain.LastError)
	require.Equal(t, dead.URL, deadAgain.URL)
	require.Equal(t, []string{dead.ID}, ids(listDead(t, b, dead.Topic, 10)))
	require.False(t, b.topicOf(t, topic).Paused)
	require.True(t, b.topicOf(t, topic+".paused").Paused, "a paused topic after restart")

	got := claimUntil(t, b.ctx, s2, topic, len(pending), 4, 3*time.Second)
	require.Equal(t, ids(pending), ids(got), "pending jobs after restart, in run_at order")
	for _, j := range got {
		require.Equal(t, 1, j.Attempt)
	}
	again := claimUntil(t, b.ctx, s2, topic+".reserved", len(reserved), 3, 3*time.Second)
	require.Equal(t, idsOf(reserved), idsOf(again), "reserved jobs after restart")
	for _, j := range again {
		require.Equal(t, 2, j.Attempt)
		require.False(t, time.Now().Before(leases[0].LeaseExpiresAt.Add(-clockSlack)), "redelivered before the lease expired")
		require.NoError(t, settleErr(s2.AckJob(b.ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})))
	}
}

// testManyJobs: a batch of 1000 due jobs is claimed by concurrent claims of
// up to 100, each job exactly once, and acknowledged.
func testManyJobs(t *testing.T, b *testBundle) {
	const (
		topic = "many"
		n     = 1000
	)
	now := time.Now()
	var jobs []*core.Job
	for i := range n {
		j := NewJob(topic, now.Add(time.Duration(i-n)*time.Millisecond))
		j.Body = fmt.Appendf(nil, `{"i":%d}`, i)
		jobs = append(jobs, j)
	}
	b.put(t, jobs...)
	b.requireCounts(t, topic, core.Counts{Ready: n})

	claimed, got := claimAllConcurrently(t, b, []core.Store{b.store}, topic, n, 4, 100, dueWait)
	requireOnce(t, jobs, claimed)
	b.requireCounts(t, topic, core.Counts{Reserved: n})

	// Acknowledge them all, from a few goroutines.
	var (
		failures errs
		wg       sync.WaitGroup
		next     = make(chan string)
	)
	for range 4 {
		wg.Go(func() {
			for id := range next {
				failures.add(settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: id, Lease: got[id].Lease})))
			}
		})
	}
	for _, j := range jobs {
		next <- j.ID
	}
	close(next)
	wg.Wait()
	require.NoError(t, failures.err())
	b.requireCounts(t, topic, core.Counts{Done: n})
	require.Equal(t, `{"i":999}`, string(b.requireState(t, jobs[n-1].ID, core.StateDone).Body))
}

// testClose: Close ends waiting claims, is idempotent, and the store answers
// ErrClosed afterwards.
func testClose(t *testing.T, b *testBundle) {
	s := b.store
	require.NoError(t, s.Ping(b.ctx))
	job := NewJob("close", time.Now().Add(time.Hour))
	b.put(t, job)
	ch := claimAsync(b.ctx, s, "close", 1, 5*time.Second)
	b.pass(t, 200*time.Millisecond)
	closedAt := time.Now()
	require.NoError(t, s.Close())
	r := <-ch
	require.Empty(t, r.jobs)
	require.Less(t, r.at.Sub(closedAt), time.Second, "a waiting claim outlived Close")
	require.NoError(t, s.Close(), "Close is idempotent")

	require.ErrorIs(t, s.Ping(b.ctx), core.ErrClosed, "ping after Close")
	_, err := s.GetJob(b.ctx, job.ID)
	require.ErrorIs(t, err, core.ErrClosed, "get after Close")
	_, err = s.PutJobs(b.ctx, &core.PutJobsParams{Jobs: []*core.Job{DueJob("close")}})
	require.ErrorIs(t, err, core.ErrClosed, "put after Close")
	_, err = s.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: "close", Max: 1})
	require.ErrorIs(t, err, core.ErrClosed, "claim after Close")
}
