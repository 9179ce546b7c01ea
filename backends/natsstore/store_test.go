package natsstore

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
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
		tp, err := b.store.GetTopic(ctx, "orders.close")
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
	require.NoError(t, b.store.CancelJob(ctx, d.ID))
	require.ErrorIs(t, b.store.CancelJob(ctx, d.ID), core.ErrNotFound)

	tp, err := b.store.GetTopic(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Counts{Ready: 2, Cancelled: 1}, tp.Counts)

	jobs := claim(t, b.store, "t", 10, 5*time.Second)
	require.Len(t, jobs, 2)
	require.Equal(t, a.ID, jobs[0].ID)
	require.Equal(t, c.ID, jobs[1].ID)
	var conflict *core.ConflictError
	require.ErrorAs(t, b.store.CancelJob(ctx, a.ID), &conflict)
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
		tp, err := b.store.GetTopic(ctx, "t")
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

func TestTopics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.store.GetTopic(ctx, "x")
	require.ErrorIs(t, err, core.ErrNotFound)
	require.NoError(t, b.store.PutTopic(ctx, &core.Topic{Name: "x", MaxAttempts: 4}))
	put(t, b.store, job("y.z", time.Hour))
	topics, err := b.store.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 2)
	require.Equal(t, "x", topics[0].Name)
	require.True(t, topics[0].Configured)
	require.Equal(t, 4, topics[0].MaxAttempts)
	require.Equal(t, "y.z", topics[1].Name)
	require.False(t, topics[1].Configured)
	require.Equal(t, core.Counts{Scheduled: 1}, topics[1].Counts)
	require.NoError(t, b.store.DeleteTopic(ctx, "x"))
	require.ErrorIs(t, b.store.DeleteTopic(ctx, "x"), core.ErrNotFound)
	_, err = b.store.GetTopic(ctx, "x")
	require.ErrorIs(t, err, core.ErrNotFound)
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
	tp, err := b.store.GetTopic(ctx, topic)
	require.NoError(t, err)
	require.Len(t, acked, len(jobs)-len(first), "counts %+v", tp.Counts)
	require.Equal(t, core.Counts{Reserved: int64(len(first)), Done: int64(len(acked))}, tp.Counts)
}

// TestRepairConsumer: a topic consumer that takes a wake-up still in the
// stream for acknowledged is recreated, and the job is delivered. Here the
// ready consumer was made by an older version with another filter (a soon
// schedule's, as versions that lost jobs that way had), and its ack floor
// passed a ready wake-up it never saw.
func TestRepairConsumer(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	b := setup(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	ctx := context.Background()
	const topic = "repair"
	n := b.store.names
	old, err := b.store.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       n.topicConsumer(kindReady, topic),
		FilterSubject: n.kindFilter(kindSoon, topic),
		AckPolicy:     jetstream.AckExplicitPolicy,
	})
	require.NoError(t, err)
	j := job(topic, 0) // a ready wake-up
	put(t, b.store, j)
	// A later soon schedule, acknowledged: the ack floor passes the ready
	// wake-up. Its job stays deliverable by its near twin.
	later := job(topic, 300*time.Millisecond)
	put(t, b.store, later)
	batch, err := old.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	fetched := 0
	for m := range batch.Messages() {
		require.Equal(t, n.wake(kindSoon, topic, later.ID), m.Subject())
		require.NoError(t, m.DoubleAck(ctx))
		fetched++
	}
	require.NoError(t, batch.Error())
	require.Equal(t, 1, fetched)

	got := map[string]bool{}
	for !got[j.ID] {
		jobs := claim(t, b.store, topic, 1, 5*time.Second)
		require.NotEmpty(t, jobs, "job %s never delivered", j.ID)
		got[jobs[0].ID] = true
	}
	require.Contains(t, logs.String(), "recreating it")
}

