package natsstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// exportAll exports a store's jobs by id, failing on a job passed twice.
func exportAll(t *testing.T, s *Store) map[string]*core.Job {
	t.Helper()
	got := make(map[string]*core.Job)
	require.NoError(t, s.ExportJobs(context.Background(), func(j *core.Job) error {
		if _, dup := got[j.ID]; dup {
			t.Errorf("job %s passed twice", j.ID)
		}
		got[j.ID] = j
		return nil
	}))
	return got
}

// fiveStates puts one job of each state in topic "x": scheduled, ready,
// reserved (attempt 1), dead (attempt 1, "boom") and done.
func fiveStates(t *testing.T, s *Store) (sched, ready, reserved, dead, done *core.Job, lease string) {
	t.Helper()
	ctx := context.Background()
	dead, done = job("x", 0), job("x", 0)
	put(t, s, dead, done)
	got := claim(t, s, "x", 2, 5*time.Second)
	if len(got) < 2 {
		got = append(got, claim(t, s, "x", 1, 5*time.Second)...)
	}
	require.Len(t, got, 2)
	for _, j := range got {
		if j.ID == dead.ID {
			require.NoError(t, settleErr(s.BuryJob(ctx, &core.BuryJobParams{ID: j.ID, Lease: j.Lease, Error: "boom"})))
		} else {
			require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})))
		}
	}
	reserved = job("x", 0)
	put(t, s, reserved)
	got = claim(t, s, "x", 1, 5*time.Second)
	require.Len(t, got, 1)
	require.Equal(t, reserved.ID, got[0].ID)
	sched, ready = job("x", time.Hour), job("x", -time.Minute)
	put(t, s, sched, ready)
	return sched, ready, reserved, dead, done, got[0].Lease
}

func TestExportImportKeepsStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := setup(t)
	sched, ready, reserved, dead, done, lease := fiveStates(t, src.store)

	out := exportAll(t, src.store)
	require.Len(t, out, 4)
	require.NotContains(t, out, done.ID)
	require.Equal(t, core.StateScheduled, out[sched.ID].State)
	require.Equal(t, core.StateReady, out[ready.ID].State)
	require.Equal(t, core.StateReserved, out[reserved.ID].State)
	require.Equal(t, lease, out[reserved.ID].Lease)
	require.Equal(t, core.StateDead, out[dead.ID].State)
	require.Equal(t, "boom", out[dead.ID].LastError)
	require.JSONEq(t, `{"n":1}`, string(out[sched.ID].Body))

	dst := setup(t)
	jobs := []*core.Job{out[sched.ID], out[ready.ID], out[reserved.ID], out[dead.ID]}
	res, err := dst.store.ImportJobs(ctx, jobs)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true}, res)

	for _, want := range jobs {
		got, err := dst.store.GetJob(ctx, want.ID)
		require.NoError(t, err)
		require.Equal(t, want.Topic, got.Topic)
		require.Equal(t, want.Attempt, got.Attempt, want.ID)
		require.Equal(t, want.LastError, got.LastError)
		require.True(t, want.CreatedAt.Equal(got.CreatedAt), "created_at %s, want %s", got.CreatedAt, want.CreatedAt)
		require.Empty(t, got.Lease)
		require.True(t, got.LeaseExpiresAt.IsZero())
		require.JSONEq(t, string(want.Body), string(got.Body))
		switch want.ID {
		case sched.ID:
			require.Equal(t, core.StateScheduled, got.State)
			require.True(t, want.RunAt.Equal(got.RunAt))
		case ready.ID:
			require.Equal(t, core.StateReady, got.State)
			require.True(t, want.RunAt.Equal(got.RunAt))
		case reserved.ID:
			require.Equal(t, core.StateReady, got.State)
			require.Equal(t, 1, got.Attempt)
		case dead.ID:
			require.Equal(t, core.StateDead, got.State)
			require.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "time of death kept")
		}
	}
	deadJobs, err := dst.store.ListDeadJobs(ctx, &core.ListDeadJobsParams{Topic: "x", Limit: 10})
	require.NoError(t, err)
	require.Len(t, deadJobs, 1)
	require.Equal(t, dead.ID, deadJobs[0].ID)
	require.Eventually(t, func() bool {
		tp, err := dst.store.GetTopicState(ctx, "x")
		return err == nil && tp.Counts == core.Counts{Scheduled: 1, Ready: 2, Dead: 1}
	}, 5*time.Second, 10*time.Millisecond)
	topics, err := dst.store.ListTopicStates(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 1)

	// The imported ready and once-reserved jobs are claimable at once.
	claimed := claim(t, dst.store, "x", 10, 5*time.Second)
	ids := map[string]int{}
	for _, j := range claimed {
		ids[j.ID] = j.Attempt
	}
	require.Equal(t, map[string]int{ready.ID: 1, reserved.ID: 2}, ids)

	// The dead job requeues.
	require.NoError(t, dst.store.RequeueJob(ctx, dead.ID))
	claimed = claim(t, dst.store, "x", 10, 5*time.Second)
	require.Len(t, claimed, 1)
	require.Equal(t, dead.ID, claimed[0].ID)
}

