package storetest

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// testPutGetRoundTrip: every field put comes back from GetJob and from a
// claim as it went in; stamps are set; returned jobs are copies.
func testPutGetRoundTrip(t *testing.T, b *testBundle) {
	const topic = "orders.close"
	runAt := time.Now().Add(time.Hour).Truncate(time.Second).Add(123 * time.Millisecond).UTC()
	full := NewJob(topic, runAt)
	full.Key = "order-42 é"
	full.Body = json.RawMessage("{ \"order\" : 42,\n \"items\":[1, 2.50, \"x\"], \"note\":\"caf\\u00e9 ☕\" }")
	full.TTR = 7 * time.Second
	full.MaxAttempts = 3
	full.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	full.RetryDelays = []time.Duration{time.Minute, 0, 250 * time.Millisecond, core.DelayMax}
	full.Priority = core.PriorityMax
	full.URL = "https://hooks.example/orders/42?x=1&y=é"
	str := NewJob(topic, runAt.Add(time.Second))
	str.Body = json.RawMessage(`"just a string"`)
	big := NewJob(topic, runAt.Add(2*time.Second))
	big.Body = json.RawMessage(`"` + strings.Repeat("0123456789abcdef", 4096) + `"`)
	due := NewJob(topic, time.Now().Add(-time.Second))
	due.Key = "k-due"
	due.TTR = 2 * time.Second
	due.MaxAttempts = 9
	due.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	due.Body = json.RawMessage(`[1,2,3]`)
	due.RetryDelays = []time.Duration{1500 * time.Millisecond}
	due.Priority = core.PriorityMin
	due.URL = "http://127.0.0.1:8080/hook"
	want := map[string]*core.Job{}
	for _, j := range []*core.Job{full, str, big, due} {
		want[j.ID] = j.Clone()
	}

	before := time.Now()
	b.put(t, full, str, big, due)
	after := time.Now()

	// The store keeps its own copy: changing what was put changes nothing.
	full.Body[2] = 'X'
	full.Key = "changed"
	full.RetryDelays[0] = time.Hour

	created := map[string]time.Time{}
	for id, w := range want {
		got := b.get(t, id)
		requireSameJob(t, w, got)
		require.Equal(t, time.UTC, got.RunAt.Location(), "run_at of %s is not UTC", id)
		require.Equal(t, 0, got.Attempt, "attempt of %s before any delivery", id)
		require.Empty(t, got.Lease, "lease of unclaimed %s", id)
		require.Empty(t, got.LastError, "last_error of %s", id)
		requireBetween(t, got.CreatedAt, before, after, clockSlack, "created_at of "+id)
		created[id] = got.CreatedAt
		if id == due.ID {
			require.Equal(t, core.StateReady, got.State, "job due in the past")
		} else {
			require.Equal(t, core.StateScheduled, got.State, "job due in an hour")
		}
	}

	// GetJob returns a copy: changing it changes nothing.
	got := b.get(t, full.ID)
	got.Body[2] = 'Y'
	got.State = core.StateDone
	requireSameJob(t, want[full.ID], b.requireState(t, full.ID, core.StateScheduled))

	// A claim delivers the same fields, with attempt, lease and its expiry.
	start := time.Now()
	c := b.claimOne(t, topic, 0) // due when put: ready at once
	end := time.Now()
	requireSameJob(t, want[due.ID], c)
	require.Equal(t, 1, c.Attempt)
	require.True(t, created[due.ID].Equal(c.CreatedAt), "created_at of the claimed job changed")
	requireBetween(t, c.LeaseExpiresAt, start.Add(due.TTR), end.Add(due.TTR), clockSlack, "lease_expires_at")
	require.Empty(t, b.claim(t, topic, 10, 0), "only one job of the topic is due")

	// So does GetJob of the reserved job, and the claimed copy is the caller's.
	c.Body[0] = '{'
	r := b.requireState(t, due.ID, core.StateReserved)
	requireSameJob(t, want[due.ID], r)
	require.Equal(t, 1, r.Attempt)
}

