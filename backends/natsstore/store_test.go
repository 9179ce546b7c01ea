package natsstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func TestPutGetClaimAck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	j := job("orders.close", 0)
	put(t, b.store, j)

	got, err := b.store.GetJob(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReady, got.State)
	require.JSONEq(t, `{"n":1}`, string(got.Body))

	jobs := claim(t, b.store, "orders.close", 10, 5*time.Second)
	require.Len(t, jobs, 1)
	require.Equal(t, j.ID, jobs[0].ID)
	require.Equal(t, 1, jobs[0].Attempt)
	require.Equal(t, core.StateReserved, jobs[0].State)
	require.NotEmpty(t, jobs[0].Lease)

	require.ErrorIs(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: "nope"})), core.ErrLeaseLost)
	require.NoError(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: jobs[0].Lease})))
	got, err = b.store.GetJob(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDone, got.State)

	require.Eventually(t, func() bool {
		tp, err := b.store.GetTopicState(ctx, "orders.close")
		return err == nil && tp.Counts == core.Counts{Done: 1}
	}, 5*time.Second, 10*time.Millisecond)
}

func TestScheduledOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// One beyond the lead (a real schedule), one within it (held).
	far, near := job("t", 1500*time.Millisecond), job("t", 200*time.Millisecond)
	put(t, b.store, far, near)

	jobs := claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, jobs, 1)
	require.Equal(t, near.ID, jobs[0].ID)
	late := time.Since(near.RunAt)
	require.GreaterOrEqual(t, late, time.Duration(0))

	jobs = claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, jobs, 1)
	require.Equal(t, far.ID, jobs[0].ID)
	late2 := time.Since(far.RunAt)
	require.GreaterOrEqual(t, late2, time.Duration(0))
	t.Logf("lateness near %s far %s", late, late2)
}

func TestOrderAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, c, d := job("t", -3*time.Second), job("t", -1*time.Second), job("t", -2*time.Second)
	put(t, b.store, c, a, d)
	require.NoError(t, b.store.CancelJob(ctx, &core.CancelJobParams{ID: d.ID}))
	require.ErrorIs(t, b.store.CancelJob(ctx, &core.CancelJobParams{ID: d.ID}), core.ErrNotFound)

	tp, err := b.store.GetTopicState(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Counts{Ready: 2, Cancelled: 1}, tp.Counts)

	jobs := claim(t, b.store, "t", 10, 5*time.Second)
	require.Len(t, jobs, 2)
	require.Equal(t, a.ID, jobs[0].ID)
	require.Equal(t, c.ID, jobs[1].ID)
	var conflict *core.ConflictError
	require.ErrorAs(t, b.store.CancelJob(ctx, &core.CancelJobParams{ID: a.ID}), &conflict)
	require.Empty(t, claim(t, b.store, "t", 10, 0))
}

func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	j := job("t", 0)
	j.TTR = time.Second
	j.MaxAttempts = 2
	put(t, b.store, j)

	first := claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, first, 1)
	second := claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, second, 1)
	require.Equal(t, 2, second[0].Attempt)
	require.Equal(t, core.LeaseExpired, second[0].LastError)
	require.ErrorIs(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: first[0].Lease})), core.ErrLeaseLost)

	// The last attempt's lease runs out: the job goes dead.
	require.Eventually(t, func() bool {
		dead, err := b.store.ListDeadJobs(ctx, &core.ListDeadJobsParams{Topic: "t", Limit: 10})
		return err == nil && len(dead) == 1
	}, 5*time.Second, 20*time.Millisecond)
	got, err := b.store.GetJob(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDead, got.State)
	require.NoError(t, b.store.RequeueJob(ctx, j.ID))
	again := claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, again, 1)
	require.Equal(t, 1, again[0].Attempt)
}