func TestImportSkipsExisting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	sched, ready, reserved, dead, done, lease := fiveStates(t, b.store)
	before := exportAll(t, b.store)

	// The same ids, of whatever state, into the store that has them: the
	// done one within retention included.
	again := []*core.Job{job("x", 0), job("x", 2*time.Hour), job("y", 0), job("x", 0), job("x", 0)}
	for i, id := range []string{sched.ID, ready.ID, reserved.ID, dead.ID, done.ID} {
		again[i].ID = id
		again[i].State = core.StateReady
	}
	again[1].State = core.StateScheduled
	again[3].State = core.StateDead
	fresh := job("x", 0)
	fresh.State = core.StateReady
	again = append(again, fresh)
	res, err := b.store.ImportJobs(ctx, again)
	require.NoError(t, err)
	require.Equal(t, []bool{false, false, false, false, false, true}, res)

	after := exportAll(t, b.store)
	require.Len(t, after, 5)
	for id, want := range before {
		got := after[id]
		require.NotNil(t, got, id)
		require.Equal(t, want.State, got.State, id)
		require.Equal(t, want.Topic, got.Topic, id)
		require.True(t, want.RunAt.Equal(got.RunAt), id)
		require.Equal(t, want.Lease, got.Lease, id)
	}
	got, err := b.store.GetJob(ctx, done.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDone, got.State)

	// The jobs' wake-ups are as they were: counts settle on the same
	// numbers, the lease still holds, the ready jobs are claimable and
	// the scheduled one is not.
	require.Eventually(t, func() bool {
		n, err := b.store.counts(ctx, "x")
		return err == nil && n == core.Counts{Scheduled: 1, Ready: 2, Reserved: 1, Dead: 1, Done: 1}
	}, 5*time.Second, 10*time.Millisecond)
	n, err := b.store.counts(ctx, "y")
	require.NoError(t, err)
	require.Equal(t, core.Counts{}, n)
	require.NoError(t, settleErr(b.store.AckJob(ctx, &core.AckJobParams{ID: reserved.ID, Lease: lease})))
	claimed := claim(t, b.store, "x", 10, 3*time.Second)
	ids := map[string]bool{}
	for _, j := range claimed {
		ids[j.ID] = true
	}
	require.Equal(t, map[string]bool{ready.ID: true, fresh.ID: true}, ids)
}

func TestImportTwiceChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := setup(t)
	sched, ready, reserved, dead, _, _ := fiveStates(t, src.store)
	out := exportAll(t, src.store)
	jobs := []*core.Job{out[sched.ID], out[ready.ID], out[reserved.ID], out[dead.ID]}

	dst := setup(t)
	res, err := dst.store.ImportJobs(ctx, jobs)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true}, res)
	first := exportAll(t, dst.store)
	res, err = dst.store.ImportJobs(ctx, jobs)
	require.NoError(t, err)
	require.Equal(t, []bool{false, false, false, false}, res)
	second := exportAll(t, dst.store)
	require.Equal(t, first, second)
	require.Eventually(t, func() bool {
		n, err := dst.store.counts(ctx, "x")
		return err == nil && n == core.Counts{Scheduled: 1, Ready: 2, Dead: 1}
	}, 5*time.Second, 10*time.Millisecond)
}

func TestExportStopsAtError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		put(t, b.store, job("x", time.Hour))
	}
	stop := errors.New("stop")
	calls := 0
	err := b.store.ExportJobs(context.Background(), func(*core.Job) error {
		calls++
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, calls)

	empty := setup(t)
	require.Empty(t, exportAll(t, empty.store))
}

func TestImportRefusesFinishedState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := job("x", 0)
	j.State = core.StateDone
	_, err := b.store.ImportJobs(context.Background(), []*core.Job{j})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = b.store.GetJob(context.Background(), j.ID)
	require.ErrorIs(t, err, core.ErrNotFound)
}

// TestExportImportMany moves 10 000 jobs, across batches of both, and
// reports how long each took.
func TestExportImportMany(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("short")
	}
	ctx := context.Background()
	const n = 10000
	jobs := make([]*core.Job, n)
	for i := range jobs {
		jobs[i] = job("bulk", time.Hour+time.Duration(i)*time.Millisecond)
		jobs[i].State = core.StateScheduled
		jobs[i].CreatedAt = time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
		if i%10 == 0 {
			jobs[i].State, jobs[i].Attempt, jobs[i].LastError = core.StateDead, 3, "gone"
			jobs[i].UpdatedAt = time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
		}
	}
	src := setup(t)
	start := time.Now()
	res, err := src.store.ImportJobs(ctx, jobs)
	took := time.Since(start)
	require.NoError(t, err)
	for i, ok := range res {
		require.True(t, ok, "job %d", i)
	}
	t.Logf("import of %d jobs: %s (%.0f jobs/s)", n, took, n/took.Seconds())
	require.Less(t, took, 20*time.Second)

	start = time.Now()
	out := exportAll(t, src.store)
	t.Logf("export of %d jobs: %s", n, time.Since(start))
	require.Len(t, out, n)
	for _, j := range jobs {
		got := out[j.ID]
		require.NotNil(t, got)
		require.Equal(t, j.State, got.State)
		require.Equal(t, j.Attempt, got.Attempt)
		require.True(t, j.CreatedAt.Equal(got.CreatedAt))
	}

	start = time.Now()
	res, err = src.store.ImportJobs(ctx, jobs)
	t.Logf("import of the same %d jobs again: %s", n, time.Since(start))
	require.NoError(t, err)
	for i, ok := range res {
		require.False(t, ok, "job %d", i)
	}
	require.Eventually(t, func() bool {
		c, err := src.store.counts(ctx, "bulk")
		return err == nil && c == core.Counts{Scheduled: n - n/10, Dead: n / 10}
	}, 10*time.Second, 50*time.Millisecond)
}
