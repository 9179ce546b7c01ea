package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
)

// legacyTopics is a store that kept topic configurations in an earlier
// format of its own (core.LegacyTopics), for the engine's migration logic.
type legacyTopics struct {
	core.Store
	mu  sync.Mutex
	old map[string]*core.Topic
}

func (s *legacyTopics) LegacyTopics(context.Context) ([]*core.Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*core.Topic
	for _, t := range s.old {
		out = append(out, t.Clone())
	}
	return out, nil
}

func (s *legacyTopics) DropLegacyTopics(_ context.Context, names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		delete(s.old, n)
	}
	return nil
}

// unwrapping is a decorator that has no capability of its own but Unwrap.
type unwrapping struct{ core.Store }

func (u unwrapping) Unwrap() core.Store { return u.Store }

// TestMigrateTopics: the configurations of the earlier format become
// records, found through a decorator; a topic that already has a record
// keeps it; the earlier format is dropped; a second run moves nothing.
func TestMigrateTopics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	legacy := &legacyTopics{Store: mem, old: map[string]*core.Topic{
		"kept":  {Name: "kept", MaxAttempts: 2, Configured: true},
		"moved": {Name: "moved", MaxAttempts: 3, Configured: true},
	}}
	store := unwrapping{legacy}
	e, err := core.NewEngine(core.EngineConfig{Store: store})
	require.NoError(t, err)
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "kept", MaxAttempts: 9}))

	n, err := core.MigrateTopics(ctx, store)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the topic without a record")
	kept, err := e.GetTopic(ctx, "kept")
	require.NoError(t, err)
	require.Equal(t, 9, kept.MaxAttempts, "the record wins over the earlier format")
	moved, err := e.GetTopic(ctx, "moved")
	require.NoError(t, err)
	require.Equal(t, &core.Topic{Name: "moved", MaxAttempts: 3, Configured: true}, moved)
	require.Empty(t, legacy.old, "the earlier format is dropped")

	n, err = core.MigrateTopics(ctx, store)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestTopicRecordMergesState: the engine's topic is its record's
// configuration as put, with the store's counts and pause beside it.
func TestTopicRecordMergesState(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	e, err := core.NewEngine(core.EngineConfig{Store: mem})
	require.NoError(t, err)
	want := &core.Topic{Name: "t", MaxAttempts: 4, UniqueKeys: core.UniqueKeysReject, OnDead: "t.dead"}
	require.NoError(t, e.PutTopic(ctx, want))
	_, err = e.Push(ctx, &core.PushParams{Topic: "t"})
	require.NoError(t, err)
	require.NoError(t, e.SetTopicPaused(ctx, "t", true))
	got, err := e.GetTopic(ctx, "t")
	require.NoError(t, err)
	w := *want
	w.Configured, w.Paused, w.Counts = true, true, core.Counts{Ready: 1}
	require.Equal(t, &w, got)
}

// TestTopicRecordZeros: a record written before explicit zeros (which left
// a zero out) reads with the defaults, as it did; one written since keeps
// its explicit zeros (Backoff.Zeros), which stay 0 under the defaults.
func TestTopicRecordZeros(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	// What the release before wrote for {"backoff": {"initial": "0s",
	// "jitter": 0, "max": "5m"}}: the zeros left out by omitempty.
	old := `{"name":"old","delivery":{},"backoff":{"max":300000000000},"rate":{},"configured":true}`
	_, err := mem.PutRecord(ctx, &core.PutRecordParams{Kind: core.KindTopic, Name: "old", Value: []byte(old)})
	require.NoError(t, err)
	e, err := core.NewEngine(core.EngineConfig{Store: mem})
	require.NoError(t, err)
	got, err := e.GetTopic(ctx, "old")
	require.NoError(t, err)
	b := got.WithDefaults().Backoff
	require.Equal(t, core.Backoff{Initial: time.Second, Max: 5 * time.Minute, Factor: 2, Jitter: 0.2}, b, "defaults, as before")

	zeros := &core.Topic{Name: "new", Backoff: core.Backoff{Max: 5 * time.Minute, Zeros: []string{"initial", "jitter"}}}
	require.NoError(t, e.PutTopic(ctx, zeros))
	again, err := core.NewEngine(core.EngineConfig{Store: mem}) // reads the record afresh
	require.NoError(t, err)
	got, err = again.GetTopic(ctx, "new")
	require.NoError(t, err)
	b = got.WithDefaults().Backoff
	require.Equal(t, core.Backoff{Initial: 0, Max: 5 * time.Minute, Factor: 2, Jitter: 0, Zeros: []string{"initial", "jitter"}}, b)
	require.Zero(t, b.Delay(1), "retry at once")
	require.Zero(t, b.Delay(5), "and again: 0 times the factor")

	for _, bad := range []core.Backoff{{Zeros: []string{"factor"}}, {Initial: time.Second, Zeros: []string{"initial"}}} {
		err := e.PutTopic(ctx, &core.Topic{Name: "bad", Backoff: bad})
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe, "%+v", bad)
		require.Equal(t, "backoff.zeros", fe.Field)
	}
}