// testStates: GetJob reports each state of a job's life.
func testStates(t *testing.T, b *testBundle) {
	scheduled := NewJob("st.scheduled", time.Now().Add(time.Hour))
	ready := NewJob("st.ready", time.Now().Add(-time.Second))
	soon := NewJob("st.soon", time.Now().Add(300*time.Millisecond))
	reserved := DueJob("st.reserved")
	done := DueJob("st.done")
	dead := DueJob("st.dead")
	cancelled := NewJob("st.cancelled", time.Now().Add(time.Hour))
	b.put(t, scheduled, ready, soon, reserved, done, dead, cancelled)

	b.requireState(t, scheduled.ID, core.StateScheduled)
	b.requireState(t, ready.ID, core.StateReady)
	b.requireState(t, soon.ID, core.StateScheduled)

	r := b.claimOne(t, "st.reserved", dueWait)
	require.Equal(t, reserved.ID, r.ID)
	got := b.requireState(t, reserved.ID, core.StateReserved)
	require.Equal(t, 1, got.Attempt)

	d := b.claimOne(t, "st.done", dueWait)
	require.NoError(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: d.ID, Lease: d.Lease})))
	got = b.requireState(t, done.ID, core.StateDone)
	require.Equal(t, 1, got.Attempt)

	x := b.claimOne(t, "st.dead", dueWait)
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: x.ID, Lease: x.Lease, Error: "poison"})))
	got = b.requireState(t, dead.ID, core.StateDead)
	require.Equal(t, "poison", got.LastError)

	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: cancelled.ID}))
	b.requireState(t, cancelled.ID, core.StateCancelled)

	// A scheduled job is reported ready once its run_at has passed, without a
	// claim.
	b.passUntil(t, soon.RunAt.Add(20*time.Millisecond))
	b.requireState(t, soon.ID, core.StateReady)
	b.requireState(t, scheduled.ID, core.StateScheduled)
}

// testUnknownJob: every operation on an id that names no job gets
// ErrNotFound.
func testUnknownJob(t *testing.T, b *testBundle) {
	id := core.NewID()
	_, err := b.store.GetJob(b.ctx, id)
	require.ErrorIs(t, err, core.ErrNotFound, "get")
	require.ErrorIs(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: id}), core.ErrNotFound, "cancel")
	require.ErrorIs(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: id, Lease: "x"})), core.ErrNotFound, "ack")
	require.ErrorIs(t, settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: id, Lease: "x", RunAt: time.Now()})), core.ErrNotFound, "retry")
	require.ErrorIs(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: id, Lease: "x"})), core.ErrNotFound, "bury")
	_, err = b.store.TouchJob(b.ctx, &core.TouchJobParams{ID: id, Lease: "x"})
	require.ErrorIs(t, err, core.ErrNotFound, "touch")
	require.ErrorIs(t, b.store.RequeueJob(b.ctx, id), core.ErrNotFound, "requeue")
	require.NoError(t, b.store.Ping(b.ctx))
}

// testOrderByRunAt: due jobs come out of claims in run_at order, whatever
// the order they were put in, and whether they were due when put or became
// due later.
func testOrderByRunAt(t *testing.T, b *testBundle) {
	const topic = "orders"
	now := time.Now()
	var jobs []*core.Job
	for i := range 30 {
		jobs = append(jobs, NewJob(topic, now.Add(-10*time.Second+time.Duration(i)*37*time.Millisecond)))
	}
	for i := range 10 {
		jobs = append(jobs, NewJob(topic, now.Add(300*time.Millisecond+time.Duration(i)*13*time.Millisecond)))
	}
	want := ids(jobs)
	shuffled := append([]*core.Job(nil), jobs...)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	// Some one by one, the rest in one batch.
	for _, j := range shuffled[:10] {
		b.put(t, j)
	}
	b.put(t, shuffled[10:]...)

	// Let every job become due, then claim them a few at a time.
	b.passUntil(t, jobs[len(jobs)-1].RunAt.Add(500*time.Millisecond))
	got := claimUntil(t, b.ctx, b.store, topic, len(jobs), 7, time.Second)
	require.Equal(t, want, ids(got), "claims not in run_at order")
	for i := 1; i < len(got); i++ {
		require.False(t, got[i].RunAt.Before(got[i-1].RunAt), "job %d due before job %d", i, i-1)
	}
}

