package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// waitCalls returns how many WAIT commands the server has run (INFO
// commandstats).
func waitCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info, err := srv.Do("INFO", "commandstats")
	require.NoError(t, err)
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_wait:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// TestWaitReplicas runs a store with WaitReplicas 1 on a master with one
// replica: puts, claims, acks, retries, cancels and requeues each issue WAIT on the
// master, and the replica has the job as answered. With the replica gone,
// those writes fail with ErrNotReplicated (ErrUnavailable) after
// WaitTimeout, and the job written stays on the master: done, but not
// reported durable.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	dir := t.TempDir()
	master, err := redistest.StartServer(redistest.Options{Dir: dir + "/master"})
	require.NoError(t, err)
	t.Cleanup(master.Kill)
	replica, err := redistest.StartReplica(master, redistest.Options{Dir: dir + "/replica"})
	require.NoError(t, err)
	t.Cleanup(replica.Kill)
	const timeout = 200 * time.Millisecond
	s := openStore(t, master.URL(), uniquePrefix(t.Name()), func(c *Config) { c.WaitReplicas, c.WaitTimeout = 1, timeout })
	ctx := context.Background()
	const topic = "wait"

	before := waitCalls(t, master)
	j := job(topic, 0)
	put(t, s, j)
	require.Equal(t, before+1, waitCalls(t, master), "a put waits for the replica")
	// What was answered is on the replica: the job's hash, by its id.
	onReplica, err := replica.Do("KEYS", "*"+j.ID+"*")
	require.NoError(t, err)
	require.NotEmpty(t, onReplica, "the put job is on the replica")

	got := claim(t, s, topic, 1, time.Second)
	require.Len(t, got, 1)
	before = waitCalls(t, master)
	_, err = s.RetryJob(ctx, &core.RetryJobParams{ID: j.ID, Lease: got[0].Lease})
	require.NoError(t, err)
	got = claim(t, s, topic, 1, time.Second)
	require.Len(t, got, 1)
	_, err = s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: got[0].Lease})
	require.NoError(t, err)
	require.Equal(t, before+3, waitCalls(t, master), "a retry, a claim and an ack wait")
	j2 := job(topic, time.Hour)
	put(t, s, j2)
	before = waitCalls(t, master)
	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: j2.ID}))
	require.Equal(t, before+1, waitCalls(t, master), "a cancel waits")

	// The replica stops: WAIT 1 gets 0 within the timeout.
	replica.Kill()
	require.Eventually(t, func() bool {
		info, err := master.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "connected_slaves:0")
	}, 10*time.Second, 10*time.Millisecond)
	j3 := job(topic, time.Hour)
	start := time.Now()
	_, err = s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j3}})
	require.ErrorIs(t, err, core.ErrNotReplicated)
	require.ErrorIs(t, err, core.ErrUnavailable)
	require.GreaterOrEqual(t, time.Since(start), timeout, "WAIT waited its timeout")
	// Done on the master all the same: a retry of the put finds it.
	stored, err := s.GetJob(ctx, j3.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateScheduled, stored.State)
	_, err = s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j3}})
	require.ErrorIs(t, err, core.ErrNotReplicated, "a put that finds the job still writes nothing WAIT confirms")
	require.ErrorIs(t, s.CancelJob(ctx, &core.CancelJobParams{ID: j3.ID}), core.ErrNotReplicated)

	// An ack goes through the lease batcher: its failure reaches the caller.
	j4 := job(topic, 0)
	_, err = s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j4}})
	require.ErrorIs(t, err, core.ErrNotReplicated)
	// A claim waits too: done on the master, the job reserved under a
	// lease nobody was given.
	_, err = s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic, Max: 1, Wait: time.Second, Via: core.ViaPull})
	require.ErrorIs(t, err, core.ErrNotReplicated)
	stored, err = s.GetJob(ctx, j4.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, stored.State, "the claim was done on the master")
	require.NotEmpty(t, stored.Lease)
	_, err = s.AckJob(ctx, &core.AckJobParams{ID: j4.ID, Lease: stored.Lease})
	require.ErrorIs(t, err, core.ErrNotReplicated)
	_, err = s.AckJobs(ctx, &core.AckJobsParams{Acks: []core.AckJobParams{{ID: j4.ID, Lease: stored.Lease}}})
	require.ErrorIs(t, err, core.ErrNotReplicated)
	stored, err = s.GetJob(ctx, j4.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDone, stored.State, "the ack was done on the master")
}

