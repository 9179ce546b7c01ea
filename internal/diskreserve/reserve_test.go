package diskreserve_test

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/internal/diskreserve"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBundle is a reserve over a real directory whose free space the
// test sets.
type testBundle struct {
	dir  string
	free atomic.Int64
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{dir: t.TempDir()}
	b.free.Store(100 << 20)
	return b
}

func (b *testBundle) open(t *testing.T, size int64) *diskreserve.Reserve {
	t.Helper()
	r, err := diskreserve.Open(diskreserve.Config{
		Dir: b.dir, Size: size, Owner: "test", Logger: slog.New(slog.DiscardHandler),
		UsageFunc: func(string) (diskreserve.Usage, error) {
			return diskreserve.Usage{Avail: b.free.Load(), Total: 100 << 20}, nil
		},
	})
	require.NoError(t, err)
	return r
}

func (b *testBundle) ballast(t *testing.T) int64 {
	t.Helper()
	info, err := os.Stat(filepath.Join(b.dir, diskreserve.BallastName))
	if err != nil {
		require.ErrorIs(t, err, fs.ErrNotExist)
		return -1
	}
	return info.Size()
}

// TestWatch: the ballast is bounded to a tenth of the file system; a free
// space under the low mark releases it and refuses with ErrStorageFull,
// naming the directory; the full state ends at twice the reserve free, at
// the watcher's look, with the ballast made again.
func TestWatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.open(t, 64<<20)
	require.Equal(t, int64(10<<20), r.Size(), "a tenth of the file system")
	require.Equal(t, int64(10<<20), b.ballast(t))
	require.NoError(t, r.Err())

	b.free.Store(6 << 20)
	r.Watch(5 << 20)
	require.False(t, r.Full(), "above the low mark")
	b.free.Store(4 << 20)
	r.Watch(5 << 20)
	require.True(t, r.Full())
	require.Equal(t, int64(-1), b.ballast(t), "released")
	require.ErrorIs(t, r.Err(), core.ErrStorageFull)
	require.ErrorContains(t, r.Err(), b.dir)
	require.ErrorContains(t, r.Err(), "under the low mark")

	b.free.Store(19 << 20)
	r.Watch(5 << 20)
	require.True(t, r.Full(), "less than twice the reserve free")
	b.free.Store(20 << 20)
	r.Refresh(5 << 20)
	require.True(t, r.Full(), "Refresh leaves the end of a full state to Watch")
	b.free.Store(20 << 20)
	r.Watch(5 << 20)
	require.False(t, r.Full())
	require.NoError(t, r.Err())
	require.Equal(t, int64(10<<20), b.ballast(t), "made again")
}

// TestRelease: Release (a write that met ENOSPC) marks the disk full once,
// with its first cause; Check ends it.
func TestRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.open(t, 1<<20)
	b.free.Store(0)
	r.Release("no space left on device")
	r.Release("again")
	require.ErrorContains(t, r.Err(), "(no space left on device)")
	r.Check()
	require.True(t, r.Full())
	b.free.Store(2 << 20)
	r.Check()
	require.False(t, r.Full())
	require.Equal(t, int64(1<<20), b.ballast(t))
}

// TestOpen: a disk with less than twice the reserve free starts full,
// without a ballast; a reserve of 0 deletes the ballast of an earlier
// run.
func TestOpen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.free.Store(1 << 20)
	r := b.open(t, 1<<20)
	require.True(t, r.Full())
	require.Equal(t, int64(-1), b.ballast(t))

	b.free.Store(100 << 20)
	r = b.open(t, 1<<20)
	require.False(t, r.Full())
	require.Equal(t, int64(1<<20), b.ballast(t))
	r = b.open(t, 0)
	require.Equal(t, int64(-1), b.ballast(t))
	require.Zero(t, r.Size())
	r.Watch(1)
	require.False(t, r.Full())
}
