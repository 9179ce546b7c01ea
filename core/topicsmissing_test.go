package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// topicsDown is a store whose topic configurations cannot be read while
// down is set, as a backend that does not answer yet at an engine's start.
type topicsDown struct {
	core.Store
	down atomic.Bool
}

func (s *topicsDown) ListRecords(ctx context.Context, kind string) ([]*core.Record, error) {
	if kind == core.KindTopic && s.down.Load() {
		return nil, errors.New("backend not answering yet")
	}
	return s.Store.ListRecords(ctx, kind)
}

// TestTopicsMissingAtStart: an engine that could not read the topics'
// configurations at its start refuses pushes and claims (ErrUnavailable)
// and is not ready until its refresh reads them, which it tries again
// every 200 ms rather than every TopicRefresh meanwhile, since a keyed push to a
// topic with unique keys would otherwise make a second job of its key.
func TestTopicsMissingAtStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = mem.Close() })
	first, err := core.NewEngine(core.EngineConfig{Store: mem, Clock: clock})
	require.NoError(t, err)
	require.NoError(t, first.PutTopic(ctx, &core.Topic{Name: "u", UniqueKeys: core.UniqueKeysReplace}))
	one, err := first.Push(ctx, &core.PushParams{Topic: "u", Key: "order-1"})
	require.NoError(t, err)

	store := &topicsDown{Store: mem}
	store.down.Store(true)
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock, TopicRefresh: time.Minute})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(ctx) })

	_, err = e.Push(ctx, &core.PushParams{Topic: "u", Key: "order-1"})
	require.ErrorIs(t, err, core.ErrUnavailable)
	_, err = e.Claim(ctx, &core.ClaimJobsParams{Topic: "u", Max: 1})
	require.ErrorIs(t, err, core.ErrUnavailable)
	require.ErrorIs(t, e.Ready(ctx), core.ErrUnavailable)

	store.down.Store(false)
	require.Eventually(t, func() bool {
		clock.Advance(200 * time.Millisecond) // the retry's, well before the minute's tick
		return e.Ready(ctx) == nil
	}, 10*time.Second, 10*time.Millisecond)
	again, err := e.Push(ctx, &core.PushParams{Topic: "u", Key: "order-1"})
	require.NoError(t, err)
	require.Equal(t, one.ID, again.ID, "the key's job, replaced, not a second one")
}