// testPrecision: a job is not claimable before its run_at, and a waiting
// claim gets it at its run_at: reserved within maxLateness, answered
// within maxReturnLateness.
func testPrecision(t *testing.T, b *testBundle) {
	const topic = "precise"
	now := time.Now()
	var jobs []*core.Job
	for _, d := range []time.Duration{500, 650, 800} {
		jobs = append(jobs, NewJob(topic, now.Add(d*time.Millisecond)))
	}
	b.put(t, jobs...)
	require.Empty(t, b.claim(t, topic, 10, 0), "claimable before run_at")

	for _, want := range jobs {
		c := b.claimOne(t, topic, 2*time.Second)
		at := time.Now()
		require.Equal(t, want.ID, c.ID, "claimed out of run_at order")
		reservedAt := c.LeaseExpiresAt.Add(-c.TTR)
		lateness := at.Sub(want.RunAt)
		t.Logf("job due at %s: reserved %+v, returned %+v after run_at", want.RunAt.Format("15:04:05.000"),
			reservedAt.Sub(want.RunAt), lateness)
		require.False(t, at.Before(want.RunAt.Add(-earlySlack)), "claimed %s before run_at", want.RunAt.Sub(at))
		require.False(t, reservedAt.Before(want.RunAt.Add(-earlySlack)), "reserved %s before run_at", want.RunAt.Sub(reservedAt))
		require.Less(t, reservedAt.Sub(want.RunAt), maxLateness, "reserved too late")
		require.Less(t, lateness, maxReturnLateness, "claim answered too late")
	}
}

// testClaimMaxAndEmptyWait: a claim returns at most Max jobs, takes each
// due job once, and comes back empty, without error, once Wait ran out.
func testClaimMaxAndEmptyWait(t *testing.T, b *testBundle) {
	const topic = "max"
	var jobs []*core.Job
	for range 5 {
		jobs = append(jobs, NewJob(topic, time.Now().Add(-time.Second)))
	}
	b.put(t, jobs...)

	one := b.claim(t, topic, 1, 2*time.Second)
	require.Len(t, one, 1, "Max 1 with 5 due jobs")
	rest := claimUntil(t, b.ctx, b.store, topic, 4, 3, 2*time.Second)
	require.Len(t, rest, 4)
	all := append(one, rest...)
	require.Len(t, idsOf(all), 5, "a job was claimed twice")
	for _, j := range all {
		require.Equal(t, 1, j.Attempt)
	}

	// Nothing left: the claim waits its Wait out and answers empty.
	start := time.Now()
	empty := b.claim(t, topic, 3, 400*time.Millisecond)
	elapsed := time.Since(start)
	require.Empty(t, empty)
	require.GreaterOrEqual(t, elapsed, 400*time.Millisecond-waitSlack, "empty answer before Wait ran out")
	require.Less(t, elapsed, 400*time.Millisecond+time.Second, "empty answer long after Wait ran out")

	// Wait 0 answers at once.
	start = time.Now()
	require.Empty(t, b.claim(t, topic, 3, 0))
	require.Less(t, time.Since(start), 500*time.Millisecond, "Wait 0 did not answer at once")
}

// testClaimWokenByPut: a waiting claim returns as soon as a due job is put,
// and at its run_at when a job put while it waits becomes due.
func testClaimWokenByPut(t *testing.T, b *testBundle) {
	const topic = "wake"
	ch := claimAsync(b.ctx, b.store, topic, 1, 5*time.Second)
	b.pass(t, 300*time.Millisecond) // let the claim wait
	job := DueJob(topic)
	putAt := time.Now()
	b.put(t, job)
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, job.ID, r.jobs[0].ID)
	t.Logf("claim woken %s after put", r.at.Sub(putAt))
	require.Less(t, r.at.Sub(putAt), time.Second, "claim not woken by put")

	ch = claimAsync(b.ctx, b.store, topic, 1, 5*time.Second)
	b.pass(t, 200*time.Millisecond)
	later := NewJob(topic, time.Now().Add(300*time.Millisecond))
	b.put(t, later)
	r = <-ch
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, later.ID, r.jobs[0].ID)
	t.Logf("claim woken %s after run_at", r.at.Sub(later.RunAt))
	require.False(t, r.at.Before(later.RunAt.Add(-earlySlack)), "claimed before run_at")
	require.Less(t, r.at.Sub(later.RunAt), time.Second, "claim not woken at run_at")
}

// testClaimContextDone: a waiting claim whose ctx ends returns an empty
// answer without error.
func testClaimContextDone(t *testing.T, b *testBundle) {
	ctx, cancel := contextWithTimeout(b, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	jobs, err := b.store.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "ctx", Max: 1, Wait: 5 * time.Second})
	require.NoError(t, err, "a claim whose ctx ends answers empty, not an error")
	require.Empty(t, jobs)
	require.Less(t, time.Since(start), 2*time.Second, "claim outlived its ctx")
}

