package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestLeaseBatchOneAnswerEach sends one coalesced batch by hand, as the
// batcher does with calls that arrive together: every delivery gets its own
// answer, a second ack of a job in the same batch loses its lease, and a
// delivery that fails in Redis (its job key holds a string) fails alone. On
// a standalone server the batch is one script over several shards; on a
// Cluster, one script per shard.
func TestLeaseBatchOneAnswerEach(t *testing.T) {
	t.Parallel()
	t.Run("standalone", func(t *testing.T) {
		t.Parallel()
		testLeaseBatchOneAnswerEach(t, standaloneURL(t), true)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		testLeaseBatchOneAnswerEach(t, clusterURL(t), false)
	})
}

func testLeaseBatchOneAnswerEach(t *testing.T, url string, multiShard bool) {
	s := openStore(t, url, uniquePrefix(t.Name()))
	require.Equal(t, multiShard, s.multiShard)
	ctx := context.Background()
	var jobs []*core.Job
	for range 6 {
		jobs = append(jobs, job("batch", 0))
	}
	put(t, s, jobs...)
	got := claim(t, s, "batch", len(jobs), time.Second)
	require.Len(t, got, len(jobs))
	byID := map[string]*core.Job{}
	for _, j := range got {
		byID[j.ID] = j
	}
	// A job key that is neither a hash nor a string: every command on it
	// fails.
	broken := "broken-" + jobs[0].ID
	require.NoError(t, newClient(t, url).RPush(ctx, s.keys.job(broken), "x").Err())

	a, b, c, d, e := byID[jobs[0].ID], byID[jobs[1].ID], byID[jobs[2].ID], byID[jobs[3].ID], byID[jobs[4].ID]
	op := func(kind, id, lease string) *leaseOp {
		return &leaseOp{op: kind, id: id, lease: lease, errText: "boom", shard: s.keys.shardOf(id), done: make(chan struct{})}
	}
	ops := []*leaseOp{
		op("ack", a.ID, a.Lease),
		op("ack", a.ID, a.Lease), // the same delivery again: lost
		op("ack", b.ID, "not-the-lease"),
		op("ack", broken, "l"),
		op("ack", "no-such-job", "l"),
		op("touch", c.ID, c.Lease),
		op("retry", d.ID, d.Lease),
		op("bury", e.ID, e.Lease),
	}
	s.leases.send(ops)
	for i, o := range ops {
		select {
		case <-o.done:
		default:
			t.Fatalf("op %d not answered", i)
		}
	}
	wantCode := []int64{0, 3, 3, -1, 1, 0, 0, 0}
	for i, o := range ops {
		require.Equal(t, wantCode[i], o.code, "op %d", i)
		if wantCode[i] == -1 {
			require.ErrorIs(t, o.err, core.ErrUnavailable, "op %d", i)
			require.Contains(t, o.err.Error(), "WRONGTYPE", "op %d", i)
		} else {
			require.NoError(t, o.err, "op %d", i)
		}
	}
	touched, err := decodeFlat(c.ID, ops[5].job)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, touched.State)
	require.Equal(t, c.Lease, touched.Lease)

	for id, want := range map[string]core.State{a.ID: core.StateDone, b.ID: core.StateReserved,
		c.ID: core.StateReserved, d.ID: core.StateReady, e.ID: core.StateDead} {
		j, err := s.GetJob(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, j.State, id)
	}
	again := claim(t, s, "batch", 10, 0)
	require.Len(t, again, 1, "the retried job is ready again")
	require.Equal(t, d.ID, again[0].ID)
	require.Equal(t, "boom", again[0].LastError)
}

// TestLeaseBatchConcurrent acknowledges many deliveries from many goroutines
// at once, some twice and some with a wrong lease, so that calls coalesce:
// each call gets the answer it would get alone.
func TestLeaseBatchConcurrent(t *testing.T) {
	t.Parallel()
	s := openStore(t, standaloneURL(t), uniquePrefix(t.Name()))
	ctx := context.Background()
	const n = 300
	var jobs []*core.Job
	for range n {
		jobs = append(jobs, job("many", 0))
	}
	put(t, s, jobs...)
	var got []*core.Job
	for len(got) < n {
		got = append(got, claim(t, s, "many", n-len(got), time.Second)...)
	}
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i, j := range got {
		lease := j.Lease
		if i%3 == 0 {
			lease = "wrong"
		}
		wg.Go(func() { errs[2*i] = settleErr(s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: lease})) })
		wg.Go(func() {
			_, errs[2*i+1] = s.TouchJob(ctx, &core.TouchJobParams{ID: j.ID, Lease: j.Lease})
		})
	}
	wg.Wait()
	for i, j := range got {
		ack, touch := errs[2*i], errs[2*i+1]
		st, err := s.GetJob(ctx, j.ID)
		require.NoError(t, err)
		if i%3 == 0 {
			require.ErrorIs(t, ack, core.ErrLeaseLost)
			require.NoError(t, touch)
			require.Equal(t, core.StateReserved, st.State)
			continue
		}
		require.NoError(t, ack)
		require.Equal(t, core.StateDone, st.State)
		// The touch came before or after the ack.
		if touch != nil {
			require.ErrorIs(t, touch, core.ErrLeaseLost)
		}
	}
}

// TestLeaseBatchClosed: calls after Close get ErrClosed, and a call whose
// ctx ended does not wait for the batcher.
func TestLeaseBatchClosed(t *testing.T) {
	t.Parallel()
	s := openStore(t, standaloneURL(t), uniquePrefix(t.Name()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := settleErr(s.AckJob(ctx, &core.AckJobParams{ID: "x", Lease: "y"}))
	require.True(t, errors.Is(err, context.Canceled), err)
	require.NoError(t, s.Close())
	require.ErrorIs(t, settleErr(s.AckJob(context.Background(), &core.AckJobParams{ID: "x", Lease: "y"})), core.ErrClosed)
	require.ErrorIs(t, s.leases.do(context.Background(), &leaseOp{op: "ack", id: "x"}), core.ErrClosed)
}
