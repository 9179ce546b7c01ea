package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// finishedEntry is what the suite compares of a core.FinishedJob: all of
// it but FinishedAt, which it checks against the job.
type finishedEntry struct {
	ID, Topic, Key, LastError string
	State                     core.State
	Attempt                   int
}

func entryOf(f core.FinishedJob) finishedEntry {
	return finishedEntry{ID: f.ID, Topic: f.Topic, Key: f.Key, LastError: f.LastError, State: f.State, Attempt: f.Attempt}
}

// finishedReader follows a store's record of finished jobs from a cursor.
type finishedReader struct {
	store  core.Store
	cursor string
}

// readAll reads every entry after the reader's cursor, limit at a time,
// and moves the cursor past them.
func (r *finishedReader) readAll(t *testing.T, ctx context.Context, limit int) []core.FinishedJob {
	t.Helper()
	var out []core.FinishedJob
	for range 1000 {
		page, err := r.store.ListFinished(ctx, &core.ListFinishedParams{After: r.cursor, Limit: limit})
		require.NoError(t, err)
		require.NotNil(t, page.Jobs, "ListFinished returned nil Jobs")
		require.LessOrEqual(t, len(page.Jobs), limit, "more entries than Limit")
		if len(page.Jobs) == 0 {
			require.Equal(t, r.cursor, page.Next, "an empty read moved the cursor")
			return out
		}
		require.NotEqual(t, r.cursor, page.Next, "a read with entries kept the cursor")
		out = append(out, page.Jobs...)
		r.cursor = page.Next
	}
	require.FailNow(t, "the record of finished jobs does not end")
	return nil
}

// expectFinished reads on from the reader's cursor until the entries of
// want (in that order) came, by deadline; nothing else may come.
func (r *finishedReader) expectFinished(t *testing.T, ctx context.Context, deadline time.Time, want ...finishedEntry) []core.FinishedJob {
	t.Helper()
	var got []core.FinishedJob
	for {
		got = append(got, r.readAll(t, ctx, 2)...)
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			require.FailNow(t, "context done")
		case <-time.After(50 * time.Millisecond):
		}
	}
	entries := make([]finishedEntry, len(got))
	for i, f := range got {
		entries[i] = entryOf(f)
	}
	require.Equal(t, want, entries, "entries of the record of finished jobs")
	return got
}

// requireFinishedAt requires f's FinishedAt to be the UpdatedAt of the job
// as GetJob reports it (it must still be in f's state).
func (b *testBundle) requireFinishedAt(t *testing.T, f core.FinishedJob) {
	t.Helper()
	j := b.get(t, f.ID)
	require.Equal(t, f.State, j.State, "job %s", f.ID)
	require.WithinDuration(t, j.UpdatedAt, f.FinishedAt, time.Millisecond, "FinishedAt of %s", f.ID)
}

