package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// roundTrip puts a job due now on s, claims it and acknowledges it: a put,
// a claim and a lease call.
func roundTrip(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	topic := "fn-" + uniquePrefix(t.Name())
	put(t, s, job(topic, 0))
	got := claim(t, s, topic, 1, 5*time.Second)
	require.Len(t, got, 1)
	res, err := s.AckJob(ctx, &core.AckJobParams{ID: got[0].ID, Lease: got[0].Lease})
	require.NoError(t, err)
	require.Equal(t, core.StateDone, res.State)
}

// TestFunctionsUsed: on Redis 7 a store loads its library and calls it; on
// a server without FUNCTION it runs the scripts.
func TestFunctionsUsed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		url       func(testing.TB) string
		functions bool
	}{
		{"standalone", standaloneURL, true},
		{"cluster", clusterURL, true},
		{"without functions", scriptsOnlyURL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, tc.url(t), uniquePrefix(t.Name()))
			require.Equal(t, tc.functions, s.functions)
			roundTrip(t, s)
			if !tc.functions {
				return
			}
			libs, err := s.rdb.FunctionList(context.Background(), redis.FunctionListQuery{LibraryNamePattern: library.name}).Result()
			require.NoError(t, err)
			require.Len(t, libs, 1)
			require.Len(t, libs[0].Functions, 4*len(shardScripts))
		})
	}
}

// TestFunctionsDenied: a user the server's ACL denies FUNCTION runs the
// scripts instead.
func TestFunctionsDenied(t *testing.T) {
	t.Parallel()
	srv := ownServer(t, "")
	_, err := srv.Do("ACL", "SETUSER", "nofn", "on", ">pw", "~*", "&*", "+@all", "-function")
	require.NoError(t, err)
	s := openStore(t, "redis://nofn:pw@"+srv.Addr, uniquePrefix(t.Name()))
	require.False(t, s.functions)
	roundTrip(t, s)
}

// TestFunctionsLoadedAgain: a server that lost the library (FUNCTION
// FLUSH, a restart without persistence, a new Cluster node) gets it again
// from the first call that misses it, which then runs.
func TestFunctionsLoadedAgain(t *testing.T) {
	t.Parallel()
	srv := ownServer(t, "")
	s := openStore(t, srv.URL(), uniquePrefix(t.Name()))
	require.True(t, s.functions)
	for range 2 {
		_, err := srv.Do("FUNCTION", "FLUSH")
		require.NoError(t, err)
		roundTrip(t, s)
	}
	libs, err := s.rdb.FunctionList(context.Background(), redis.FunctionListQuery{LibraryNamePattern: library.name}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 1)
}

// TestReadsAtMaxmemory: a server at its maxmemory (noeviction) refuses
// writes and still answers reads, which its functions declare (no-writes)
// as its scripts did by calling no write.
func TestReadsAtMaxmemory(t *testing.T) {
	t.Parallel()
	srv := ownServer(t, "")
	ctx := context.Background()
	s := openStore(t, srv.URL(), uniquePrefix(t.Name()))
	j := job("full", time.Hour)
	put(t, s, j)
	_, err := srv.Do("CONFIG", "SET", "maxmemory", "1")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = srv.Do("CONFIG", "SET", "maxmemory", "0") })

	_, err = s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{job("full", time.Hour)}})
	require.ErrorContains(t, err, "OOM")
	got, err := s.GetJob(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, j.ID, got.ID)
	n := 0
	require.NoError(t, s.ExportJobs(ctx, func(*core.Job) error { n++; return nil }))
	require.Equal(t, 1, n)
}