// testCancel: scheduled, ready and dead jobs can be cancelled and are never
// claimed; a reserved one cannot; unknown and finished ones are not found.
func testCancel(t *testing.T, b *testBundle) {
	ready := NewJob("c.main", time.Now().Add(-time.Second))
	scheduled := NewJob("c.main", time.Now().Add(200*time.Millisecond))
	dead := DueJob("c.dead")
	reserved := DueJob("c.reserved")
	b.put(t, ready, scheduled, dead, reserved)
	x := b.claimOne(t, "c.dead", dueWait)
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: x.ID, Lease: x.Lease, Error: "boom"})))
	r := b.claimOne(t, "c.reserved", dueWait)
	b.requireCounts(t, "c.dead", core.Counts{Dead: 1})

	for _, j := range []*core.Job{ready, scheduled, dead} {
		require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: j.ID}), "cancel %s", j.ID)
		b.requireState(t, j.ID, core.StateCancelled)
		require.ErrorIs(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: j.ID}), core.ErrNotFound, "second cancel")
	}

	err := b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: reserved.ID})
	require.ErrorIs(t, err, core.ErrConflict, "cancel of a reserved job")
	require.NotErrorIs(t, err, core.ErrNotFound)
	b.requireState(t, reserved.ID, core.StateReserved)
	require.NoError(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: r.ID, Lease: r.Lease})), "cancel attempt broke the lease")
	require.ErrorIs(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: reserved.ID}), core.ErrNotFound, "cancel of a done job")
	b.requireState(t, reserved.ID, core.StateDone)

	require.ErrorIs(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: core.NewID()}), core.ErrNotFound, "cancel of an unknown job")

	// Cancelled jobs are gone from the dead list and the counts, and never
	// claimed, even once the scheduled one's run_at has passed.
	require.Empty(t, listDead(t, b, "c.dead", 10))
	require.Empty(t, b.claim(t, "c.main", 10, 800*time.Millisecond), "a cancelled job was claimed")
	b.requireCounts(t, "c.main", core.Counts{Cancelled: 2})
	b.requireCounts(t, "c.dead", core.Counts{Cancelled: 1})
	b.requireCounts(t, "c.reserved", core.Counts{Done: 1})
	b.requireState(t, scheduled.ID, core.StateCancelled)
}

// testCancelRace: goroutines cancel jobs while others claim them: each job
// ends claimed once or cancelled, never both, never twice.
func testCancelRace(t *testing.T, b *testBundle) {
	const (
		topic     = "race"
		n         = 150
		claimers  = 3
		cancelers = 3
	)
	var jobs []*core.Job
	for range n {
		jobs = append(jobs, DueJob(topic))
	}
	b.put(t, jobs...)

	var (
		mu        sync.Mutex
		claimed   = map[string]int{}
		cancelled = map[string]int{}
		conflicts = map[string]bool{}
		failures  errs
		stop      atomic.Bool
		start     = make(chan struct{})
		wgCancel  sync.WaitGroup
		wgClaim   sync.WaitGroup
	)
	// Claims take jobs in run_at order; one canceller goes the other way,
	// one at random, one right behind the claims.
	orders := [cancelers][]int{make([]int, n), rand.Perm(n), make([]int, n)}
	for i := range n {
		orders[0][i] = n - 1 - i
		orders[2][i] = i
	}
	for c := range cancelers {
		wgCancel.Go(func() {
			<-start
			for _, i := range orders[c] {
				runtime.Gosched() // let a fast store's claims interleave
				id := jobs[i].ID
				err := b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: id})
				mu.Lock()
				switch {
				case err == nil:
					cancelled[id]++
				case errors.Is(err, core.ErrNotFound):
				case errors.Is(err, core.ErrConflict):
					conflicts[id] = true
				default:
					failures.add(err)
				}
				mu.Unlock()
			}
		})
	}
	for range claimers {
		wgClaim.Go(func() {
			<-start
			for {
				runtime.Gosched()
				done := stop.Load()
				got, err := b.store.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: topic, Max: 2, Wait: 200 * time.Millisecond})
				if err != nil {
					failures.add(err)
					return
				}
				mu.Lock()
				for _, j := range got {
					claimed[j.ID]++
				}
				mu.Unlock()
				if len(got) == 0 && done {
					return
				}
			}
		})
	}
	close(start)
	wgCancel.Wait()
	stop.Store(true)
	wgClaim.Wait()
	require.NoError(t, failures.err())

	var nClaimed, nCancelled int
	for _, j := range jobs {
		c, x := claimed[j.ID], cancelled[j.ID]
		require.LessOrEqual(t, c, 1, "job %s claimed %d times", j.ID, c)
		require.LessOrEqual(t, x, 1, "job %s cancelled %d times", j.ID, x)
		require.Equal(t, 1, c+x, "job %s claimed %d and cancelled %d times", j.ID, c, x)
		if conflicts[j.ID] {
			require.Equal(t, 1, c, "cancel of %s conflicted but it was never claimed", j.ID)
		}
		want := core.StateCancelled
		if c == 1 {
			want = core.StateReserved
			nClaimed++
		} else {
			nCancelled++
		}
		b.requireState(t, j.ID, want)
	}
	t.Logf("%d claimed, %d cancelled", nClaimed, nCancelled)
	b.requireCounts(t, topic, core.Counts{Reserved: int64(nClaimed), Cancelled: int64(nCancelled)})
}

