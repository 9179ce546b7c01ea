package history

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/httptransport"
)

// testBundle is an in-process delayq (engine and HTTP API over the memory
// store) for the generator to run against.
type testBundle struct {
	url string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	store := memstore.New(memstore.Config{Clock: core.RealClock()})
	engine, err := core.NewEngine(core.EngineConfig{Store: store, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, engine.Start(t.Context()))
	srv := httptest.NewServer(httptransport.New(httptransport.Config{Engine: engine, Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, engine.Stop(context.WithoutCancel(t.Context())))
		require.NoError(t, store.Close())
	})
	return &testBundle{url: srv.URL}
}

// generatedKinds are the kinds of operation TestGeneratorMemory waits to
// see answered.
var generatedKinds = []Kind{OpPush, OpReplace, OpCancel, OpGet, OpClaim, OpAck, OpNack, OpTouch, OpPause, OpResume}

// answeredKinds counts h's operations answered 2xx by kind.
func answeredKinds(h *History) map[Kind]int {
	answered := map[Kind]int{}
	for _, op := range h.Ops() {
		if op.OK() {
			answered[op.Kind]++
		}
	}
	return answered
}

// TestGeneratorMemory runs the generator against the memory store, the
// reference, without faults, for 3 s and then until every kind of
// operation was answered (a pause is 1 in 100, so a slow machine may need
// longer): the history has no anomaly with no allowance but the clock
// tolerance.
func TestGeneratorMemory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, Setup(t.Context(), b.url))
	h := &History{}
	g := NewGenerator(GeneratorConfig{Seed: 1, Clients: 4, Instances: 1, URLFunc: func(int) string { return b.url }, History: h})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		select { // the run's least length
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
		}
		for ctx.Err() == nil {
			answered := answeredKinds(h)
			if !slices.ContainsFunc(generatedKinds, func(k Kind) bool { return answered[k] == 0 }) {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	g.Run(ctx)
	<-watched
	g.Drain(t.Context(), 0, 3*time.Second)

	answered := answeredKinds(h)
	delivered := 0
	for _, op := range h.Ops() {
		delivered += len(op.Jobs)
	}
	for _, k := range generatedKinds {
		require.NotZero(t, answered[k], "%s answered 2xx at least once: %v", k, answered)
	}
	require.NotZero(t, delivered)

	// Times are kept to the millisecond (a retry's run_at too): the
	// tolerance is the only allowance.
	r := Check(h, Allowances{ClockTolerance: 5 * time.Millisecond})
	t.Log(r.Summary())
	require.Empty(t, r.Anomalies)
	require.Zero(t, r.Unknown)
}
