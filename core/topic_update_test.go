package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestUpdateTopic checks that an update changes what its function returns
// from the configuration stored, that concurrent updates each apply (one
// compare-and-set each, retried), and that a refused update stores nothing.
func TestUpdateTopic(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	err := b.engine.UpdateTopic(ctx, "t", func(c *core.Topic) (*core.Topic, error) { return c, nil })
	require.ErrorIs(t, err, core.ErrNotFound, "a topic with neither jobs nor configuration")
	require.NoError(t, b.engine.PutTopic(ctx, &core.Topic{Name: "t", MaxAttempts: 1, OnDead: "t.dead"}))

	const n = 8 // fewer than casTries: even the last to write wins within them
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			err := b.engine.UpdateTopic(ctx, "t", func(c *core.Topic) (*core.Topic, error) {
				require.False(t, c.Configured, "the configuration as stored, no state")
				c.MaxAttempts++
				return c, nil
			})
			require.NoError(t, err)
		})
	}
	wg.Wait()
	got, err := b.engine.GetTopic(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, 1+n, got.MaxAttempts, "no update lost")
	require.Equal(t, "t.dead", got.OnDead, "what no update changed is kept")

	refused := errors.New("refused")
	require.ErrorIs(t, b.engine.UpdateTopic(ctx, "t", func(c *core.Topic) (*core.Topic, error) { return nil, refused }), refused)
	err = b.engine.UpdateTopic(ctx, "t", func(c *core.Topic) (*core.Topic, error) { c.MaxAttempts = -1; return c, nil })
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	got, err = b.engine.GetTopic(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, 1+n, got.MaxAttempts, "a refused update stores nothing")
}