func TestRetryBuryTouchReplace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	j := job("t", 0)
	put(t, b.store, j)
	got := claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, got, 1)
	touched, err := b.store.TouchJob(ctx, &core.TouchJobParams{ID: j.ID, Lease: got[0].Lease})
	require.NoError(t, err)
	require.False(t, touched.LeaseExpiresAt.Before(got[0].LeaseExpiresAt))

	_, err = b.store.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j}, Replace: true})
	require.NoError(t, err)
	res, err := b.store.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j}, Replace: true})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, core.ErrConflict)

	require.NoError(t, settleErr(b.store.RetryJob(ctx, &core.RetryJobParams{ID: j.ID, Lease: got[0].Lease, RunAt: time.Now().Add(100 * time.Millisecond), Error: "boom"})))
	got = claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, got, 1)
	require.Equal(t, "boom", got[0].LastError)
	require.Equal(t, 2, got[0].Attempt)
	require.NoError(t, settleErr(b.store.BuryJob(ctx, &core.BuryJobParams{ID: j.ID, Lease: got[0].Lease, Error: "bad"})))
	require.Eventually(t, func() bool {
		tp, err := b.store.GetTopicState(ctx, "t")
		return err == nil && tp.Counts == core.Counts{Dead: 1}
	}, 5*time.Second, 10*time.Millisecond)

	// Replace a scheduled job: only the new time counts.
	k := job("t", time.Hour)
	put(t, b.store, k)
	res, err = b.store.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{k}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, core.ErrConflict)
	k2 := k.Clone()
	k2.RunAt = time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	res, err = b.store.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{k2}, Replace: true})
	require.NoError(t, err)
	require.True(t, res[0].Replaced)
	got = claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, got, 1)
	require.Equal(t, k.ID, got[0].ID)
}

// TestReleasedJobsDeliveredAgain: due jobs that a fetcher held and released
// unclaimed (it stops idleRelease after the last claim) are delivered to the
// next claims, also when schedules of the same topic fired meanwhile. With
// the soon schedules in the topic consumer's filter, nats-server 2.15 moved
// the consumer's ack floor past the held jobs and dropped them when they
// came back: a third of them were never delivered.
func TestReleasedJobsDeliveredAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.AckWait = 2 * time.Second })
	ctx := context.Background()
	const topic = "released"
	now := time.Now()
	var jobs []*core.Job
	for i := range 900 {
		j := job(topic, 0)
		j.RunAt = now.Add(-500 * time.Millisecond * time.Duration(300-i) / 300).UTC().Truncate(time.Millisecond)
		if i >= 300 {
			j.RunAt = now.Add(2 * time.Second * time.Duration(i-300) / 600).UTC().Truncate(time.Millisecond)
		}
		jobs = append(jobs, j)
	}
	put(t, b.store, jobs...)
	first := map[string]bool{}
	for len(first) < 100 {
		for _, j := range claim(t, b.store, topic, 100-len(first), 5*time.Second) {
			first[j.ID] = true
		}
	}
	// The fetcher holds the rest, sees the later jobs come due, idles out
	// and releases them; the server's ack-wait check runs meanwhile.
	time.Sleep(idleRelease + 4*time.Second)
	acked := map[string]bool{}
	for start := time.Now(); len(acked) < len(jobs)-len(first) && time.Since(start) < 20*time.Second; {
		for _, j := range claim(t, b.store, topic, 100, time.Second) {
			require.False(t, first[j.ID], "job %s claimed again while its lease holds", j.ID)
			require.NoError(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})))
			acked[j.ID] = true
		}
	}
	tp, err := b.store.GetTopicState(ctx, topic)
	require.NoError(t, err)
	require.Len(t, acked, len(jobs)-len(first), "counts %+v", tp.Counts)
	require.Equal(t, core.Counts{Reserved: int64(len(first)), Done: int64(len(acked))}, tp.Counts)
}

// TestCachedLeaseIsAGuess: a job claimed here is acknowledged from the
// lease message its claim kept, but the answer is the stored message's: when
// another instance ended the lease and claimed the job again, the old
// lease is lost and the new one (refused by the guess) is taken.
func TestCachedLeaseIsAGuess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := openStore(t, b.nc, b.prefix)
	ctx := context.Background()
	const topic = "guess"
	j1, j2 := job(topic, 0), job(topic, 0)
	put(t, b.store, j1, j2)
	first := map[string]*core.Job{}
	for len(first) < 2 {
		for _, j := range claim(t, b.store, topic, 2, 5*time.Second) {
			first[j.ID] = j
		}
	}
	// The other instance ends both leases (as a retry of a consumer that
	// gave up would) and claims both again; no lease runs out on its own,
	// so a slow machine changes nothing.
	for _, j := range first {
		require.NoError(t, settleErr(other.RetryJob(ctx, &core.RetryJobParams{ID: j.ID, Lease: j.Lease, Error: "gave up"})))
	}
	again := map[string]*core.Job{}
	for len(again) < 2 {
		got := claim(t, other, topic, 2, 10*time.Second)
		require.NotEmpty(t, got, "jobs not delivered again after their retry")
		for _, j := range got {
			again[j.ID] = j
		}
	}
	require.NoError(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: j1.ID, Lease: again[j1.ID].Lease})))
	err := settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: j2.ID, Lease: first[j2.ID].Lease}))
	require.ErrorIs(t, err, core.ErrLeaseLost)
	got, err := b.store.GetJob(ctx, j1.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDone, got.State)
	got, err = b.store.GetJob(ctx, j2.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, got.State)
	require.Equal(t, again[j2.ID].Lease, got.Lease)
}

