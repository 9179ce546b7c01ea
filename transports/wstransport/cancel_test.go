package wstransport_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wstransport"
)

// TestCancelRunningTellsSubscriber: a delivery whose job is cancelled while
// it runs is told with a cancelled frame, its credit comes back (the next
// job is sent with prefetch 1), and its ack is a conflict frame.
func TestCancelRunningTellsSubscriber(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pushN(t, "cancelled", 2, withTTR(time.Hour))
	c := b.subscribe(t, "cancelled", 1)
	first := c.nextJob(5 * time.Second)
	require.NoError(t, b.engine.Cancel(context.Background(), &core.CancelJobParams{ID: first.ID, Running: true}))

	f := c.next(5 * time.Second)
	require.Equal(t, "cancelled", f.Type, "frame %s", f.raw)
	require.Equal(t, first.ID, f.ID)
	require.JSONEq(t, `{"type":"cancelled","id":"`+first.ID+`"}`, string(f.raw))
	second := c.nextJob(5 * time.Second)
	require.NotEqual(t, first.ID, second.ID)

	c.ack(first)
	e := c.nextError("conflict")
	require.Equal(t, first.ID, e.ID)
	require.Equal(t, core.StateCancelled, b.job(t, first.ID).State)
}

// TestCancelRunningElsewhereTellsSubscriber: a cancel through another
// instance of the store reaches the subscriber by its recheck: the
// cancelled frame comes, and the credit with it.
func TestCancelRunningElsewhereTellsSubscriber(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *wstransport.Config) { c.Recheck = 50 * time.Millisecond })
	b.pushN(t, "cancelled", 2, withTTR(time.Hour))
	c := b.subscribe(t, "cancelled", 1)
	first := c.nextJob(5 * time.Second)
	other, err := core.NewEngine(core.EngineConfig{Store: b.store})
	require.NoError(t, err)
	require.NoError(t, other.Cancel(context.Background(), &core.CancelJobParams{ID: first.ID, Running: true}))

	f := c.next(5 * time.Second)
	require.Equal(t, "cancelled", f.Type, "frame %s", f.raw)
	require.Equal(t, first.ID, f.ID)
	second := c.nextJob(5 * time.Second)
	require.NotEqual(t, first.ID, second.ID)
}
