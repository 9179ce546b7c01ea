package redisstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// TestFinishedClockBack: a finish recorded after the clock stepped back
// (TimeFromClock stands for the server's) still goes after the entries
// before it, where a reader at the end of the record meets it, rather than
// failing its script; and a cursor of another shard count is refused.
func TestFinishedClockBack(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Now().Add(time.Hour).Truncate(time.Second))
	s := openStore(t, standaloneURL(t), uniquePrefix(t.Name()), func(c *Config) { c.Clock = clock; c.TimeFromClock = true })
	ctx := t.Context()
	first, second := job("back", time.Hour), job("back", time.Hour)
	put(t, s, first, second)

	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: first.ID}))
	page, err := s.ListFinished(ctx, &core.ListFinishedParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, first.ID, page.Jobs[0].ID)

	clock.Advance(-time.Minute)
	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: second.ID}))
	next, err := s.ListFinished(ctx, &core.ListFinishedParams{After: page.Next, Limit: 10})
	require.NoError(t, err)
	require.Len(t, next.Jobs, 1, "the finish after the clock stepped back")
	require.Equal(t, second.ID, next.Jobs[0].ID)
	require.Equal(t, core.StateCancelled, next.Jobs[0].State)
	require.Equal(t, clock.Now().UTC().Truncate(time.Millisecond), next.Jobs[0].FinishedAt)

	_, err = s.ListFinished(ctx, &core.ListFinishedParams{After: page.Next + ",0-0", Limit: 10})
	require.ErrorIs(t, err, core.ErrInvalidArgument, "a cursor of two shards on a store of one")
}
