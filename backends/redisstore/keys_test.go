package redisstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestKeyLimitsRefusedOnCluster: a Redis Cluster refuses key_concurrency
// and fair, naming the Cluster, in a topic and in a claim, which would
// otherwise bound nothing; one server takes both.
func TestKeyLimitsRefusedOnCluster(t *testing.T) {
	t.Parallel()
	cluster := openStore(t, clusterURL(t), uniquePrefix(t.Name()))
	for _, tp := range []*core.Topic{{Name: "t", KeyConcurrency: 1}, {Name: "t", Fair: true}} {
		err := cluster.CheckTopic(tp)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.ErrorContains(t, err, "Redis Cluster")
		_, err = cluster.ClaimJobs(context.Background(), &core.ClaimJobsParams{Topic: "t", Max: 1, KeyConcurrency: tp.KeyConcurrency, Fair: tp.Fair})
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.ErrorContains(t, err, "Redis Cluster")

		one := openStore(t, standaloneURL(t), uniquePrefix(t.Name()))
		require.NoError(t, one.CheckTopic(tp))
	}
}