// TestWaitReplicasConfig checks what New refuses of WaitReplicas.
func TestWaitReplicasConfig(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		url  func(testing.TB) string
		mod  func(*Config)
		want string
	}{
		"negative":      {standaloneURL, func(c *Config) { c.WaitReplicas = -1 }, "WaitReplicas -1 must be at least 0"},
		"timeout":       {standaloneURL, func(c *Config) { c.WaitReplicas, c.WaitTimeout = 1, -time.Second }, "WaitTimeout -1s must be positive"},
		"redis cluster": {clusterURL, func(c *Config) { c.WaitReplicas = 1 }, "a Redis Cluster is not supported"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Client: newClient(t, tc.url(t)), Prefix: uniquePrefix(t.Name())}
			tc.mod(&cfg)
			_, err := New(context.Background(), cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestStoreWaitReplicas runs the conformance suite on a store that waits
// for a replica: every behaviour holds with WAIT after the writes.
func TestStoreWaitReplicas(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	dir := t.TempDir()
	master, err := redistest.StartServer(redistest.Options{Dir: dir + "/master"})
	require.NoError(t, err)
	t.Cleanup(master.Kill)
	replica, err := redistest.StartReplica(master, redistest.Options{Dir: dir + "/replica"})
	require.NoError(t, err)
	t.Cleanup(replica.Kill)
	storetest.Run(t, harness(master.URL(), func(c *Config) { c.WaitReplicas = 1 }))
}

// BenchmarkWaitReplicas measures what WaitReplicas costs: intake (PutJobs
// from 8 goroutines, one job per call and batches of 100) and claims with
// acknowledgements (storetest.Drain: 8 claims of up to 16, 64 ackers) on a
// master with AOF everysec and one replica, without WAIT and with WAIT 1
// (timeout 5 s: an AOF rewrite on a loaded machine can hold the replica's
// acknowledgement past a second, and a write refused would end the run):
//
//	go test -run '^$' -bench WaitReplicas -benchtime 20000x -count 3 ./backends/redisstore/
func BenchmarkWaitReplicas(b *testing.B) {
	redistest.Require(b)
	dir := b.TempDir()
	master, err := redistest.StartServer(redistest.Options{Dir: dir + "/master", AppendFsync: "everysec"})
	require.NoError(b, err)
	b.Cleanup(master.Kill)
	replica, err := redistest.StartReplica(master, redistest.Options{Dir: dir + "/replica", AppendFsync: "everysec"})
	require.NoError(b, err)
	b.Cleanup(replica.Kill)
	for _, wait := range []int{0, 1} {
		waiting := func(c *Config) { c.WaitReplicas, c.WaitTimeout = wait, 5*time.Second }
		for _, batch := range []int{1, 100} {
			b.Run(fmt.Sprintf("wait=%d/intake/batch=%d", wait, batch), func(b *testing.B) {
				s := openStore(b, master.URL(), uniquePrefix(b.Name()), waiting)
				b.ResetTimer()
				b.ReportMetric(storetest.Intake(b, s, 8, batch, b.N), "jobs/s")
			})
		}
		b.Run(fmt.Sprintf("wait=%d/claim+ack", wait), func(b *testing.B) {
			s := openStore(b, master.URL(), uniquePrefix(b.Name()), waiting)
			const topic = "bench"
			jobs := make([]*core.Job, 0, 1000)
			for i := range b.N {
				jobs = append(jobs, storetest.DueJob(topic))
				if len(jobs) == cap(jobs) || i == b.N-1 {
					put(b, s, jobs...)
					jobs = jobs[:0]
				}
			}
			b.ResetTimer()
			start := time.Now()
			res := storetest.Drain(context.Background(), s, storetest.DrainParams{Topic: topic, N: b.N, Claimers: 8, Max: 16, Wait: time.Second})
			require.Equal(b, b.N, res.Claimed)
			b.ReportMetric(float64(b.N)/res.LastAck.Sub(start).Seconds(), "jobs/s")
		})
	}
}
