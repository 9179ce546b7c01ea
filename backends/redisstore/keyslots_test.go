package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// TestKeyConcurrencyClusterRace: two stores over one Cluster prefix claim
// one topic with key_concurrency 2 at once, and end the deliveries each
// way a lease ends (ack, retry, release, cancel; a touch first): the jobs
// of a key reserved, counted from each claim's answer until their end,
// never exceed 2, and every job finishes. Both job forms.
func TestKeyConcurrencyClusterRace(t *testing.T) {
	t.Parallel()
	for _, form := range []string{JobFormPacked, JobFormHash} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			keyConcurrencyRace(t, false, func(c *Config) { c.JobForm = form })
		})
	}
}

// TestFairClusterRace is TestKeyConcurrencyClusterRace with fair claims:
// the ring in the prefix's slot serves each job once over both stores,
// within the keys' bound, and is empty at the end, every registration gone.
func TestFairClusterRace(t *testing.T) {
	t.Parallel()
	keyConcurrencyRace(t, true, func(*Config) {})
}

// keyConcurrencyRace runs TestKeyConcurrencyClusterRace, with fair claims
// when fair, on stores made with form.
func keyConcurrencyRace(t *testing.T, fair bool, form func(*Config)) {
	const (
		topic  = "race"
		limit  = 2
		keyed  = 60
		loose  = 10
		perKey = keyed / 4
	)
	url, prefix := clusterURL(t), uniquePrefix(t.Name())
	stores := []*Store{openStore(t, url, prefix, form), openStore(t, url, prefix, form)}
	var jobs []*core.Job
	way := map[string]int{} // how each job's first delivery ends
	for i := range keyed + loose {
		j := job(topic, -time.Second)
		if i < keyed {
			j.Key = fmt.Sprintf("k%d", i/perKey)
		}
		jobs = append(jobs, j)
		way[j.ID] = i % 5
	}
	put(t, stores[0], jobs...)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		held     = map[string]int{}
		most     int
		finished int
		failures []error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	// end ends j's delivery by its way, the first time, then acks it;
	// its key's count goes down just before, since the end frees the slot.
	ended := map[string]bool{} // under mu
	end := func(s *Store, j *core.Job) (finished bool, err error) {
		mu.Lock()
		again := ended[j.ID]
		ended[j.ID] = true
		mu.Unlock()
		if way[j.ID] == 2 && !again {
			if _, err := s.TouchJob(ctx, &core.TouchJobParams{ID: j.ID, Lease: j.Lease}); err != nil {
				return false, err
			}
		}
		if j.Key != "" {
			mu.Lock()
			held[j.Key]--
			mu.Unlock()
		}
		switch w := way[j.ID]; {
		case again:
		case w == 0:
			return false, settleErr(s.RetryJob(ctx, &core.RetryJobParams{ID: j.ID, Lease: j.Lease, Error: "x"}))
		case w == 1:
			return false, settleErr(s.RetryJob(ctx, &core.RetryJobParams{ID: j.ID, Lease: j.Lease, Unsent: true}))
		case w == 3:
			return true, s.CancelJob(ctx, &core.CancelJobParams{ID: j.ID, Running: true})
		}
		return true, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease}))
	}
	for w := range 6 {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				done := finished == len(jobs)
				mu.Unlock()
				if done {
					return
				}
				got, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic, Max: 3, Wait: 100 * time.Millisecond, KeyConcurrency: limit, Fair: fair})
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				for _, j := range got {
					if j.Key != "" {
						held[j.Key]++
						most = max(most, held[j.Key])
					}
				}
				mu.Unlock()
				for _, j := range got {
					fin, err := end(s, j)
					if err != nil {
						fail(fmt.Errorf("end %s (attempt %d): %w", j.ID, j.Attempt, err))
						return
					}
					if fin {
						mu.Lock()
						finished++
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, failures)
	require.Equal(t, len(jobs), finished, "every job finished")
	require.LessOrEqual(t, most, limit, "the most jobs of a key reserved at once")
	require.Equal(t, limit, most, "keys used their slots")
	st, err := stores[1].GetTopicState(t.Context(), topic)
	require.NoError(t, err)
	require.Equal(t, int64(len(jobs)), st.Counts.Done+st.Counts.Cancelled, "%+v", st.Counts)
	rdb := stores[0].rdb
	require.Zero(t, rdb.HLen(t.Context(), "{"+prefix+"}:kh:"+topic).Val(), "every slot came back")
	require.Zero(t, rdb.ZCard(t.Context(), stores[0].keys.holders).Val(), "no holder left")
	if fair {
		require.Zero(t, rdb.ZCard(t.Context(), "{"+prefix+"}:kr:"+topic).Val(), "no key left in the ring")
		require.Zero(t, rdb.HLen(t.Context(), "{"+prefix+"}:kv:"+topic).Val(), "no job left registered")
		require.Zero(t, rdb.HLen(t.Context(), "{"+prefix+"}:kd:"+topic).Val(), "no TTR left")
	}
}