// TestLeaseCacheBound: a full cache drops the leases that ran out before
// it takes another, and takes none when nothing ran out.
func TestLeaseCacheBound(t *testing.T) {
	t.Parallel()
	var c leaseCache
	now := time.Now()
	rec := func(id string, lease time.Time, seq uint64) *stored {
		return &stored{job: &core.Job{ID: id, State: core.StateReserved, LeaseExpiresAt: lease}, seq: seq, kind: kindLease}
	}
	for i := range maxCached {
		lease := now.Add(time.Minute)
		if i%2 == 0 {
			lease = now.Add(-time.Second)
		}
		c.put(rec(fmt.Sprint(i), lease, uint64(i+1)), now)
	}
	c.put(rec("new", now.Add(time.Minute), 1), now)
	require.Len(t, c.m, maxCached/2+1)
	m := c.take("new")
	require.NotNil(t, m)
	require.Equal(t, uint64(1), m.seq)
	require.Nil(t, c.take("new"), "taken twice")
	for i := len(c.m); i < maxCached; i++ {
		c.put(rec(fmt.Sprint("fill", i), now.Add(time.Minute), 1), now)
	}
	c.put(rec("over", now.Add(time.Minute), 1), now)
	require.Nil(t, c.take("over"), "kept past the bound")
	c.put(&stored{job: &core.Job{ID: "big", Body: make([]byte, maxCachedBody+1)}, seq: 1}, now)
	require.Nil(t, c.take("big"), "kept a body past maxCachedBody")
}

// TestKeyEntries: a keyed job's entry has no TTL while the job is
// unfinished and the retention once it finished; a replace with another
// key deletes the old entry; unkeyed jobs and export see no entries.
func TestKeyEntries(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.Retention = time.Hour })
	ctx := context.Background()
	entry := func(j *core.Job) *jetstream.RawStreamMsg {
		t.Helper()
		m, err := b.store.lastMsg(ctx, b.store.names.keySubject(j.Topic, j.Key, j.ID))
		require.NoError(t, err)
		return m
	}
	a, c := job("keys.entries", 0), job("keys.entries", time.Hour)
	a.Key, c.Key = "order:1", "order:1"
	put(t, b.store, a, c, job("keys.entries", time.Hour))
	require.NotNil(t, entry(a))
	require.Empty(t, entry(a).Header.Get(hdrTTL), "no TTL while unfinished")

	got := claim(t, b.store, "keys.entries", 1, 5*time.Second)
	require.Len(t, got, 1)
	require.NoError(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: a.ID, Lease: got[0].Lease})))
	require.Equal(t, "3600s", entry(a).Header.Get(hdrTTL), "the retention once done")

	moved := c.Clone()
	moved.Key = "order:2"
	res, err := b.store.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{moved}, Replace: true})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Nil(t, entry(c), "the old key's entry is deleted")
	require.NotNil(t, entry(moved))

	subjects, total, err := b.store.subjects(ctx, b.prefix+"."+kindKey+".>", 0)
	require.NoError(t, err)
	require.Equal(t, 2, total, "one entry per keyed job: %v", subjects)
	var exported []string
	require.NoError(t, b.store.ExportJobs(ctx, func(j *core.Job) error { exported = append(exported, j.ID); return nil }))
	require.Len(t, exported, 2, "the scheduled jobs, not the entries")
}

// TestKeysIndexedAtFirstNew: a stream whose jobs were put before the index
// of business keys (no key entries, no mark) gets the entries of its
// unfinished keyed jobs at the next New.
func TestKeysIndexedAtFirstNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, c := job("keys.old", time.Hour), job("keys.old", time.Hour)
	a.Key, c.Key = "order:1", "order:1"
	put(t, b.store, a, c, job("keys.old", time.Hour))
	// As an earlier version left it.
	require.NoError(t, b.store.stream.Purge(ctx, jetstream.WithPurgeSubject(b.prefix+"."+kindKey+".>")))
	require.NoError(t, b.store.kv.Delete(ctx, keyIndexed))
	find := func(s *Store) []*core.Job {
		t.Helper()
		got, err := s.FindJobs(ctx, &core.FindJobsParams{Topic: "keys.old", Key: "order:1", Limit: 10})
		require.NoError(t, err)
		return got
	}
	require.Empty(t, find(b.store))

	s2 := openStore(t, b.nc, b.prefix)
	got := find(s2)
	require.Len(t, got, 2)
	require.ElementsMatch(t, []string{a.ID, c.ID}, []string{got[0].ID, got[1].ID})
	_, err := s2.kv.Get(ctx, keyIndexed)
	require.NoError(t, err)
}

