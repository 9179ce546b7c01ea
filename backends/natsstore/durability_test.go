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
	nc, err := nats.Connect(srv.url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
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
	srv.kill() // SIGKILL, mid-stream
	wg.Wait()
	require.NoError(t, s.Close())

	srv2 := startExternal(t, dir, srv.port)
	defer srv2.kill()
	nc2 := connectURL(t, srv2.url)
	s2 := openStore(t, nc2, prefix)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d jobs answered before the kill", len(answered))
	for _, id := range answered {
		j, err := s2.GetJob(context.Background(), id)
		require.NoError(t, err, "answered job %s lost", id)
		require.Equal(t, core.StateScheduled, j.State)
	}
	tp, err := s2.GetTopic(context.Background(), "kill")
	require.NoError(t, err)
	require.GreaterOrEqual(t, tp.Counts.Scheduled, int64(len(answered)), "wake-ups lost")
}
