package pebblestore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// TestPickFirstAgreesWithPick: the best-first walk of a heap picks the same
// page as the pass over the whole heap, from every cursor of a walk by
// pages, with many jobs due at the same ms (ties by id), and falls back to
// the pass for deep cursors.
func TestPickFirstAgreesWithPick(t *testing.T) {
	t.Parallel()
	s, err := Open(Config{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	start := time.Now().Add(time.Hour)
	jobs := make([]*core.Job, 3000)
	for i := range jobs {
		jobs[i] = storetest.NewJob("pick", start.Add(time.Duration(i*7%23)*time.Second))
	}
	storetest.Put(t, context.Background(), s, jobs...)

	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.topics["pick"].scheduled
	require.Equal(t, len(jobs), h.Len())
	var after *core.ListCursor
	seen := 0
	for _, n := range []int{1, 7, 50, 333, 1000, 1000, 1000} {
		wantIDs, wantPos := s.pick(after, n, h)
		gotIDs, gotPos := s.pickFirst(h, after, n)
		require.Equal(t, wantIDs, gotIDs, "page of %d after %+v", n, after)
		require.Equal(t, wantPos, gotPos)
		seen += len(gotIDs)
		if len(gotPos) == 0 {
			break
		}
		after = &gotPos[len(gotPos)-1]
	}
	require.Equal(t, len(jobs), seen, "the walk listed every job")
}