// testFinishedRecord: every finish (ack, cancel, bury, a lease that ran out
// on its last attempt) appends an entry to the store's record of finished
// jobs, and nothing else does (a put, a retry, a requeue); a requeued job
// and a reused id finish again with entries of their own. A reader that
// goes on from its cursor meets each entry once, on another instance and
// after a restart too, and bad arguments are refused.
func testFinishedRecord(t *testing.T, b *testBundle) {
	const topic, other = "fin.rec", "fin.rec.other"
	ctx := b.ctx
	r := &finishedReader{store: b.store}
	soon := func() time.Time { return time.Now().Add(5 * time.Second) }

	empty, err := b.store.ListFinished(ctx, &core.ListFinishedParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, empty.Jobs)
	require.Empty(t, empty.Next)
	for _, p := range []*core.ListFinishedParams{nil, {Limit: 0}, {Limit: core.FinishedLimitMax + 1}, {After: "not a cursor", Limit: 1}} {
		_, err := b.store.ListFinished(ctx, p)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "ListFinished(%+v)", p)
	}

	// An ack: done, with its key and the attempt that ended.
	acked := keyed(topic, "k1", time.Now())
	b.put(t, acked)
	c := b.claimOne(t, topic, dueWait)
	require.NoError(t, ack(b, c))
	got := r.expectFinished(t, ctx, soon(), finishedEntry{ID: acked.ID, Topic: topic, Key: "k1", State: core.StateDone, Attempt: 1})
	b.requireFinishedAt(t, got[0])

	// A cancel, and a retry, which is not a finish.
	cancelled := NewJob(topic, time.Now().Add(time.Hour))
	retried := DueJob(other)
	b.put(t, cancelled, retried)
	require.NoError(t, b.store.CancelJob(ctx, &core.CancelJobParams{ID: cancelled.ID}))
	c = b.claimOne(t, other, dueWait)
	require.NoError(t, settleErr(b.store.RetryJob(ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, RunAt: time.Now().Add(time.Hour), Error: "later"})))
	got = r.expectFinished(t, ctx, soon(), finishedEntry{ID: cancelled.ID, Topic: topic, State: core.StateCancelled})
	b.requireFinishedAt(t, got[0])

	// A bury, then its requeue (no entry) and ack (another), whose last
	// error stays the bury's.
	buried := DueJob(other)
	b.put(t, buried)
	c = b.claimOne(t, other, dueWait)
	require.NoError(t, settleErr(b.store.BuryJob(ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "boom"})))
	got = r.expectFinished(t, ctx, soon(), finishedEntry{ID: buried.ID, Topic: other, State: core.StateDead, Attempt: 1, LastError: "boom"})
	b.requireFinishedAt(t, got[0])
	require.NoError(t, b.store.RequeueJob(ctx, buried.ID))
	require.Empty(t, r.readAll(t, ctx, 10), "a requeue recorded as a finish")
	c = b.claimOne(t, other, dueWait)
	require.Equal(t, buried.ID, c.ID)
	require.NoError(t, ack(b, c))
	r.expectFinished(t, ctx, soon(), finishedEntry{ID: buried.ID, Topic: other, State: core.StateDone, Attempt: 1, LastError: "boom"})

	// The id of a done job reused: the new job's finish is another entry.
	reused := DueJob(other)
	reused.ID = acked.ID
	b.put(t, reused)
	require.Empty(t, r.readAll(t, ctx, 10), "a put recorded as a finish")
	c = b.claimOne(t, other, dueWait)
	require.Equal(t, acked.ID, c.ID)
	require.NoError(t, ack(b, c))
	r.expectFinished(t, ctx, soon(), finishedEntry{ID: acked.ID, Topic: other, State: core.StateDone, Attempt: 1})

	// A lease that runs out on the last attempt: dead, recorded once the
	// store ends the lease (a claim of the topic waits past it).
	expired := shortJob(topic)
	expired.MaxAttempts = 1
	b.put(t, expired)
	c = b.claimOne(t, topic, dueWait)
	require.Empty(t, b.claim(t, topic, 1, time.Until(c.LeaseExpiresAt.Add(600*time.Millisecond))))
	got = r.expectFinished(t, ctx, c.LeaseExpiresAt.Add(5*time.Second),
		finishedEntry{ID: expired.ID, Topic: topic, State: core.StateDead, Attempt: 1, LastError: core.LeaseExpired})
	b.requireFinishedAt(t, got[0])

	// Another instance from the start, a page of one at a time: each entry
	// once, a job's finishes in their order.
	all := []finishedEntry{
		{ID: acked.ID, Topic: topic, Key: "k1", State: core.StateDone, Attempt: 1},
		{ID: cancelled.ID, Topic: topic, State: core.StateCancelled},
		{ID: buried.ID, Topic: other, State: core.StateDead, Attempt: 1, LastError: "boom"},
		{ID: buried.ID, Topic: other, State: core.StateDone, Attempt: 1, LastError: "boom"},
		{ID: acked.ID, Topic: other, State: core.StateDone, Attempt: 1},
		{ID: expired.ID, Topic: topic, State: core.StateDead, Attempt: 1, LastError: core.LeaseExpired},
	}
	second := &finishedReader{store: b.open(t)}
	var read []finishedEntry
	for _, f := range second.readAll(t, ctx, 1) {
		read = append(read, entryOf(f))
	}
	if b.h.FinishedSuperseded {
		// The finishes that a later change of their job took away: the
		// bury (requeued) and the first ack of the reused id.
		all = []finishedEntry{all[1], all[3], all[4], all[5]}
	}
	if b.h.FinishedPerShard {
		require.ElementsMatch(t, all, read, "the record read from the start")
		requireJobOrder(t, all, read)
	} else {
		require.Equal(t, all, read, "the record read from the start")
	}
	require.Equal(t, r.cursor, second.cursor, "two readers at the end of the record")

	// A cursor outlives a restart: reopened, the record goes on from it,
	// with the key of a job put before.
	if b.h.Durable {
		last := keyed(topic, "k2", time.Now())
		b.put(t, last)
		require.NoError(t, b.store.Close())
		require.NoError(t, second.store.Close())
		b.store = b.open(t)
		r.store = b.store
		require.Empty(t, r.readAll(t, ctx, 10), "entries after the cursor once reopened")
		c = b.claimOne(t, topic, reopenWait)
		require.NoError(t, ack(b, c))
		r.expectFinished(t, ctx, soon(), finishedEntry{ID: last.ID, Topic: topic, Key: "k2", State: core.StateDone, Attempt: 1})
	}
}

