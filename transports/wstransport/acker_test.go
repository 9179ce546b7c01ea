package wstransport

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
)

// TestAckerCoalesces: acks that arrive while every batch slot is busy go
// to the store together in the next batch, and each gets its own answer: a
// lost lease and an unknown job in the middle of the batch fail alone.
func TestAckerCoalesces(t *testing.T) {
	t.Parallel()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	store := NewAckGate(mem, 100)
	engine, err := core.NewEngine(core.EngineConfig{Store: store})
	require.NoError(t, err)
	ctx := t.Context()
	const n = 51
	for range n {
		_, err := engine.Push(ctx, &core.PushParams{Topic: "acks", Body: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	jobs, err := engine.Claim(ctx, &core.ClaimJobsParams{Topic: "acks", Max: n})
	require.NoError(t, err)
	require.Len(t, jobs, n)

	a := &acker{engine: engine, timeout: 10 * time.Second}
	errs := make([]error, n)
	var wg sync.WaitGroup
	// One ack per slot, each its own batch, held in the store.
	for i := range acksInFlight {
		wg.Go(func() { errs[i] = a.ack(jobs[i].ID, jobs[i].Lease) })
		<-store.Entered
	}
	for i := acksInFlight; i < n; i++ {
		id, lease := jobs[i].ID, jobs[i].Lease
		switch i {
		case 10:
			lease = "not-the-lease"
		case 20:
			id = "01ARZ3NDEKTSV4RRFFQ69G5FAV" // no such job
		}
		wg.Go(func() { errs[i] = a.ack(id, lease) })
	}
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.queue) == n-acksInFlight
	}, 10*time.Second, time.Millisecond, "acks queued behind the busy batches")
	store.Let()
	wg.Wait()

	for i := range n {
		switch i {
		case 10:
			require.ErrorIs(t, errs[i], core.ErrConflict, "ack %d", i)
		case 20:
			require.ErrorIs(t, errs[i], core.ErrNotFound, "ack %d", i)
		default:
			require.NoError(t, errs[i], "ack %d", i)
		}
	}
	require.Equal(t, []int{1, 1, 1, 1, n - acksInFlight}, store.Sizes(), "the waiting acks went in one call")
	got, err := engine.Get(ctx, jobs[10].ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, got.State, "a wrong lease acknowledged nothing")
}