// testCreateConflict: creating a job whose id names an unfinished job is a
// *core.ConflictError carrying the existing job; a finished job's id may be
// used again.
func testCreateConflict(t *testing.T, b *testBundle) {
	const topic = "create"
	orig := NewJob(topic, time.Now().Add(time.Hour))
	orig.Body = json.RawMessage(`{"v":"original"}`)
	b.put(t, orig)

	dup := NewJob(topic, time.Now().Add(2*time.Hour))
	dup.ID = orig.ID
	dup.Body = json.RawMessage(`{"v":"duplicate"}`)
	res := b.putResults(t, false, dup)
	requireConflict(t, res[0].Err, orig)
	require.False(t, res[0].Replaced)
	requireSameJob(t, orig, b.requireState(t, orig.ID, core.StateScheduled))

	// Ready, reserved and dead jobs are not finished either.
	for _, state := range []core.State{core.StateReady, core.StateReserved, core.StateDead} {
		j := DueJob(topic + "." + string(state))
		b.put(t, j)
		if state != core.StateReady {
			c := b.claimOne(t, j.Topic, dueWait)
			if state == core.StateDead {
				require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "x"})))
			}
		}
		b.requireState(t, j.ID, state)
		again := DueJob(j.Topic)
		again.ID = j.ID
		again.Body = json.RawMessage(`"again"`)
		res := b.putResults(t, false, again)
		requireConflict(t, res[0].Err, j)
		require.Equal(t, state, res[0].Err.(*core.ConflictError).Job.State, "state of the job in the conflict")
		b.requireState(t, j.ID, state)
	}

	// Once done or cancelled, the id may be used again for a fresh job.
	done := DueJob(topic)
	cancelled := NewJob(topic, time.Now().Add(time.Hour))
	b.put(t, done, cancelled)
	c := b.claimOne(t, topic, dueWait)
	require.Equal(t, done.ID, c.ID)
	require.NoError(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: c.ID, Lease: c.Lease})))
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: cancelled.ID}))
	for _, old := range []*core.Job{done, cancelled} {
		reuse := DueJob(topic)
		reuse.ID = old.ID
		reuse.Body = json.RawMessage(`{"v":"reused"}`)
		reuse.MaxAttempts = 2
		before := time.Now()
		b.put(t, reuse) // created, not replaced
		got := b.requireState(t, old.ID, core.StateReady)
		requireSameJob(t, reuse, got)
		require.Equal(t, 0, got.Attempt, "a reused id starts a fresh job")
		require.Empty(t, got.LastError)
		requireBetween(t, got.CreatedAt, before, time.Now(), clockSlack, "created_at of the reused id")
	}
	b.requireCounts(t, topic, core.Counts{Scheduled: 1, Ready: 2}) // orig, and the reused ids, no longer finished
	got := claimUntil(t, b.ctx, b.store, topic, 2, 2, time.Second)
	require.Len(t, got, 2)
	require.Equal(t, map[string]bool{done.ID: true, cancelled.ID: true}, idsOf(got))
	for _, j := range got {
		require.Equal(t, 1, j.Attempt)
		require.Equal(t, `{"v":"reused"}`, string(j.Body))
	}
}

