package natsstore

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore/natstest"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/internal/diskreserve"
)

// TestDiskReserve: a store with a reserve, over a directory whose free
// space the test sets. Under the low mark (half the reserve) it releases
// its ballast and refuses, at once and with core.ErrStorageFull naming the
// directory, every call that adds jobs (puts, replaces, imports, a
// schedule's slot with a job), and Ping says so; claims, acks, retries and
// reads go on, claims only while their writes stay above the low mark. At
// twice the reserve free it makes the ballast again and takes jobs.
func TestDiskReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	const reserve = 4 << 20
	var free atomic.Int64
	free.Store(1 << 30)
	b := setup(t, func(c *Config) {
		c.DiskDir, c.DiskReserve = dir, reserve
		c.diskUsage = func(string) (diskreserve.Usage, error) {
			return diskreserve.Usage{Avail: free.Load(), Total: 10 << 30}, nil
		}
	})
	s := b.store
	ballast := filepath.Join(dir, diskreserve.BallastName)
	info, err := os.Stat(ballast)
	require.NoError(t, err)
	require.Equal(t, int64(reserve), info.Size())

	held, retried := job("t", 0), job("t", 0)
	put(t, s, held, retried)
	jobs := claim(t, s, "t", 2, 5*time.Second)
	require.Len(t, jobs, 2)
	lease := map[string]string{jobs[0].ID: jobs[0].Lease, jobs[1].ID: jobs[1].Lease}
	waiting := job("t", 0)
	put(t, s, waiting, job("t", 0))

	// Above the low mark: nothing changes. The store's own watcher looks
	// every 100 ms too; a look here makes the test wait on nothing.
	free.Store(reserve/2 + 1)
	s.lookAtDisk()
	require.False(t, s.DiskFull())
	free.Store(reserve/2 - 1)
	s.lookAtDisk()
	require.True(t, s.DiskFull())
	_, err = os.Stat(ballast)
	require.ErrorIs(t, err, fs.ErrNotExist, "the ballast is released")

	start := time.Now()
	_, err = s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{job("t", 0)}})
	require.ErrorIs(t, err, core.ErrStorageFull)
	require.ErrorContains(t, err, dir)
	require.Less(t, time.Since(start), 50*time.Millisecond, "refused at once")
	_, err = s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{waiting}, Replace: true})
	require.ErrorIs(t, err, core.ErrStorageFull, "a replace")
	imported := job("t", 0)
	imported.State = core.StateReady
	_, err = s.ImportJobs(ctx, []*core.Job{imported})
	require.ErrorIs(t, err, core.ErrStorageFull, "an import")
	_, err = s.PutRecord(ctx, &core.PutRecordParams{Kind: core.KindSchedule, Name: "every", Value: []byte(`{}`)})
	require.NoError(t, err, "a schedule is no job")
	slot := core.StoreTime(time.Now().Add(-time.Minute))
	fired := job("t", 0)
	fired.RunAt = slot
	_, err = s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{fired}, IfAbsent: true})
	require.ErrorIs(t, err, core.ErrStorageFull, "a schedule slot's job")
	_, err = s.GetJob(ctx, fired.ID)
	require.ErrorIs(t, err, core.ErrNotFound)
	require.ErrorIs(t, s.Ping(ctx), core.ErrStorageFull)

	// What finishes jobs goes on, in the space released.
	free.Store(reserve/2 + reserve)
	s.lookAtDisk()
	require.True(t, s.DiskFull())
	require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: held.ID, Lease: lease[held.ID]})))
	require.NoError(t, settleErr(s.RetryJob(ctx, &core.RetryJobParams{ID: retried.ID, Lease: lease[retried.ID]})))
	var again []*core.Job // two of waiting, late and retried
	for len(again) < 2 {
		got := claim(t, s, "t", 2-len(again), 5*time.Second)
		require.NotEmpty(t, got)
		again = append(again, got...)
	}
	got, err := s.GetJob(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDone, got.State)

	// The reserve spent down to the low mark: a claim takes no job whose
	// lease and ack would go below it; the acks of the jobs claimed go on.
	free.Store(reserve/2 + 1000)
	_, err = s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "t", Max: 10})
	require.ErrorIs(t, err, core.ErrStorageFull)
	require.ErrorContains(t, err, "reserve spent")
	for _, j := range again {
		require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})))
	}
	free.Store(reserve/2 + reserve)
	jobs = claim(t, s, "t", 10, 5*time.Second)
	require.Len(t, jobs, 1, "the job the refused claim left")
	require.NotContains(t, []string{again[0].ID, again[1].ID}, jobs[0].ID)
	require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: jobs[0].ID, Lease: jobs[0].Lease})))

	// Space comes back: under twice the reserve the store stays full.
	free.Store(2*reserve - 1)
	s.lookAtDisk()
	require.True(t, s.DiskFull())
	free.Store(2 * reserve)
	s.lookAtDisk()
	require.False(t, s.DiskFull())
	info, err = os.Stat(ballast)
	require.NoError(t, err, "the ballast is made again first")
	require.Equal(t, int64(reserve), info.Size())
	require.NoError(t, s.Ping(ctx))
	put(t, s, job("t", 0))
	res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{fired}, IfAbsent: true})
	require.NoError(t, err)
	require.NoError(t, res[0].Err, "the slot's job is created once space is back")
}