// TestSplitsOlderConsumers: consumers of an earlier version, one per topic
// on near and ready and one housekeeping consumer on lead and expire, are
// updated to one filter each and joined by the new ones (on a work-queue
// stream the server refuses overlapping filters, so the order matters), and
// jobs of every path are delivered.
func TestSplitsOlderConsumers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const topic = "split"
	n := b.store.names
	require.NoError(t, b.store.Close())
	for _, name := range []string{n.houseConsumer(kindLead), n.houseConsumer(kindExpire)} {
		require.NoError(t, b.store.stream.DeleteConsumer(ctx, name))
	}
	for _, c := range []jetstream.ConsumerConfig{
		{Durable: n.houseConsumer(kindLead), FilterSubjects: []string{n.prefix + ".lead.>", n.prefix + ".expire.>"}},
		{Durable: n.topicConsumer(kindReady, topic), FilterSubjects: []string{n.kindFilter(kindNear, topic), n.kindFilter(kindReady, topic)}},
	} {
		c.AckPolicy = jetstream.AckExplicitPolicy
		_, err := b.store.stream.CreateOrUpdateConsumer(ctx, c)
		require.NoError(t, err)
	}
	s := openStore(t, b.nc, b.prefix, func(c *Config) { c.Lead = 200 * time.Millisecond })
	ready, near, sched := job(topic, 0), job(topic, 100*time.Millisecond), job(topic, time.Second)
	expiring := job(topic, 0)
	expiring.TTR = time.Second
	put(t, s, ready, near, sched, expiring)
	want := map[string]bool{ready.ID: true, near.ID: true, sched.ID: true, expiring.ID: true}
	seen := map[string]int{}
	for len(seen) < len(want) || seen[expiring.ID] < 2 {
		jobs := claim(t, s, topic, 10, 10*time.Second)
		require.NotEmpty(t, jobs, "delivered %v of %v", seen, want)
		for _, j := range jobs {
			require.True(t, want[j.ID], "unknown job %s", j.ID)
			seen[j.ID]++
			if j.ID != expiring.ID || seen[j.ID] > 1 {
				// The first claim of expiring lets its lease run out: the
				// housekeeping's expire consumer makes it ready again.
				require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})))
			}
		}
	}
	for _, kind := range houseKinds {
		info, err := s.stream.Consumer(ctx, n.houseConsumer(kind))
		require.NoError(t, err)
		require.Equal(t, n.prefix+"."+kind+".>", info.CachedInfo().Config.FilterSubject)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPublishAllKeepsOrder: wake-ups published together, pipelined, are
// stored in the order given, which the write protocol relies on (the purge
// bound, a soon schedule before its near twin).
func TestPublishAllKeepsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	n := b.store.names
	var msgs []*nats.Msg
	for i := range 200 {
		msgs = append(msgs, wakeMsg(n.wake(kindDead, "order", fmt.Sprint("j", i)), time.Now(), matching(0)))
	}
	seqs, err := b.store.publishAll(ctx, msgs)
	require.NoError(t, err)
	require.Len(t, seqs, len(msgs))
	for i, seq := range seqs {
		m, err := b.store.stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		require.Equal(t, msgs[i].Subject, m.Subject)
		if i > 0 {
			require.Greater(t, seq, seqs[i-1])
		}
	}
}

// TestCountsAfterBackgroundPurges: acknowledgements answer before the
// stale wake-ups they leave (lease schedules) are purged; counts wait for
// those purges (awaitPurges), so an instance reads its own writes. (Jobs due at
// once: a claim later than a soon schedule's grace leaves a ready wake-up
// that counts until reconciled, by design.)
func TestCountsAfterBackgroundPurges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const topic, n = "settle", 200
	var jobs []*core.Job
	for range n {
		jobs = append(jobs, job(topic, 0))
	}
	put(t, b.store, jobs...)
	var got []*core.Job
	for len(got) < n {
		got = append(got, claim(t, b.store, topic, n-len(got), 5*time.Second)...)
	}
	tp, err := b.store.GetTopic(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, core.Counts{Reserved: n}, tp.Counts)

	// Hold the purges back: the acknowledgements still answer.
	gate := make(chan struct{})
	var held sync.WaitGroup
	held.Add(n)
	b.store.bg.before = func(string) { held.Done(); <-gate }
	var wg sync.WaitGroup
	for _, j := range got {
		wg.Go(func() {
			assert.NoError(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})))
		})
	}
	wg.Wait()
	held.Wait()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, b.store.awaitPurges(cancelled), context.Canceled)
	close(gate)
	tp, err = b.store.GetTopic(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, core.Counts{Done: n}, tp.Counts)
}

