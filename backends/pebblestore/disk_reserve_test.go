package pebblestore_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/backends/pebblestore/disktest"
	"github.com/delayq/delayq/core"
)

// TestDiskFull fills a real 32 MiB tmpfs under a store with pushes of 32
// KiB jobs while a filler file takes 8 MiB of it: the store gives up its
// ballast when a write meets ENOSPC and then refuses puts with
// core.ErrStorageFull, at once, while claims, acks and reads go on; it
// starts again full on the full disk; once the filler is deleted, it makes
// its ballast again and takes puts; every put it answered is there after a
// restart.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const size = 32 << 20
	mnt := disktest.Mount(t, size)
	filler := filepath.Join(mnt, "filler")
	disktest.Fill(t, filler, 8<<20)
	dir := filepath.Join(mnt, "local")
	cfg := pebblestore.Config{Dir: dir, DiskReserve: pebblestore.DiskReserveDefault}
	s, err := pebblestore.Open(cfg)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	ballast := filepath.Join(dir, "DISK_RESERVE")
	info, err := os.Stat(ballast)
	require.NoError(t, err)
	require.Equal(t, int64(size/10), info.Size(), "the reserve is bounded to a tenth of the disk")

	body := make([]byte, 24<<10)
	put := func(id string) error {
		_, _ = rand.Read(body) // incompressible
		_, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{{ID: id, Topic: "t", Body: []byte(base64.StdEncoding.EncodeToString(body)), MaxAttempts: 3, TTR: time.Minute}}})
		return err
	}
	var answered []string
	var refused error
	for n := range 2000 {
		id := core.NewID()
		if refused = put(id); refused != nil {
			out, _ := exec.Command("du", "-a", mnt).CombinedOutput()
			t.Logf("disk full after %d puts; the disk (KiB):\n%s", n, out)
			break
		}
		answered = append(answered, id)
	}
	require.ErrorIs(t, refused, core.ErrStorageFull)
	require.ErrorContains(t, refused, "no space left on device")
	require.True(t, s.DiskFull())
	_, err = os.Stat(ballast)
	require.ErrorIs(t, err, fs.ErrNotExist, "the ballast is released")
	require.ErrorIs(t, s.Ping(ctx), core.ErrStorageFull)
	start := time.Now()
	require.ErrorIs(t, put(core.NewID()), core.ErrStorageFull)
	require.Less(t, time.Since(start), 50*time.Millisecond, "a put on a full disk is refused at once")

	// A schedule's slot makes no job either (the engine then leaves its
	// cursor); a record, such as a schedule, is no job.
	_, err = s.PutRecord(ctx, &core.PutRecordParams{Kind: core.KindSchedule, Name: "every", Value: []byte(`{}`)})
	require.NoError(t, err, "a schedule is no job")
	slot := core.StoreTime(time.Now().Add(-time.Minute))
	fired := &core.Job{ID: core.NewID(), Topic: "t", Body: json.RawMessage(`{}`), RunAt: slot, MaxAttempts: 1, TTR: time.Minute}
	_, err = s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{fired}, IfAbsent: true})
	require.ErrorIs(t, err, core.ErrStorageFull, "a slot's job")
	_, err = s.GetJob(ctx, fired.ID)
	require.ErrorIs(t, err, core.ErrNotFound)

	// Claims, acks and reads go on, into the reserve.
	acked := map[string]bool{}
	jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "t", Max: 100})
	require.NoError(t, err)
	require.NotEmpty(t, jobs)
	acks := make([]core.AckJobParams, len(jobs))
	for k, j := range jobs {
		acks[k] = core.AckJobParams{ID: j.ID, Lease: j.Lease}
		acked[j.ID] = true
	}
	res, err := s.AckJobs(ctx, &core.AckJobsParams{Acks: acks})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	got, err := s.GetJob(ctx, answered[len(answered)-1])
	require.NoError(t, err)
	require.NotEmpty(t, got.Body)

	// A restart on the full disk: Open flushes the write-ahead log into
	// tables, so it either opens, full, with every job, or, when the log
	// is larger than the space left, refuses at once saying so; it never
	// waits for space.
	require.NoError(t, s.Close())
	opened := make(chan error, 1)
	go func() {
		var err error
		s, err = pebblestore.Open(cfg)
		opened <- err
	}()
	select {
	case err = <-opened:
	case <-time.After(20 * time.Second):
		t.Fatal("Open on a full disk hangs")
	}
	if err != nil {
		t.Logf("Open on the full disk: %v", err)
		require.ErrorIs(t, err, core.ErrStorageFull)
		require.ErrorContains(t, err, "free space, then start again")
		require.NoError(t, os.Remove(filler))
		s, err = pebblestore.Open(cfg)
		require.NoError(t, err)
	} else {
		require.True(t, s.DiskFull(), "a disk without room for the reserve starts full")
		require.ErrorIs(t, put(core.NewID()), core.ErrStorageFull)
		checkJobs(t, s, answered, acked)
		require.NoError(t, os.Remove(filler))
	}

	// Space came back: the ballast first, then puts.
	deadline := time.Now().Add(10 * time.Second)
	for s.DiskFull() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // the store checks the disk every second
	}
	require.False(t, s.DiskFull(), "the store takes puts again once space is freed")
	require.NoError(t, s.Ping(ctx))
	info, err = os.Stat(ballast)
	require.NoError(t, err)
	require.Equal(t, int64(size/10), info.Size())
	id := core.NewID()
	require.NoError(t, put(id))
	answered = append(answered, id)

	require.NoError(t, s.Close())
	s, err = pebblestore.Open(cfg)
	require.NoError(t, err)
	require.False(t, s.DiskFull())
	checkJobs(t, s, answered, acked)
}

// checkJobs requires every answered job in s: done when acked, else
// ready.
func checkJobs(t *testing.T, s *pebblestore.Store, answered []string, acked map[string]bool) {
	t.Helper()
	for _, id := range answered {
		j, err := s.GetJob(context.Background(), id)
		require.NoError(t, err, id)
		want := core.StateReady
		if acked[id] {
			want = core.StateDone
		}
		require.Equal(t, want, j.State, id)
	}
}

// TestDiskReserveOff: without a reserve, a ballast an earlier run left is
// deleted.
func TestDiskReserveOff(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "local")
	s, err := pebblestore.Open(pebblestore.Config{Dir: dir, DiskReserve: 1 << 20})
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(dir, "DISK_RESERVE"))
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), info.Size())
	require.NoError(t, s.Close())
	s, err = pebblestore.Open(pebblestore.Config{Dir: dir})
	require.NoError(t, err)
	defer s.Close()
	_, err = os.Stat(filepath.Join(dir, "DISK_RESERVE"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.False(t, s.DiskFull())
	require.NoError(t, s.Ping(context.Background()))
}
