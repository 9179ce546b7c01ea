package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestClaimAnswerLost: a claim whose answer is lost after its script ran
// (a connection cut) fails; the next claim finds what it reserved and
// hands it out under its lease, so that its attempt is not spent unseen
// until the lease runs out (an hour-long history run with partitions
// found such attempts). On one server and on a Cluster.
func TestClaimAnswerLost(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(testing.TB) string{"standalone": standaloneURL, "cluster": clusterURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openStore(t, url(t), uniquePrefix("lost"))
			ctx := context.Background()
			j := job("t", 0)
			put(t, s, j)

			s.loseAnswers.Store(1)
			_, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "t", Max: 10})
			require.ErrorIs(t, err, core.ErrUnavailable)

			got := claim(t, s, "t", 10, 5*time.Second)
			require.Len(t, got, 1)
			require.Equal(t, j.ID, got[0].ID)
			require.Equal(t, 1, got[0].Attempt, "the lost claim's delivery, not a second attempt")
			require.True(t, got[0].LeaseExpiresAt.After(time.Now()))
			_, err = s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: got[0].Lease})
			require.NoError(t, err)
			done, err := s.GetJob(ctx, j.ID)
			require.NoError(t, err)
			require.Equal(t, core.StateDone, done.State)
		})
	}
}
