package natsstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestKill9KeepsAnsweredJobs kills a separate nats-server process with
// SIGKILL while jobs are being put, restarts it on the same store directory,
// and requires every job whose PutJobs was answered to be there with its
// wake-up. A kill is not a power cut: written data is in the page cache,
// which the kernel keeps.
func TestKill9KeepsAnsweredJobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startExternal(t, dir, 0)
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	defer nc.Close()
	prefix := uniquePrefix()
	s, err := New(context.Background(), Config{Conn: nc, Prefix: prefix})
	require.NoError(t, err)

	var (
		mu       sync.Mutex
		answered []string
		batches  = make(chan struct{}, 1000)
		wg       sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				jobs := make([]*core.Job, 50)
				for i := range jobs {
					jobs[i] = job("kill", time.Hour)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: jobs})
				cancel()
				if err != nil {
					return
				}
				mu.Lock()
				for i, r := range res {
					if r.Err == nil {
						answered = append(answered, jobs[i].ID)
					}
				}
				mu.Unlock()
				batches <- struct{}{}
			}
		})
	}
	for range 40 {
		<-batches
	}
	srv.Kill() // SIGKILL, mid-stream
	wg.Wait()
	require.NoError(t, s.Close())

	srv2 := srv.Restart(t)
	defer srv2.Kill()
	nc2 := connectURL(t, srv2.URL())
	s2 := openStore(t, nc2, prefix)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d jobs answered before the kill", len(answered))
	for _, id := range answered {
		j, err := s2.GetJob(context.Background(), id)
		require.NoError(t, err, "answered job %s lost", id)
		require.Equal(t, core.StateScheduled, j.State)
	}
	tp, err := s2.GetTopicState(context.Background(), "kill")
	require.NoError(t, err)
	require.GreaterOrEqual(t, tp.Counts.Scheduled, int64(len(answered)), "wake-ups lost")
}

// TestKill9DeliversHeldJobs kills a separate nats-server process with
// SIGKILL while a fetcher holds due jobs nobody claimed yet and jobs come
// due around them, restarts it on the same store directory with a new
// store, and requires every job to be delivered, those held before the kill
// within about AckWait.
//
// With nats-server 2.15 a purge of a subject inside a consumer's filter
// (which the server does when it stores a schedule and when a schedule
// fires) could move the consumer's ack floor past messages still pending:
// the consumer then took them for acknowledged and never delivered them
// again. The topic's consumer used to filter on the soon schedules too;
// this lost the held due jobs after the restart.
func TestKill9DeliversHeldJobs(t *testing.T) {
	t.Parallel()
	const (
		topic   = "held"
		due     = 300 // due at once
		later   = 600 // due over the next 2s
		claimed = 100
		ackWait = 2 * time.Second
	)
	dir := t.TempDir()
	srv := startExternal(t, dir, 0)
	nc, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	prefix := uniquePrefix()
	withAckWait := func(c *Config) { c.AckWait = ackWait }
	ctx := context.Background()
	s, err := New(ctx, Config{Conn: nc, Prefix: prefix, AckWait: ackWait})
	require.NoError(t, err)

	now := time.Now()
	var jobs []*core.Job
	for i := range due + later {
		j := job(topic, 0)
		j.RunAt = now.Add(-500 * time.Millisecond * time.Duration(due-i) / due).UTC().Truncate(time.Millisecond)
		if i >= due {
			j.RunAt = now.Add(2 * time.Second * time.Duration(i-due) / later).UTC().Truncate(time.Millisecond)
		}
		j.TTR = time.Second
		jobs = append(jobs, j)
	}
	put(t, s, jobs...)
	for n := 0; n < claimed; {
		n += len(claim(t, s, topic, claimed-n, 5*time.Second))
	}
	// The fetcher keeps fetching for idleRelease after the last claim: it
	// holds the due jobs left and gets the later ones as they come due.
	time.Sleep(1500 * time.Millisecond)
	srv.Kill()
	nc.Close()
	require.NoError(t, s.Close())

	srv2 := srv.Restart(t)
	t.Cleanup(srv2.Kill) // after the store's Close
	s2 := openStore(t, connectURL(t, srv2.URL()), prefix, withAckWait)
	restarted := time.Now()
	acked := map[string]bool{}
	for len(acked) < len(jobs) && time.Since(restarted) < 5*ackWait+10*time.Second {
		for _, j := range claim(t, s2, topic, 100, time.Second) {
			if settleErr(s2.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})) == nil {
				acked[j.ID] = true
			}
		}
	}
	var missing []string
	for _, j := range jobs {
		if !acked[j.ID] {
			missing = append(missing, j.ID)
		}
	}
	if len(missing) > 0 {
		tp, err := s2.GetTopicState(ctx, topic)
		require.NoError(t, err)
		got, err := s2.GetJob(ctx, missing[0])
		require.NoError(t, err)
		t.Logf("counts %+v; first missing job: %+v", tp.Counts, got)
	}
	require.Empty(t, missing, "%d of %d jobs never delivered after the restart", len(missing), len(jobs))
	t.Logf("all %d delivered %s after the restart", len(jobs), time.Since(restarted))
}

// TestCloseWithServerGone: Close returns promptly when the server is gone
// while a fetcher and the housekeeping pull, instead of waiting out
// nats.go's drain flush (10s each).
func TestCloseWithServerGone(t *testing.T) {
	t.Parallel()
	srv := startExternal(t, t.TempDir(), 0)
	nc := connectURL(t, srv.URL())
	s, err := New(context.Background(), Config{Conn: nc, Prefix: uniquePrefix()})
	require.NoError(t, err)
	put(t, s, job("gone", 0), job("gone", 0))
	require.Len(t, claim(t, s, "gone", 1, 5*time.Second), 1) // the fetcher holds the other
	srv.Kill()
	start := time.Now()
	require.NoError(t, s.Close())
	require.Less(t, time.Since(start), 5*time.Second, "Close took %s", time.Since(start))
}