// TestDiskReserveConfig: a reserve needs the directory of the server's
// files, and is not negative.
func TestDiskReserveConfig(t *testing.T) {
	t.Parallel()
	cfg := Config{Conn: &nats.Conn{}}.WithDefaults() // Validate only needs one
	cfg.DiskReserve = 1 << 20
	require.ErrorContains(t, cfg.Validate(), "DiskReserve needs DiskDir")
	cfg.DiskReserve, cfg.DiskDir = -1, t.TempDir()
	require.ErrorContains(t, cfg.Validate(), "DiskReserve -1 must not be negative")
}

// TestStorageLimit: a separate nats-server at its max_file_store refuses
// every write, claims' and acks' too, with "insufficient resources": the
// store answers core.ErrStorageFull (503 "storage full", which the breaker
// does not count: the server answers), reads go on, and writes are taken
// again once space is freed, without a restart.
func TestStorageLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	conf := filepath.Join(dir, "server.conf")
	require.NoError(t, os.WriteFile(conf, []byte("jetstream {\n  store_dir: \""+filepath.Join(dir, "js")+"\"\n  max_file_store: 2MB\n}\n"), 0o600))
	srv := natstest.Start(t, natstest.Options{Args: []string{"-c", conf}})
	t.Cleanup(srv.Kill)
	prefix := uniquePrefix()
	s := openStore(t, connectURL(t, srv.URL()), prefix)

	body := json.RawMessage(`"` + strings.Repeat("x", 16<<10) + `"`)
	var answered []*core.Job
	var refused error
	for range 1000 {
		j := job("t", 0)
		j.Body = body
		if _, refused = s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{j}}); refused != nil {
			break
		}
		answered = append(answered, j)
	}
	t.Logf("refused after %d puts: %v", len(answered), refused)
	require.ErrorIs(t, refused, core.ErrStorageFull)
	require.ErrorContains(t, refused, "max_file_store")
	_, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1})
	require.ErrorIs(t, err, core.ErrStorageFull, "a claim writes its lease: refused too")
	got, err := s.GetJob(ctx, answered[0].ID)
	require.NoError(t, err, "reads go on")
	require.Equal(t, core.StateReady, got.State)

	// Space is freed (here: the jobs purged): writes are taken again.
	js, err := jetstream.New(connectURL(t, srv.URL()))
	require.NoError(t, err)
	st, err := js.Stream(ctx, strings.ToUpper(prefix)+"_QUEUE")
	require.NoError(t, err)
	require.NoError(t, st.Purge(ctx))
	put(t, s, job("t", 0))
}