// requireConflict requires err to be a *core.ConflictError that matches
// ErrConflict and carries the job existing.
func requireConflict(t *testing.T, err error, existing *core.Job) {
	t.Helper()
	require.ErrorIs(t, err, core.ErrConflict)
	var ce *core.ConflictError
	require.ErrorAs(t, err, &ce, "a conflict carries the existing job")
	require.NotNil(t, ce.Job, "conflict without the existing job")
	requireSameJob(t, existing, ce.Job)
}

// testReplace: Replace reschedules an unfinished job (new run_at and body,
// created_at kept, attempts reset), conflicts with a reserved one and
// creates an unknown one.
func testReplace(t *testing.T, b *testBundle) {
	const topic = "replace"
	orig := NewJob(topic, time.Now().Add(time.Hour))
	orig.Body = json.RawMessage(`{"v":1}`)
	b.put(t, orig)
	created := b.get(t, orig.ID).CreatedAt
	require.Empty(t, b.claim(t, topic, 10, 0))

	// Scheduled in an hour, replaced to due now with a new body.
	repl := DueJob(topic)
	repl.ID = orig.ID
	repl.Body = json.RawMessage(`{"v":2}`)
	repl.Key = "k2"
	repl.TTR = 3 * time.Second
	res := b.putResults(t, true, repl)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	got := b.requireState(t, orig.ID, core.StateReady)
	requireSameJob(t, repl, got)
	require.True(t, created.Equal(got.CreatedAt), "replace kept created_at")
	b.requireCounts(t, topic, core.Counts{Ready: 1})

	// Reserved: a conflict carrying the job, which is left alone.
	c := b.claimOne(t, topic, dueWait)
	require.Equal(t, orig.ID, c.ID)
	require.Equal(t, `{"v":2}`, string(c.Body))
	again := NewJob(topic, time.Now().Add(time.Hour))
	again.ID = orig.ID
	res = b.putResults(t, true, again)
	requireConflict(t, res[0].Err, repl)
	require.False(t, res[0].Replaced)
	b.requireState(t, orig.ID, core.StateReserved)

	// Dead: replaced with a fresh attempt count, rescheduled in the future.
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "x"})))
	future := NewJob(topic, time.Now().Add(time.Hour))
	future.ID = orig.ID
	future.Body = json.RawMessage(`{"v":3}`)
	res = b.putResults(t, true, future)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	got = b.requireState(t, orig.ID, core.StateScheduled)
	requireSameJob(t, future, got)
	require.Equal(t, 0, got.Attempt)
	require.True(t, created.Equal(got.CreatedAt), "replace kept created_at")
	require.Empty(t, listDead(t, b, topic, 10))
	require.Empty(t, b.claim(t, topic, 10, 0), "a job rescheduled to the future is claimable")
	b.requireCounts(t, topic, core.Counts{Scheduled: 1})

	// Due soon: the old run_at is forgotten, the new one holds.
	soon := NewJob(topic, time.Now().Add(300*time.Millisecond))
	soon.ID = orig.ID
	res = b.putResults(t, true, soon)
	require.True(t, res[0].Replaced)
	c = b.claimOne(t, topic, 2*time.Second)
	require.Equal(t, orig.ID, c.ID)
	require.Equal(t, 1, c.Attempt)
	require.True(t, soon.RunAt.Equal(c.RunAt))
	require.False(t, time.Now().Before(soon.RunAt.Add(-earlySlack)), "claimed before the new run_at")

	// Unknown: created.
	fresh := DueJob(topic)
	res = b.putResults(t, true, fresh)
	require.NoError(t, res[0].Err)
	require.False(t, res[0].Replaced, "replace of an unknown id creates")
	requireSameJob(t, fresh, b.requireState(t, fresh.ID, core.StateReady))

	// Done (finished): overwritten, not replaced.
	require.NoError(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: c.ID, Lease: c.Lease})))
	b.requireCounts(t, topic, core.Counts{Ready: 1, Done: 1})
	over := NewJob(topic, time.Now().Add(time.Hour))
	over.ID = orig.ID
	res = b.putResults(t, true, over)
	require.NoError(t, res[0].Err)
	require.False(t, res[0].Replaced, "a finished job is overwritten, not replaced")
	require.Equal(t, 0, b.requireState(t, orig.ID, core.StateScheduled).Attempt)
	b.requireCounts(t, topic, core.Counts{Scheduled: 1, Ready: 1})
}

