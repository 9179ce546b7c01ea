package history

import (
	"context"
	"log/slog"
	"net/http/httptest"
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

// TestGeneratorMemory runs the generator for a few seconds against the
// memory store, the reference, without faults: every kind of operation is
// made and answered, and the history has no anomaly with no allowance but
// the clock tolerance.
func TestGeneratorMemory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, Setup(t.Context(), b.url))
	h := &History{}
	g := NewGenerator(GeneratorConfig{Seed: 1, Clients: 4, Instances: 1, URLFunc: func(int) string { return b.url }, History: h})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	g.Run(ctx)
	g.Drain(t.Context(), 0, 3*time.Second)

	answered := map[Kind]int{}
	delivered := 0
	for _, op := range h.Ops() {
		if op.OK() {
			answered[op.Kind]++
		}
		delivered += len(op.Jobs)
	}
	for _, k := range []Kind{OpPush, OpReplace, OpCancel, OpGet, OpClaim, OpAck, OpNack, OpTouch, OpPause, OpResume} {
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
