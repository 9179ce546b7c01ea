package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// dueSource is a fake core.ClaimSource for the wait loop's own logic: it
// holds one job due at dueAt on clock, answered as Next until then.
type dueSource struct {
	clock  *coretest.FakeClock
	notify core.Notifier
	mu     sync.Mutex
	dueAt  time.Time // zero: no job
	takes  int
}

func (s *dueSource) ClaimNotifier() *core.Notifier { return &s.notify }

func (s *dueSource) TakeJobs(context.Context, *core.ClaimJobsParams) (core.Taken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.takes++
	if s.dueAt.IsZero() {
		return core.Taken{Jobs: []*core.Job{}}, nil
	}
	if s.clock.Now().Before(s.dueAt) {
		return core.Taken{Jobs: []*core.Job{}, Next: s.dueAt}, nil
	}
	s.dueAt = time.Time{}
	return core.Taken{Jobs: []*core.Job{{ID: "j"}}}, nil
}

func (s *dueSource) set(at time.Time) {
	s.mu.Lock()
	s.dueAt = at
	s.mu.Unlock()
	s.notify.Notify("t")
}

// claimAsync runs core.Claim with wait in a goroutine.
func claimAsync(t *testing.T, src *dueSource, wait time.Duration) <-chan []*core.Job {
	t.Helper()
	out := make(chan []*core.Job, 1)
	go func() {
		jobs, err := core.Claim(t.Context(), src, src.clock, &core.ClaimJobsParams{Topic: "t", Max: 1, Wait: wait})
		if err != nil {
			t.Error(err)
		}
		out <- jobs
	}()
	return out
}

func TestClaimWakesAtNext(t *testing.T) {
	t.Parallel()
	src := &dueSource{clock: coretest.NewFakeClock()}
	src.dueAt = src.clock.Now().Add(time.Second)
	out := claimAsync(t, src, time.Minute)
	// The wait timer and the due timer.
	require.NoError(t, src.clock.BlockUntilContext(t.Context(), 2))
	src.clock.Advance(time.Second - time.Millisecond)
	select {
	case <-out:
		t.Fatal("claimed a millisecond early")
	default:
	}
	src.clock.Advance(time.Millisecond)
	require.Len(t, <-out, 1, "the job is claimed at its due time")
}

func TestClaimWokenByNotify(t *testing.T) {
	t.Parallel()
	src := &dueSource{clock: coretest.NewFakeClock()}
	out := claimAsync(t, src, time.Minute)
	require.NoError(t, src.clock.BlockUntilContext(t.Context(), 1)) // the wait timer only
	src.set(src.clock.Now())
	require.Len(t, <-out, 1, "a notify wakes the claim, with no time passing")
}

func TestClaimWaitRunsOut(t *testing.T) {
	t.Parallel()
	src := &dueSource{clock: coretest.NewFakeClock()}
	out := claimAsync(t, src, time.Second)
	require.NoError(t, src.clock.BlockUntilContext(t.Context(), 1))
	src.clock.Advance(time.Second)
	require.Empty(t, <-out)
	src.mu.Lock()
	defer src.mu.Unlock()
	require.Equal(t, 2, src.takes, "one take, and one more as the wait ran out")
}

func TestClaimClosed(t *testing.T) {
	t.Parallel()
	src := &closingSource{dueSource: dueSource{clock: coretest.NewFakeClock()}}
	done := make(chan error, 1)
	go func() {
		_, err := core.Claim(t.Context(), src, src.clock, &core.ClaimJobsParams{Topic: "t", Max: 1, Wait: time.Hour})
		done <- err
	}()
	require.NoError(t, src.clock.BlockUntilContext(t.Context(), 1))
	src.close()
	require.ErrorIs(t, <-done, core.ErrClosed)
}

func TestClaimInvalid(t *testing.T) {
	t.Parallel()
	src := &dueSource{clock: coretest.NewFakeClock()}
	_, err := core.Claim(t.Context(), src, src.clock, &core.ClaimJobsParams{Topic: "t", Max: 0})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.Zero(t, src.takes, "nothing taken for bad input")
}

// closingSource answers ErrClosed once closed.
type closingSource struct {
	dueSource
	closed bool
}

func (s *closingSource) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.notify.Close()
}

func (s *closingSource) TakeJobs(ctx context.Context, p *core.ClaimJobsParams) (core.Taken, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return core.Taken{}, core.ErrClosed
	}
	return s.dueSource.TakeJobs(ctx, p)
}

func TestNotifierFreedWakesOnlyFreed(t *testing.T) {
	t.Parallel()
	var n core.Notifier
	w := n.Watch("t")
	defer w.Stop()
	n.Freed("t")
	requireClosed(t, w.Freed)
	select {
	case <-w.Due:
		t.Fatal("Freed woke Due")
	default:
	}
	n.Notify("other")
	select {
	case <-w.Due:
		t.Fatal("another topic's Notify woke Due")
	default:
	}
	w.Stop()
	require.False(t, n.Watched("t"), "a stopped watch is forgotten")
	w2 := n.Watch("t")
	defer w2.Stop()
	n.Notify("t")
	requireClosed(t, w2.Due)
	requireClosed(t, w2.Freed)
}

func requireClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	default:
		t.Fatal("channel not closed")
	}
}