// TestKeyConcurrencyDeadInstance: the slot a store holds comes back once
// its lease expires after the store is gone: another store's expirer ends
// the lease and frees the slot, and the key's jobs go out again. On a fake
// clock (TimeFromClock) that both stores share.
func TestKeyConcurrencyDeadInstance(t *testing.T) {
	t.Parallel()
	clock, fake := slotClock()
	url, prefix := clusterURL(t), uniquePrefix(t.Name())
	dead, live := openStore(t, url, prefix, fake), openStore(t, url, prefix, fake)
	const topic = "dead"
	jobs := keyedDue(clock, topic, 3)
	put(t, live, jobs...)
	claimKC := func(s *Store) []*core.Job { return claimKeyed(t, s, topic) }
	first := claimKC(dead)
	require.Len(t, first, 1)
	require.Equal(t, jobs[0].ID, first[0].ID)
	require.Equal(t, clock.Now().Add(time.Second).UTC(), first[0].LeaseExpiresAt, "the lease as the slot")
	require.Empty(t, claimKC(live), "the dead store's slot")
	require.NoError(t, dead.Close())

	clock.Advance(999 * time.Millisecond)
	require.Empty(t, claimKC(live), "the lease holds")
	clock.Advance(time.Millisecond)
	var again []*core.Job
	require.Eventually(t, func() bool {
		again = claimKC(live)
		return len(again) > 0
	}, 10*time.Second, 10*time.Millisecond, "the slot came back with the lease")
	require.Len(t, again, 1)
	require.Equal(t, jobs[0].ID, again[0].ID, "the key's first job, again")
	require.Equal(t, 2, again[0].Attempt)
	require.Empty(t, claimKC(live))
}

// TestKeySlotsLapse: a slot whose freeing was lost (a store that died
// between a lease's end and slots.lua) lapses once its holder's score and
// slots.lua's margin passed: the sweep frees it and wakes the key's
// parked job.
func TestKeySlotsLapse(t *testing.T) {
	t.Parallel()
	clock, fake := slotClock()
	s := openStore(t, clusterURL(t), uniquePrefix(t.Name()), fake)
	ctx := t.Context()
	const topic = "lapse"
	jobs := keyedDue(clock, topic, 2)
	put(t, s, jobs...)
	claimKC := func() []*core.Job { return claimKeyed(t, s, topic) }
	first := claimKC()
	require.Len(t, first, 1)
	require.Empty(t, claimKC(), "parked behind the slot")

	// The ack's lease script alone: its slot is not freed.
	n := s.keys.shardOf(first[0].ID)
	sk := &s.keys.shard[n]
	res, err := s.run(ctx, []call{s.shardCall(scriptLease, n, sk.base, sk.num, 1, "ack", first[0].ID, first[0].Lease, 0, "")})[0].Slice()
	require.NoError(t, err)
	require.Len(t, asSlice(asSlice(res[0])[3]), 4, "the slot it gave back")
	require.Empty(t, claimKC(), "the slot is still held")

	clock.Advance(sweepInterval) // past the holder's score and the margin: the expirer's sweep
	var got []*core.Job
	require.Eventually(t, func() bool {
		got = claimKC()
		return len(got) > 0
	}, 10*time.Second, 10*time.Millisecond, "the lapsed slot's key's next job")
	require.Equal(t, jobs[1].ID, got[0].ID)
}

