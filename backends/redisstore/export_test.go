package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// servers runs f on the shared standalone server and on the shared cluster.
func servers(t *testing.T, f func(t *testing.T, url string)) {
	t.Run("standalone", func(t *testing.T) { t.Parallel(); f(t, standaloneURL(t)) })
	t.Run("cluster", func(t *testing.T) { t.Parallel(); f(t, clusterURL(t)) })
}

func exportAll(t *testing.T, s *Store) map[string]*core.Job {
	t.Helper()
	got := map[string]*core.Job{}
	require.NoError(t, s.ExportJobs(context.Background(), func(j *core.Job) error {
		if got[j.ID] != nil {
			return fmt.Errorf("job %s exported twice", j.ID)
		}
		got[j.ID] = j
		return nil
	}))
	return got
}

func TestExportImportStates(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a := openStore(t, url, uniquePrefix(t.Name()+"-a"))
		sched := job("orders", time.Hour)
		sched.Key = "k1"
		sched.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		ready := job("orders", -time.Second)
		ready.Body = []byte(fmt.Sprintf(`{"long":"%0100d"}`, 7)) // kept apart from the hash
		put(t, a, sched, ready)
		res := job("mail", -time.Second)
		dead := job("mail", -2*time.Second)
		done := job("mail", -3*time.Second)
		put(t, a, res, dead, done)
		claimed := claim(t, a, "mail", 3, time.Second)
		require.Len(t, claimed, 3)
		lease := map[string]string{}
		for _, j := range claimed {
			lease[j.ID] = j.Lease
		}
		require.NoError(t, settleErr(a.BuryJob(ctx, &core.BuryJobParams{ID: dead.ID, Lease: lease[dead.ID], Error: "boom"})))
		require.NoError(t, settleErr(a.AckJob(ctx, &core.AckJobParams{ID: done.ID, Lease: lease[done.ID]})))

		got := exportAll(t, a)
		require.Len(t, got, 4)
		require.Equal(t, core.StateScheduled, got[sched.ID].State)
		require.Equal(t, "k1", got[sched.ID].Key)
		require.Equal(t, sched.TraceParent, got[sched.ID].TraceParent)
		require.Equal(t, core.StateReady, got[ready.ID].State)
		require.Equal(t, string(ready.Body), string(got[ready.ID].Body))
		require.Equal(t, core.StateReserved, got[res.ID].State)
		require.Equal(t, 1, got[res.ID].Attempt)
		require.NotEmpty(t, got[res.ID].Lease)
		require.Equal(t, core.StateDead, got[dead.ID].State)
		require.Equal(t, "boom", got[dead.ID].LastError)
		require.NotContains(t, got, done.ID)

		b := openStore(t, url, uniquePrefix(t.Name()+"-b"))
		jobs := []*core.Job{got[sched.ID], got[ready.ID], got[res.ID], got[dead.ID]}
		for _, j := range jobs {
			j.Lease, j.LeaseExpiresAt = "", time.Time{} // as core.Engine.Import does
		}
		ok, err := b.ImportJobs(ctx, jobs)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, true, true}, ok)
		ok, err = b.ImportJobs(ctx, jobs)
		require.NoError(t, err)
		require.Equal(t, []bool{false, false, false, false}, ok, "importing twice changes nothing")

		for _, want := range jobs {
			j, err := b.GetJob(ctx, want.ID)
			require.NoError(t, err)
			state := want.State
			if state == core.StateReserved {
				state = core.StateReady
			}
			require.Equal(t, state, j.State, want.ID)
			require.Equal(t, want.Attempt, j.Attempt)
			require.Equal(t, want.LastError, j.LastError)
			require.Equal(t, want.CreatedAt, j.CreatedAt)
			require.Equal(t, want.RunAt, j.RunAt, "run_at kept, reserved jobs' too")
			require.Equal(t, string(want.Body), string(j.Body))
			require.Equal(t, want.Key, j.Key)
			require.Equal(t, want.TraceParent, j.TraceParent)
			require.Empty(t, j.Lease)
			require.True(t, j.LeaseExpiresAt.IsZero())
		}
		orders, err := b.GetTopicState(ctx, "orders")
		require.NoError(t, err)
		require.Equal(t, core.Counts{Scheduled: 1, Ready: 1}, orders.Counts)
		mail, err := b.GetTopicState(ctx, "mail")
		require.NoError(t, err)
		require.Equal(t, core.Counts{Ready: 1, Dead: 1}, mail.Counts)
		deadJobs, err := b.ListDeadJobs(ctx, &core.ListDeadJobsParams{Topic: "mail", Limit: 10})
		require.NoError(t, err)
		require.Len(t, deadJobs, 1)
		require.Equal(t, dead.ID, deadJobs[0].ID)
		require.Equal(t, got[dead.ID].UpdatedAt, deadJobs[0].UpdatedAt)

		// The imported reserved job is handed out at once, its attempt kept.
		again := claim(t, b, "mail", 5, time.Second)
		require.Len(t, again, 1)
		require.Equal(t, res.ID, again[0].ID)
		require.Equal(t, 2, again[0].Attempt)
		require.NoError(t, b.RequeueJob(ctx, dead.ID))

		// The export of the import is the same jobs.
		back := exportAll(t, b)
		require.Len(t, back, 4)

		// Ids the first store knows, finished ones included, are skipped.
		ok, err = a.ImportJobs(ctx, []*core.Job{got[sched.ID], done, got[dead.ID]})
		require.NoError(t, err)
		require.Equal(t, []bool{false, false, false}, ok)
		after, err := a.GetTopicState(ctx, "mail")
		require.NoError(t, err)
		require.Equal(t, core.Counts{Reserved: 1, Done: 1, Dead: 1}, after.Counts)
	})
}

