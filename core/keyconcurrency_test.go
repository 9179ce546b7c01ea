package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
)

// TestClaimWithinKeyConcurrency: the engine claims within the topic's
// key_concurrency, read at each claim, so that a change applies to the
// next one; a value out of range is refused naming the field.
func TestClaimWithinKeyConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := b.engine
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "perkey", KeyConcurrency: 1}))
	for _, key := range []string{"a", "a", "b", ""} {
		_, err := e.Push(ctx, &core.PushParams{Topic: "perkey", Key: key})
		require.NoError(t, err)
	}
	claim := func() []*core.Job {
		jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "perkey", Max: 10})
		require.NoError(t, err)
		return jobs
	}
	keys := func(jobs []*core.Job) []string {
		ks := []string{}
		for _, j := range jobs {
			ks = append(ks, j.Key)
		}
		return ks
	}
	require.ElementsMatch(t, []string{"a", "b", ""}, keys(claim()), "one of each key")
	require.Empty(t, claim())
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "perkey", KeyConcurrency: 2}))
	require.Equal(t, []string{"a"}, keys(claim()), "the raised bound, at the next claim")

	for _, bad := range []int{-1, core.KeyConcurrencyMax + 1} {
		err := e.PutTopic(ctx, &core.Topic{Name: "bad", KeyConcurrency: bad})
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe, "%d", bad)
		require.Equal(t, "key_concurrency", fe.Field)
	}
}

// refusing is a store that refuses key_concurrency (core.TopicChecker),
// behind a decorator as a server's store is.
type refusing struct{ *memstore.Store }

func (refusing) CheckTopic(t *core.Topic) error {
	if t.KeyConcurrency != 0 {
		return core.Invalid("key_concurrency", "key_concurrency is not supported by this backend")
	}
	return nil
}

type decorator struct{ core.Store }

func (d decorator) Unwrap() core.Store { return d.Store }

// TestTopicRefusedByStore: a store's TopicChecker, found behind a
// decorator, refuses a topic on put and on update, which then changes
// nothing; a topic without the setting is kept.
func TestTopicRefusedByStore(t *testing.T) {
	t.Parallel()
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = store.Close() })
	e, err := core.NewEngine(core.EngineConfig{Store: decorator{refusing{store}}})
	require.NoError(t, err)
	ctx := context.Background()
	err = e.PutTopic(ctx, &core.Topic{Name: "t", KeyConcurrency: 1})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.ErrorContains(t, err, "not supported by this backend")
	_, err = e.GetTopic(ctx, "t")
	require.ErrorIs(t, err, core.ErrNotFound, "nothing stored")

	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "t", MaxAttempts: 3}))
	err = e.UpdateTopic(ctx, "t", func(cur *core.Topic) (*core.Topic, error) {
		cur.KeyConcurrency = 2
		return cur, nil
	})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	got, err := e.GetTopic(ctx, "t")
	require.NoError(t, err)
	require.Zero(t, got.KeyConcurrency)
	require.Equal(t, 3, got.MaxAttempts)
}