// ackAll claims and acknowledges jobs of topic on s until acked, which it
// adds to, reaches n; it gives up after 30 s.
func ackAll(ctx context.Context, s core.Store, topic string, n int64, acked *atomic.Int64) error {
	deadline := time.Now().Add(30 * time.Second)
	for acked.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs acknowledged in 30 s", acked.Load(), n)
		}
		got, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic, Max: 10, Wait: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		if len(got) == 0 {
			continue
		}
		acks := &core.AckJobsParams{}
		for _, j := range got {
			acks.Acks = append(acks.Acks, core.AckJobParams{ID: j.ID, Lease: j.Lease})
		}
		res, err := s.AckJobs(ctx, acks)
		if err != nil {
			return err
		}
		for _, a := range res {
			if a.Err != nil {
				return a.Err
			}
		}
		acked.Add(int64(len(res)))
	}
	return nil
}

// requireJobOrder requires that each job's entries come in got in the
// order they have in want.
func requireJobOrder(t *testing.T, want, got []finishedEntry) {
	t.Helper()
	byJob := func(es []finishedEntry) map[string][]finishedEntry {
		m := map[string][]finishedEntry{}
		for _, e := range es {
			m[e.ID] = append(m[e.ID], e)
		}
		return m
	}
	require.Equal(t, byJob(want), byJob(got), "each job's finishes in order")
}

// testFinishedConcurrent: finishes made by two instances at once are each
// recorded once, and a reader that follows the record while they happen
// meets each once.
func testFinishedConcurrent(t *testing.T, b *testBundle) {
	const topic, n = "fin.conc", 200
	ctx := b.ctx
	other := b.open(t)
	jobs := make([]*core.Job, n)
	for i := range jobs {
		jobs[i] = DueJob(topic)
	}
	b.put(t, jobs...)
	r := &finishedReader{store: b.store}
	seen := map[string]int{}
	read := func() {
		for _, f := range r.readAll(t, ctx, 7) {
			require.Equal(t, core.StateDone, f.State)
			seen[f.ID]++
		}
	}
	// Two instances claim and acknowledge until every job is done, while
	// the reader follows.
	var acked atomic.Int64
	errs := make(chan error, 2)
	for _, s := range []core.Store{b.store, other} {
		go func() {
			errs <- ackAll(ctx, s, topic, n, &acked)
		}()
	}
	for running := 2; running > 0; {
		select {
		case err := <-errs:
			require.NoError(t, err)
			running--
		case <-time.After(20 * time.Millisecond):
			read()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		read()
	}
	require.Len(t, seen, n, "jobs recorded as finished")
	for id, k := range seen {
		require.Equal(t, 1, k, "job %s recorded %d times", id, k)
	}
}

// eventuallyFinished requires the store's record of finished jobs to hold
// want entries by deadline, read every 50 ms: entries past the retention
// are dropped.
func (b *testBundle) eventuallyFinished(t *testing.T, want int, deadline time.Time) {
	t.Helper()
	for {
		r := &finishedReader{store: b.store}
		got := r.readAll(t, b.ctx, core.FinishedLimitMax)
		if len(got) == want {
			return
		}
		if time.Now().After(deadline) {
			require.Len(t, got, want, "entries of the record of finished jobs past %s", deadline.Format(time.RFC3339Nano))
		}
		select {
		case <-b.ctx.Done():
			require.FailNow(t, "context done")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
