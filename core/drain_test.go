package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// TestDrain: a draining engine ends the claims waiting, refuses new ones
// and reports not ready, while pushes, reads and acks go on.
func TestDrain(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	held, err := b.engine.Push(ctx, &core.PushParams{Topic: "t"})
	require.NoError(t, err)
	claimed, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, 1, b.engine.HeldDeliveries())

	type result struct {
		jobs []*core.Job
		err  error
	}
	waiting := make(chan result, 1)
	go func() {
		jobs, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1, Wait: time.Minute})
		waiting <- result{jobs, err}
	}()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 1), "the claim waits on the clock")
	b.engine.Drain()
	res := <-waiting
	require.NoError(t, res.err)
	require.Empty(t, res.jobs, "a waiting claim returns at once, with nothing")

	_, err = b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.ErrorIs(t, err, core.ErrDraining)
	require.ErrorIs(t, err, core.ErrUnavailable)
	require.ErrorIs(t, b.engine.Ready(ctx), core.ErrDraining)

	pushed, err := b.engine.Push(ctx, &core.PushParams{Topic: "t"})
	require.NoError(t, err)
	got, err := b.engine.Get(ctx, pushed.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReady, got.State)
	b.engine.Drain() // idempotent

	// WaitSettled waits for the delivery made before the drain: until its ack.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, b.engine.WaitSettled(short), context.DeadlineExceeded)
	settled := make(chan error, 1)
	go func() { settled <- b.engine.WaitSettled(ctx) }()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 1), "WaitSettled looks again on the clock")
	require.Equal(t, 1, b.engine.HeldDeliveries(), "what WaitSettled waits for")
	require.NoError(t, b.engine.Ack(ctx, &core.AckJobParams{ID: held.ID, Lease: claimed[0].Lease}))
	require.Zero(t, b.engine.HeldDeliveries())
	b.clock.Advance(time.Second)
	require.NoError(t, <-settled)
}

// TestSettledLeaseExpiry: a delivery settled elsewhere is held until its
// lease runs out.
func TestSettledLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	_, err := b.engine.Push(ctx, &core.PushParams{Topic: "t", TTR: 5 * time.Second})
	require.NoError(t, err)
	claimed, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	settled := make(chan error, 1)
	go func() { settled <- b.engine.WaitSettled(ctx) }()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 1))
	b.clock.Advance(4 * time.Second)
	select {
	case err := <-settled:
		t.Fatalf("settled before the lease ran out: %v", err)
	default:
	}
	b.clock.Advance(2 * time.Second)
	require.NoError(t, <-settled)
}

// claimInStore is a store whose ClaimJobs waits until release before it
// claims, as a store does while a claim it took is being written: a claim
// under way when the drain begins.
type claimInStore struct {
	core.Store
	entered, release chan struct{}
}

func (s *claimInStore) ClaimJobs(ctx context.Context, p *core.ClaimJobsParams) ([]*core.Job, error) {
	s.entered <- struct{}{}
	<-s.release
	// A claim the store took is finished, whatever the drain cancelled.
	return s.Store.ClaimJobs(context.WithoutCancel(ctx), p)
}

// TestDrainWaitsForClaimUnderWay: a claim that passed the drain's check
// before the drain began is waited for, and so are the deliveries it
// makes, which its consumer settles on this instance.
func TestDrainWaitsForClaimUnderWay(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = mem.Close() })
	store := &claimInStore{Store: mem, entered: make(chan struct{}), release: make(chan struct{})}
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	pushed, err := e.Push(ctx, &core.PushParams{Topic: "t"})
	require.NoError(t, err)

	type result struct {
		jobs []*core.Job
		err  error
	}
	claimed := make(chan result, 1)
	go func() {
		jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
		claimed <- result{jobs, err}
	}()
	<-store.entered
	e.Drain()
	// A WaitSettled whose context is already done answers at once: its
	// error says whether it would have waited.
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, e.WaitSettled(done), context.Canceled, "the claim under way is waited for")
	close(store.release)
	res := <-claimed
	require.NoError(t, res.err)
	require.Len(t, res.jobs, 1, "the claim under way delivers")
	require.ErrorIs(t, e.WaitSettled(done), context.Canceled, "its delivery is waited for")
	require.NoError(t, e.Ack(ctx, &core.AckJobParams{ID: pushed.ID, Lease: res.jobs[0].Lease}))
	require.NoError(t, e.WaitSettled(done), "settled")
}