// TestKeySlotsFreedByReplace: a put that replaces a job whose lease
// expired ends the lease (settle) and frees its key's slot at once, which
// wakes the key's parked job, rather than leaving the slot to lapse. The
// lease is taken out of the lease set first, so that no expirer ends it
// instead.
func TestKeySlotsFreedByReplace(t *testing.T) {
	t.Parallel()
	clock, fake := slotClock()
	s := openStore(t, clusterURL(t), uniquePrefix(t.Name()), fake)
	ctx := t.Context()
	const topic = "replace"
	jobs := keyedDue(clock, topic, 2)
	put(t, s, jobs...)
	claimKC := func() []*core.Job { return claimKeyed(t, s, topic) }
	first := claimKC()
	require.Len(t, first, 1)
	require.Equal(t, jobs[0].ID, first[0].ID)
	require.Empty(t, claimKC(), "parked behind the slot")
	require.NoError(t, s.rdb.ZRem(ctx, s.keys.shard[s.keys.shardOf(first[0].ID)].base+":lease", first[0].ID).Err())

	clock.Advance(time.Second) // the lease's end; its holder lapses a second later
	replaced := jobs[0].Clone()
	replaced.RunAt = clock.Now().Add(time.Hour).UTC()
	res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{replaced}, Replace: true})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	var got []*core.Job
	require.Eventually(t, func() bool {
		got = claimKC()
		return len(got) > 0
	}, 5*time.Second, 10*time.Millisecond, "the key's parked job, its slot freed by the put")
	require.Equal(t, jobs[1].ID, got[0].ID)
}

// slotClock is a fake clock on a whole second an hour ahead, and the
// option that runs a store on it (TimeFromClock), for tests of slots that
// end with leases.
func slotClock() (*coretest.FakeClock, func(*Config)) {
	clock := coretest.NewFakeClockAt(time.Now().Add(time.Hour).Truncate(time.Second))
	return clock, func(c *Config) { c.Clock, c.TimeFromClock = clock, true }
}

// keyedDue returns n jobs of topic with key "k", due 10 ms apart before
// clock's now, each with a ttr of 1 s.
func keyedDue(clock *coretest.FakeClock, topic string, n int) []*core.Job {
	jobs := make([]*core.Job, n)
	for i := range jobs {
		j := job(topic, 0)
		j.RunAt = clock.Now().Add(time.Duration(i-10) * time.Millisecond).UTC()
		j.Key, j.TTR = "k", time.Second
		jobs[i] = j
	}
	return jobs
}

// claimKeyed claims up to 5 jobs of topic from s with a key_concurrency of 1.
func claimKeyed(t *testing.T, s *Store, topic string) []*core.Job {
	t.Helper()
	got, err := s.ClaimJobs(t.Context(), &core.ClaimJobsParams{Topic: topic, Max: 5, KeyConcurrency: 1})
	require.NoError(t, err)
	return got
}

// TestFairNewJobsUnparkedCluster: the jobs a Cluster's puts parked by key
// for a fair topic go back to their queues for the first claim of a store
// that claims the topic without fair, though it never claimed it fair (a
// topic made plain, its instances restarted): every job is claimed, in
// claim order.
func TestFairNewJobsUnparkedCluster(t *testing.T) {
	t.Parallel()
	url, prefix := clusterURL(t), uniquePrefix(t.Name())
	const topic = "unfair"
	jobs := make([]*core.Job, 6)
	for i := range jobs {
		jobs[i] = job(topic, time.Duration(i-10)*time.Millisecond)
		jobs[i].Key = fmt.Sprint("k", i%2)
	}
	putter := openStore(t, url, prefix)
	res, err := putter.PutJobs(t.Context(), &core.PutJobsParams{Jobs: jobs, Fair: []string{topic}})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	fresh := openStore(t, url, prefix)
	got := claim(t, fresh, topic, 10, 0)
	want := make([]string, len(jobs))
	for i, j := range jobs {
		want[i] = j.ID
	}
	gotIDs := make([]string, len(got))
	for i, j := range got {
		gotIDs[i] = j.ID
	}
	require.Equal(t, want, gotIDs, "every job, in claim order")
}