// testReadDuringPut: GetJob racing puts of the same id sees the job as it
// was before a put or as it is after it, whole: never "not found" while a
// finished job is overwritten, never the parts of two versions (a version's
// body is its max_attempts).
func testReadDuringPut(t *testing.T, b *testBundle) {
	const topic, rounds = "jobs.readput", 150
	id := core.NewID()
	version := func(v int) *core.Job {
		j := NewJob(topic, time.Now().Add(time.Hour))
		j.ID = id
		j.MaxAttempts = v
		j.Body = json.RawMessage(strconv.Itoa(v))
		return j
	}
	b.put(t, version(1))
	var (
		stop  atomic.Bool
		reads atomic.Int64
		wg    sync.WaitGroup
	)
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				j, err := b.store.GetJob(b.ctx, id)
				if !assert.NoError(t, err, "read %d of a job that is kept throughout", reads.Load()) {
					return
				}
				reads.Add(1)
				if !assert.Equal(t, strconv.Itoa(j.MaxAttempts), string(j.Body), "a read mixes two versions of the job") {
					return
				}
			}
		})
	}
	for r := range rounds {
		v := 2 + 2*r
		res := b.putResults(t, true, version(v))
		require.NoError(t, res[0].Err, "round %d: replace", r)
		require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: id}), "round %d: cancel", r)
		b.put(t, version(v+1)) // over the cancelled job
		if t.Failed() {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	require.Positive(t, reads.Load(), "no read ran beside the puts")
}

// testBatch: each job of a batch succeeds or fails on its own, with results
// in order.
func testBatch(t *testing.T, b *testBundle) {
	const topic = "batch"
	existing := NewJob(topic, time.Now().Add(time.Hour))
	existing.Body = json.RawMessage(`"existing"`)
	reserved := DueJob(topic + ".r")
	b.put(t, existing, reserved)
	r := b.claimOne(t, reserved.Topic, dueWait)

	res, err := b.store.PutJobs(b.ctx, &core.PutJobsParams{})
	require.NoError(t, err)
	require.Empty(t, res, "empty batch")

	a := DueJob(topic)
	a.Body = json.RawMessage(`"a"`)
	dupExisting := DueJob(topic)
	dupExisting.ID = existing.ID
	dupExisting.Body = json.RawMessage(`"dup"`)
	c := NewJob(topic, time.Now().Add(time.Hour))
	dupA := DueJob(topic)
	dupA.ID = a.ID
	dupA.Body = json.RawMessage(`"dup a"`)
	res = b.putResults(t, false, a, dupExisting, c, dupA)
	require.NoError(t, res[0].Err)
	requireConflict(t, res[1].Err, existing)
	require.NoError(t, res[2].Err)
	requireConflict(t, res[3].Err, a) // the first of the batch made it
	requireSameJob(t, a, b.get(t, a.ID))
	requireSameJob(t, existing, b.get(t, existing.ID))
	requireSameJob(t, c, b.get(t, c.ID))

	// One new id three times in a batch: each after the first finds the
	// one before it.
	same := topic + ".same"
	x1, x2, x3 := DueJob(same), DueJob(same), DueJob(same)
	x2.ID, x3.ID = x1.ID, x1.ID
	x2.Body, x3.Body = json.RawMessage(`"x2"`), json.RawMessage(`"x3"`)
	res = b.putResults(t, false, x1, x2, x3)
	require.NoError(t, res[0].Err)
	requireConflict(t, res[1].Err, x1)
	requireConflict(t, res[2].Err, x1)
	requireSameJob(t, x1, b.get(t, x1.ID))
	y1, y2, y3 := NewJob(same, time.Now().Add(time.Hour)), DueJob(same), NewJob(same, time.Now().Add(2*time.Hour))
	y2.ID, y3.ID = y1.ID, y1.ID
	y3.Body = json.RawMessage(`"y3"`)
	res = b.putResults(t, true, y1, y2, y3)
	for i, replaced := range []bool{false, true, true} {
		require.NoError(t, res[i].Err)
		require.Equal(t, replaced, res[i].Replaced, "put %d of the id", i)
	}
	requireSameJob(t, y3, b.requireState(t, y1.ID, core.StateScheduled))
	b.requireCounts(t, same, core.Counts{Ready: 1, Scheduled: 1})

	// Replace: replaced, conflict (reserved), created, replaced.
	e2 := DueJob(topic)
	e2.ID = existing.ID
	e2.Body = json.RawMessage(`"existing v2"`)
	r2 := DueJob(reserved.Topic)
	r2.ID = reserved.ID
	fresh := NewJob(topic, time.Now().Add(time.Hour))
	a2 := NewJob(topic, time.Now().Add(time.Hour))
	a2.ID = a.ID
	res = b.putResults(t, true, e2, r2, fresh, a2)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	requireConflict(t, res[1].Err, reserved)
	require.False(t, res[1].Replaced)
	require.NoError(t, res[2].Err)
	require.False(t, res[2].Replaced)
	require.NoError(t, res[3].Err)
	require.True(t, res[3].Replaced)

	requireSameJob(t, e2, b.requireState(t, existing.ID, core.StateReady))
	b.requireState(t, reserved.ID, core.StateReserved)
	requireSameJob(t, fresh, b.requireState(t, fresh.ID, core.StateScheduled))
	requireSameJob(t, a2, b.requireState(t, a.ID, core.StateScheduled))
	require.NoError(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: r.ID, Lease: r.Lease})), "the conflict broke the lease")
	got := b.claim(t, topic, 10, 0)
	require.Equal(t, []string{existing.ID}, ids(got))
	b.requireCounts(t, topic, core.Counts{Scheduled: 3, Reserved: 1})
}