// TestRewriteBodyKeepsExpiry: a done job whose body is rewritten goes when
// its retention from its finish ends, not a retention after the rewrite.
func TestRewriteBodyKeepsExpiry(t *testing.T) {
	t.Parallel()
	const retention = 3 * time.Second
	b := setup(t, func(c *Config) { c.Retention = retention })
	ctx := context.Background()
	j := job("rw.ttl", 0)
	put(t, b.store, j)
	jobs := claim(t, b.store, "rw.ttl", 1, 5*time.Second)
	require.Len(t, jobs, 1)
	require.NoError(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: jobs[0].Lease})))
	done, err := b.store.GetJob(ctx, j.ID)
	require.NoError(t, err)
	time.Sleep(retention / 2) // the real clock runs the server's TTLs
	require.NoError(t, b.store.RewriteBody(ctx, &core.RewriteBodyParams{ID: j.ID, Old: j.Body, Body: []byte(`"anew"`)}))
	require.Eventually(t, func() bool {
		_, err := b.store.GetJob(ctx, j.ID)
		return errors.Is(err, core.ErrNotFound)
	}, time.Until(done.UpdatedAt.Add(retention+1500*time.Millisecond)), 50*time.Millisecond,
		"gone by its retention from the finish, within the server's TTL slack")
}

// TestClaimAnswerLost: a lease publish applied whose answer was lost (a
// timeout while the stream's leader changes) fails its claim; the next
// claim finds the reservation and hands the job out under it, so its
// attempt is not spent unseen (a history run found attempt 2 delivered
// with no attempt 1).
func TestClaimAnswerLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	j := job("t", 0)
	put(t, b.store, j)

	lost := make(chan struct{})
	b.store.awaitClaim = func(ctx context.Context, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
		if _, err := await(ctx, f); err != nil {
			return nil, err
		}
		close(lost)
		return nil, context.DeadlineExceeded
	}
	_, err := b.store.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1, Wait: 5 * time.Second})
	require.ErrorIs(t, err, core.ErrUnavailable)
	<-lost
	b.store.awaitClaim = await

	got := claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, got, 1)
	require.Equal(t, 1, got[0].Attempt, "the lost answer's reservation, handed out")
	_, err = b.store.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: got[0].Lease})
	require.NoError(t, err)
	done, err := b.store.GetJob(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDone, done.State)
}

// shiftedClock is the real clock moved by an offset a test sets.
type shiftedClock struct {
	core.Clock
	offset atomic.Int64
}

func (c *shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// TestLeaseFiredOnClockBehind: the server fires a lease's schedule when it
// ends; a claim of this instance whose clock went back meanwhile still
// sees the lease hold, and must deliver the job anew, not hand the same
// delivery out a second time (a history run with clock jumps found it).
func TestLeaseFiredOnClockBehind(t *testing.T) {
	t.Parallel()
	clock := &shiftedClock{Clock: core.RealClock()}
	b := setup(t, func(c *Config) { c.Clock = clock })
	ctx := context.Background()
	slow := job("t", 0)
	slow.TTR = time.Second
	put(t, b.store, slow)
	first := claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, first, 1)

	// An urgent job, then the lease's firing: a claim with the clock ahead
	// moves both to ready and takes the urgent one.
	urgent := job("t", 0)
	urgent.Priority = -1
	put(t, b.store, urgent)
	q, err := b.store.queue("t")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		held := q.byID[slow.ID]
		return held != nil && held.m.job.Lease == first[0].Lease && q.byID[urgent.ID] != nil
	}, 10*time.Second, 10*time.Millisecond, "the lease's schedule fired")
	clock.offset.Store(int64(5 * time.Second))
	took := claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, took, 1)
	require.Equal(t, urgent.ID, took[0].ID)

	// The clock goes back before the lease's end.
	clock.offset.Store(int64(-3 * time.Second))
	again := claim(t, b.store, "t", 1, 5*time.Second)
	require.Len(t, again, 1)
	require.Equal(t, slow.ID, again[0].ID)
	require.Equal(t, 2, again[0].Attempt, "a new delivery")
	require.NotEqual(t, first[0].Lease, again[0].Lease)
	_, err = b.store.AckJob(ctx, &core.AckJobParams{ID: slow.ID, Lease: again[0].Lease})
	require.NoError(t, err)
}
