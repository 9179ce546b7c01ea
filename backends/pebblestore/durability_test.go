package pebblestore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// childDirEnv, when set, makes the test binary the child of
// TestKill9KeepsAnsweredWrites: it writes to the store in that directory
// and reports each answered write on stdout until it is killed.
const childDirEnv = "PEBBLESTORE_KILL_CHILD_DIR"

func TestKill9Child(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("run by TestKill9KeepsAnsweredWrites")
	}
	s, err := pebblestore.Open(pebblestore.Config{Dir: dir})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	for n := 0; ; n++ {
		jobs := make([]*core.Job, 50)
		for i := range jobs {
			jobs[i] = storetest.NewJob("kill", time.Now().Add(time.Hour))
		}
		res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: jobs})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for i, r := range res {
			if r.Err == nil {
				fmt.Fprintln(out, "put", jobs[i].ID)
			}
		}
		// Cancel one job of each batch, and say so once answered.
		if err := s.CancelJob(ctx, &core.CancelJobParams{ID: jobs[n%len(jobs)].ID}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Fprintln(out, "cancel", jobs[n%len(jobs)].ID)
		_ = out.Flush()
	}
}

// TestKill9KeepsAnsweredWrites kills a process with SIGKILL while it puts
// and cancels jobs, opens its directory again, and requires every create
// and cancel it had answered to be there. A kill is not a power cut: what
// reached the kernel stays in its page cache.
func TestKill9KeepsAnsweredWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())

	put, cancelled := map[string]bool{}, map[string]bool{}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && len(put) < 5000 {
		kind, id, _ := strings.Cut(lines.Text(), " ")
		switch kind {
		case "put":
			put[id] = true
		case "cancel":
			cancelled[id] = true
		default:
			t.Fatalf("child: %s", lines.Text())
		}
	}
	require.NoError(t, cmd.Process.Kill()) // SIGKILL, mid-stream
	_ = cmd.Wait()
	t.Logf("%d puts and %d cancels answered before the kill", len(put), len(cancelled))
	require.NotEmpty(t, cancelled)

	s, err := pebblestore.Open(pebblestore.Config{Dir: dir})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	for id := range put {
		j, err := s.GetJob(ctx, id)
		require.NoError(t, err, "answered job %s lost", id)
		if cancelled[id] {
			require.Equal(t, core.StateCancelled, j.State, "answered cancel of %s lost", id)
			continue
		}
		// A cancel may have been answered after the last line read.
		require.Contains(t, []core.State{core.StateScheduled, core.StateCancelled}, j.State, id)
	}
	tp, err := s.GetTopicState(ctx, "kill")
	require.NoError(t, err)
	require.GreaterOrEqual(t, tp.Counts.Scheduled, int64(len(put)-len(cancelled)-1))
}
