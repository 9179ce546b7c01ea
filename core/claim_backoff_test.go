package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

func TestClaimBackoff(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClock()
	b := core.NewClaimBackoff(clock)
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 3200}
	for i, w := range want {
		require.Equal(t, w*time.Millisecond, b.Failed(), "failure %d", i+1)
	}
	b.Succeeded()
	require.Equal(t, 100*time.Millisecond, b.Failed(), "a success starts over")

	done := make(chan bool)
	go func() { done <- b.Wait(context.Background()) }()
	require.NoError(t, clock.BlockUntilContext(context.Background(), 1))
	clock.Advance(100 * time.Millisecond)
	require.True(t, <-done)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, b.Wait(ctx), "an ended ctx stops the wait")
}
