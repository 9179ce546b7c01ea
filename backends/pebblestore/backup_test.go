package pebblestore_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/core/storetest"
)

// TestCheckpoint takes a checkpoint of a store that holds jobs in every
// state while a writer keeps putting jobs, opens the checkpoint with Open
// while the store still runs, and requires it to hold what the store held:
// the same jobs in the same states (the reserved one with its lease), the
// topic configurations and counts, and every job answered before the call.
func TestCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := coretest.NewFakeClockAt(time.Now())
	dir := t.TempDir()
	s, err := pebblestore.Open(pebblestore.Config{Dir: filepath.Join(dir, "local"), Clock: clock})
	require.NoError(t, err)
	defer s.Close()

	topic := &core.PutRecordParams{Kind: core.KindTopic, Name: "ck.dead", Value: []byte(`{"max_attempts":1,"ttr":60000000000}`)}
	_, err = s.PutRecord(ctx, topic)
	require.NoError(t, err)
	now := clock.Now()
	job := func(topic string, runAt time.Time) *core.Job {
		j := storetest.NewJob(topic, runAt)
		j.Key = "key-" + topic
		j.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		return j
	}
	var (
		scheduled = job("ck.scheduled", now.Add(time.Hour))
		ready     = job("ck.ready", now.Add(-time.Second))
		reserved  = job("ck.reserved", now.Add(-time.Second))
		done      = job("ck.done", now.Add(-time.Second))
		dead      = job("ck.dead", now.Add(-time.Second))
		retried   = job("ck.retried", now.Add(-time.Second))
		cancelled = job("ck.cancelled", now.Add(time.Hour))
	)
	dead.MaxAttempts = 1
	storetest.Put(t, ctx, s, scheduled, ready, reserved, done, dead, retried, cancelled)
	claim := func(topic string) *core.Job {
		jobs := storetest.Claim(t, ctx, s, topic, 1, 0)
		require.Len(t, jobs, 1, topic)
		return jobs[0]
	}
	held := claim("ck.reserved")
	d := claim("ck.done")
	_, err = s.AckJob(ctx, &core.AckJobParams{ID: d.ID, Lease: d.Lease})
	require.NoError(t, err)
	d = claim("ck.dead")
	_, err = s.BuryJob(ctx, &core.BuryJobParams{ID: d.ID, Lease: d.Lease, Error: "boom"})
	require.NoError(t, err)
	d = claim("ck.retried")
	_, err = s.RetryJob(ctx, &core.RetryJobParams{ID: d.ID, Lease: d.Lease, RunAt: now.Add(time.Minute), Error: "try later"})
	require.NoError(t, err)
	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: cancelled.ID}))
	fixed := []*core.Job{scheduled, ready, reserved, done, dead, retried, cancelled}
	want := map[string]*core.Job{}
	for _, j := range fixed {
		got, err := s.GetJob(ctx, j.ID)
		require.NoError(t, err)
		want[j.ID] = got
	}
	require.Equal(t, core.StateReserved, want[reserved.ID].State)
	require.Equal(t, core.StateDone, want[done.ID].State)
	require.Equal(t, core.StateDead, want[dead.ID].State)
	require.Equal(t, core.StateScheduled, want[retried.ID].State)
	require.Equal(t, core.StateCancelled, want[cancelled.ID].State)
	wantTopics, err := s.ListTopicStates(ctx)
	require.NoError(t, err)

	// A writer puts jobs before, during and after the checkpoint.
	var (
		mu       sync.Mutex
		answered []string
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			jobs := []*core.Job{storetest.NewJob("ck.more", now.Add(time.Hour)), storetest.NewJob("ck.more", now.Add(time.Hour))}
			res, err := s.PutJobs(context.Background(), &core.PutJobsParams{Jobs: jobs})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for i, r := range res {
				if r.Err == nil {
					answered = append(answered, jobs[i].ID)
				}
			}
			mu.Unlock()
		}
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answered) >= 100
	}, 10*time.Second, time.Millisecond)
	mu.Lock()
	before := append([]string(nil), answered...)
	mu.Unlock()
	ck := filepath.Join(dir, "checkpoint")
	require.NoError(t, s.Checkpoint(ctx, ck))
	close(stop)
	wg.Wait()
	info, err := os.Stat(ck)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	// The store goes on serving, and the checkpoint opens beside it.
	storetest.Put(t, ctx, s, storetest.NewJob("ck.after", now))
	c, err := pebblestore.Open(pebblestore.Config{Dir: ck, Clock: clock})
	require.NoError(t, err)
	defer c.Close()
	for id, w := range want {
		got, err := c.GetJob(ctx, id)
		require.NoError(t, err, id)
		require.Equal(t, w, got, "job %s (%s)", id, w.Topic)
	}
	for _, id := range before {
		got, err := c.GetJob(ctx, id)
		require.NoError(t, err, "job %s answered before the checkpoint is missing from it", id)
		require.Equal(t, core.StateScheduled, got.State)
	}
	gotTopic, err := c.GetRecord(ctx, core.KindTopic, "ck.dead")
	require.NoError(t, err, "the topic's configuration record is in the checkpoint")
	require.Equal(t, topic.Value, gotTopic.Value)
	gotTopics, err := c.ListTopicStates(ctx)
	require.NoError(t, err)
	counts := map[string]core.Counts{}
	for _, tp := range gotTopics {
		counts[tp.Name] = tp.Counts
	}
	for _, tp := range wantTopics {
		require.Equal(t, tp.Counts, counts[tp.Name], "counts of %s", tp.Name)
	}
	_, err = c.GetJob(ctx, "no-such-job")
	require.ErrorIs(t, err, core.ErrNotFound)

	// The reserved job kept its lease: its delivery may still be acked.
	_, err = c.AckJob(ctx, &core.AckJobParams{ID: held.ID, Lease: held.Lease})
	require.NoError(t, err)
	got, err := s.GetJob(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, got.State, "the checkpoint is a copy: the store did not change")
	require.Empty(t, storetest.Claim(t, ctx, c, "ck.after", 1, 0), "a job put after the checkpoint is not in it")
}

// TestCheckpointErrors: a directory that exists is refused and left as it
// was, a cancelled ctx stops the checkpoint before it begins, and a closed
// store answers core.ErrClosed.
func TestCheckpointErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := pebblestore.Open(pebblestore.Config{Dir: filepath.Join(dir, "local")})
	require.NoError(t, err)
	storetest.Put(t, t.Context(), s, storetest.DueJob("ck"))

	existing := filepath.Join(dir, "existing")
	require.NoError(t, os.Mkdir(existing, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(existing, "keep"), []byte("x"), 0o600))
	require.ErrorIs(t, s.Checkpoint(t.Context(), existing), fs.ErrExist)
	entries, err := os.ReadDir(existing)
	require.NoError(t, err)
	require.Len(t, entries, 1)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, s.Checkpoint(ctx, filepath.Join(dir, "cancelled")), context.Canceled)
	require.NoDirExists(t, filepath.Join(dir, "cancelled"))

	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Checkpoint(t.Context(), filepath.Join(dir, "closed")), core.ErrClosed)
	require.NoDirExists(t, filepath.Join(dir, "closed"))
}