// TestCachedRecordIsAGuess: a job claimed here is acknowledged from the
// record its claim kept, but the answer is the stored record's: when
// another instance ended the lease and claimed the job again, the old
// lease is lost and the new one (refused by the guess) is taken.
func TestCachedRecordIsAGuess(t *testing.T) {
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

// TestRecordCacheBound: a full cache drops the records whose lease ran out
// before it takes another, and takes none when nothing ran out.
func TestRecordCacheBound(t *testing.T) {
	t.Parallel()
	var c recordCache
	now := time.Now()
	rec := func(id string, lease time.Time) *core.Job {
		return &core.Job{ID: id, State: core.StateReserved, LeaseExpiresAt: lease}
	}
	for i := range maxCached {
		lease := now.Add(time.Minute)
		if i%2 == 0 {
			lease = now.Add(-time.Second)
		}
		c.put(rec(fmt.Sprint(i), lease), uint64(i+1), now)
	}
	c.put(rec("new", now.Add(time.Minute)), 1, now)
	require.Len(t, c.m, maxCached/2+1)
	j, seq := c.take("new")
	require.NotNil(t, j)
	require.Equal(t, uint64(1), seq)
	j, _ = c.take("new")
	require.Nil(t, j, "taken twice")
	for i := len(c.m); i < maxCached; i++ {
		c.put(rec(fmt.Sprint("fill", i), now.Add(time.Minute)), 1, now)
	}
	c.put(rec("over", now.Add(time.Minute)), 1, now)
	j, _ = c.take("over")
	require.Nil(t, j, "kept past the bound")
	c.put(&core.Job{ID: "big", Body: make([]byte, maxCachedBody+1)}, 1, now)
	j, _ = c.take("big")
	require.Nil(t, j, "kept a body past maxCachedBody")
}

// TestPurgesOfAJobInOrder: the background purges of one job run in the
// order asked, the second after the first has finished, also when the
// first is held up; another job's purge does not wait.
func TestPurgesOfAJobInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	n := b.store.names
	first, second, other := n.wake(kindSoon, "order", "a"), n.wakes("order", "a"), n.wakes("order", "b")
	gate := make(chan struct{})
	otherRan := make(chan struct{})
	var mu sync.Mutex
	var order []string
	b.store.bg.before = func(subject string) {
		switch subject {
		case first:
			<-gate
		case other:
			close(otherRan)
		}
		mu.Lock()
		order = append(order, subject)
		mu.Unlock()
	}
	b.store.purgeLater(first, "a", 1)
	b.store.purgeLater(second, "a", 1)
	b.store.purgeLater(other, "b", 1)
	<-otherRan // not held up by job a's purges
	close(gate)
	require.NoError(t, b.store.awaitPurges(ctx))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{first, second}, slices.DeleteFunc(slices.Clone(order), func(s string) bool { return s == other }))
}

// TestRestoreAfterANewerWrite: a stale wake-up reconciled from a record
// read just before the job was acknowledged must not bring its lease back
// (it counted as reserved until the lease's time, 30 s after a burst).
func TestRestoreAfterANewerWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const topic = "restore"
	put(t, b.store, job(topic, 0))
	got := claim(t, b.store, topic, 1, 5*time.Second)
	require.Len(t, got, 1)
	read, seq, err := b.store.load(ctx, got[0].ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, read.State)
	require.NoError(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: got[0].ID, Lease: got[0].Lease})))

	require.NoError(t, b.store.publishWakes(ctx, read, seq))
	tp, err := b.store.GetTopic(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, core.Counts{Done: 1}, tp.Counts, "no lease is left for a job done, and it counts once")
}

// TestFinishedMarkerTTL: a finished job's marker expires with its record:
// a TTL of the retention as it finishes, what is left of it when published
// again later (publishWakes), and no marker in its last second, which NATS
// cannot express.
func TestFinishedMarkerTTL(t *testing.T) {
	t.Parallel()
	s := &Store{cfg: Config{Retention: time.Hour}, names: newNames("p")}
	now := time.Now().UTC()
	j := &core.Job{ID: "x", Topic: "a.b", State: core.StateDone, UpdatedAt: now}
	marker := func() *nats.Msg {
		msgs := s.wakesFor(j, now, matching(7))
		if len(msgs) == 0 {
			return nil
		}
		require.Len(t, msgs, 1)
		return msgs[0]
	}
	m := marker()
	require.Equal(t, "p.fin.done.a.b.x", m.Subject)
	require.Equal(t, "1h0m0s", m.Header.Get(hdrTTL))

	j.State = core.StateCancelled
	j.UpdatedAt = now.Add(-time.Hour + 90*time.Second)
	m = marker()
	require.Equal(t, "p.fin.cancelled.a.b.x", m.Subject)
	require.Equal(t, "1m30s", m.Header.Get(hdrTTL))

	j.UpdatedAt = now.Add(-time.Hour + 500*time.Millisecond)
	require.Nil(t, marker(), "less than a second left")
}