func TestImportDuplicateInBatch(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, url string) {
		s := openStore(t, url, uniquePrefix(t.Name()))
		j := job("dup", time.Hour)
		other := *j
		other.State = core.StateDead
		ok, err := s.ImportJobs(context.Background(), []*core.Job{j, &other})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, ok)
		tp, err := s.GetTopicState(context.Background(), "dup")
		require.NoError(t, err)
		require.Equal(t, core.Counts{Scheduled: 1}, tp.Counts)
	})
}

func TestImportWakesClaims(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, url string) {
		prefix := uniquePrefix(t.Name())
		a := openStore(t, url, prefix)
		b := openStore(t, url, prefix)
		soon := job("wake", 300*time.Millisecond)
		got := make(chan []*core.Job, 1)
		go func() {
			jobs, _ := b.ClaimJobs(context.Background(), &core.ClaimJobsParams{Topic: "wake", Max: 1, Wait: 5 * time.Second})
			got <- jobs
		}()
		time.Sleep(50 * time.Millisecond)
		ok, err := a.ImportJobs(context.Background(), []*core.Job{soon})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, ok)
		jobs := <-got
		require.Len(t, jobs, 1)
		require.Equal(t, soon.ID, jobs[0].ID)
	})
}

func TestExportPagesAndStops(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, url string) {
		ctx := context.Background()
		s := openStore(t, url, uniquePrefix(t.Name()), func(c *Config) { c.Shards = 2 })
		runAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
		var jobs []*core.Job
		for range 3*exportPage + 7 {
			j := job("pages", 0)
			j.RunAt = runAt // every job ties on its score
			jobs = append(jobs, j)
		}
		put(t, s, jobs...)
		require.Len(t, exportAll(t, s), len(jobs))

		// Cancelling each job as it is seen moves the cursor's member out
		// of its set: the walk still sees every other job once.
		seen := map[string]bool{}
		require.NoError(t, s.ExportJobs(ctx, func(j *core.Job) error {
			require.False(t, seen[j.ID], "exported twice")
			seen[j.ID] = true
			return s.CancelJob(ctx, &core.CancelJobParams{ID: j.ID})
		}))
		require.Len(t, seen, len(jobs))
		require.Empty(t, exportAll(t, s))

		put(t, s, job("pages", time.Hour), job("pages", time.Hour))
		stop := errors.New("stop")
		calls := 0
		err := s.ExportJobs(ctx, func(*core.Job) error { calls++; return stop })
		require.ErrorIs(t, err, stop)
		require.Equal(t, 1, calls)
	})
}

// TestImportSpeed imports 10 000 jobs in batches of 1 000 and logs the time.
func TestImportSpeed(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, url string) {
		s := openStore(t, url, uniquePrefix(t.Name()))
		states := []core.State{core.StateScheduled, core.StateReady, core.StateReserved, core.StateDead}
		jobs := make([]*core.Job, 10_000)
		for i := range jobs {
			j := job(fmt.Sprintf("speed%d", i%4), time.Duration(i%3-1)*time.Hour)
			j.State = states[i%4]
			j.Attempt = 1
			j.LastError = "earlier"
			j.CreatedAt = j.RunAt.Add(-time.Hour)
			jobs[i] = j
		}
		start := time.Now()
		for i := 0; i < len(jobs); i += 1000 {
			ok, err := s.ImportJobs(context.Background(), jobs[i:i+1000])
			require.NoError(t, err)
			for _, v := range ok {
				require.True(t, v)
			}
		}
		t.Logf("imported %d jobs in %v", len(jobs), time.Since(start))
		require.Len(t, exportAll(t, s), len(jobs))
	})
}