// testCreateIfAbsent: a put with IfAbsent creates a new id, and refuses,
// as a conflict carrying the job as it is, an id the store keeps in any
// state, done and cancelled ones too, which stay as they were.
func testCreateIfAbsent(t *testing.T, b *testBundle) {
	const topic = "absent"
	putAbsent := func(jobs ...*core.Job) []core.PutResult {
		t.Helper()
		res, err := b.store.PutJobs(b.ctx, &core.PutJobsParams{Jobs: jobs, IfAbsent: true})
		require.NoError(t, err)
		require.Len(t, res, len(jobs))
		return res
	}
	fresh := NewJob(topic, time.Now().Add(time.Hour))
	res := putAbsent(fresh)
	require.NoError(t, res[0].Err)
	require.False(t, res[0].Replaced)
	requireSameJob(t, fresh, b.requireState(t, fresh.ID, core.StateScheduled))

	done := DueJob(topic + ".done")
	cancelled := NewJob(topic, time.Now().Add(time.Hour))
	dead := DueJob(topic + ".dead")
	b.put(t, done, cancelled, dead)
	c := b.claimOne(t, done.Topic, dueWait)
	require.NoError(t, ack(b, c))
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: cancelled.ID}))
	c = b.claimOne(t, dead.Topic, dueWait)
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "x"})))
	for _, tc := range []struct {
		job   *core.Job
		state core.State
	}{{fresh, core.StateScheduled}, {done, core.StateDone}, {cancelled, core.StateCancelled}, {dead, core.StateDead}} {
		again := DueJob(tc.job.Topic)
		again.ID = tc.job.ID
		again.Body = json.RawMessage(`"again"`)
		res := putAbsent(again)
		requireConflict(t, res[0].Err, tc.job)
		require.Equal(t, tc.state, res[0].Err.(*core.ConflictError).Job.State, "state of the job in the conflict")
		require.False(t, res[0].Replaced)
		requireSameJob(t, tc.job, b.requireState(t, tc.job.ID, tc.state))
		// Replace changes nothing with IfAbsent.
		res2, err := b.store.PutJobs(b.ctx, &core.PutJobsParams{Jobs: []*core.Job{again}, IfAbsent: true, Replace: true})
		require.NoError(t, err)
		require.ErrorIs(t, res2[0].Err, core.ErrConflict)
		requireSameJob(t, tc.job, b.requireState(t, tc.job.ID, tc.state))
	}
	b.requireCounts(t, done.Topic, core.Counts{Done: 1})
	b.requireCounts(t, topic, core.Counts{Scheduled: 1, Cancelled: 1})

	// In one batch, a later duplicate conflicts with the earlier one.
	one, two := DueJob(topic), DueJob(topic)
	two.ID = one.ID
	res = putAbsent(one, two)
	require.NoError(t, res[0].Err)
	requireConflict(t, res[1].Err, one)
}
