package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
)

// TestClaimFair: the engine passes the topic's fair to the store at each
// claim, so that a change applies to the next one.
func TestClaimFair(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := b.engine
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "fair", Fair: true}))
	for _, key := range []string{"a", "a", "a", "a", "b", "b"} {
		_, err := e.Push(ctx, &core.PushParams{Topic: "fair", Key: key})
		require.NoError(t, err)
	}
	claim := func() []string {
		jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "fair", Max: 2})
		require.NoError(t, err)
		keys := []string{}
		for _, j := range jobs {
			keys = append(keys, j.Key)
		}
		return keys
	}
	require.Equal(t, []string{"a", "b"}, claim(), "one of each key")
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "fair"}))
	require.Equal(t, []string{"a", "a"}, claim(), "fair off: the plain order, at the next claim")
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "fair", Fair: true}))
	require.Equal(t, []string{"a", "b"}, claim(), "fair again")
}

// fairRecorder records the Fair of each PutJobs that reaches the store it
// wraps.
type fairRecorder struct {
	core.Store
	fair [][]string
}

func (r *fairRecorder) PutJobs(ctx context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	r.fair = append(r.fair, p.Fair)
	return r.Store.PutJobs(ctx, p)
}

// TestPutFair: the engine tells the store which topics of a put are fair
// by their configuration (PutJobsParams.Fair), from the first put on, and
// names no other.
func TestPutFair(t *testing.T) {
	t.Parallel()
	rec := &fairRecorder{Store: memstore.New(memstore.Config{})}
	t.Cleanup(func() { _ = rec.Close() })
	e, err := core.NewEngine(core.EngineConfig{Store: rec})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "fair", Fair: true}))
	for _, topic := range []string{"fair", "plain"} {
		_, err := e.Push(ctx, &core.PushParams{Topic: topic, Key: "a"})
		require.NoError(t, err)
	}
	require.Equal(t, [][]string{{"fair"}, nil}, rec.fair)

	// A batch names each fair topic once, wherever its jobs are.
	rec.fair = nil
	_, err = e.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{
		{Topic: "fair", Key: "a"}, {Topic: "plain", Key: "a"}, {Topic: "fair", Key: "b"}, {Topic: "plain", Key: "b"}}})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"fair"}}, rec.fair)
}
