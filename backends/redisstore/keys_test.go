package redisstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestFairRefusedOnCluster: a Redis Cluster refuses fair, naming the
// Cluster, in a topic and in a claim, which would otherwise not take keys
// in turn; it takes key_concurrency, and one server takes both.
func TestFairRefusedOnCluster(t *testing.T) {
	t.Parallel()
	cluster := openStore(t, clusterURL(t), uniquePrefix(t.Name()))
	fair := &core.Topic{Name: "t", Fair: true}
	err := cluster.CheckTopic(fair)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.ErrorContains(t, err, "Redis Cluster")
	_, err = cluster.ClaimJobs(context.Background(), &core.ClaimJobsParams{Topic: "t", Max: 1, Fair: true})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.ErrorContains(t, err, "Redis Cluster")
	require.NoError(t, cluster.CheckTopic(&core.Topic{Name: "t", KeyConcurrency: 1}))

	one := openStore(t, standaloneURL(t), uniquePrefix(t.Name()))
	require.NoError(t, one.CheckTopic(&core.Topic{Name: "t", KeyConcurrency: 1, Fair: true}))
}
