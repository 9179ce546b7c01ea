package diskreserve

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/delayq/delayq/core"
)

const (
	// BallastName is the ballast file in Config.Dir. Pebble and
	// nats-server ignore files whose names they do not know.
	BallastName = "DISK_RESERVE"
	// fraction bounds the reserve to a part of the file system, so that a
	// small disk is not mostly ballast.
	fraction = 10
	// FreeMin is the free space that ends a full state without a reserve.
	FreeMin = 64 << 20
)

// Usage is the space of a file system, in bytes.
type Usage struct {
	// Avail is what the store's writes may still take (statfs' f_bavail);
	// the ballast is not in it.
	Avail int64
	// Total is the size of the file system.
	Total int64
}

// UsageFunc reads the space of the file system that holds dir.
type UsageFunc func(dir string) (Usage, error)

// Statfs is the UsageFunc of the real file system.
func Statfs(dir string) (Usage, error) {
	u, err := vfs.Default.GetDiskUsage(dir)
	if err != nil {
		return Usage{}, err
	}
	return Usage{Avail: int64(u.AvailBytes), Total: int64(u.TotalBytes)}, nil
}

// Config configures a Reserve.
type Config struct {
	// Dir is the directory of the ballast, on the file system of the
	// store's files. Required; it must exist.
	Dir string
	// Size is the size of the ballast; at most a tenth of the file system
	// is kept. Zero: no ballast (one an earlier run left is deleted), and a
	// full state ends at FreeMin free.
	Size int64
	// Owner names the store in log records and errors ("pebblestore").
	Owner string
	// Logger receives the full and back records. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// UsageFunc reads the free space. Defaults to Statfs; tests fake it.
	UsageFunc UsageFunc
}

// Reserve is a store's ballast and whether its disk is full. Its methods
// are safe for concurrent use.
type Reserve struct {
	dir   string
	path  string // of the ballast
	size  int64  // of the ballast; 0: none
	owner string
	log   *slog.Logger
	usage UsageFunc
	full  atomic.Bool
	// mu makes the ballast's release and its making one at a time.
	mu sync.Mutex
	// why says what made the disk full, for Err.
	why atomic.Pointer[string]
	// fullAt is when the disk filled, in unix nanoseconds.
	fullAt atomic.Int64
	// blind is set while the free space cannot be read, so that a failing
	// statfs is logged once, not at every check.
	blind atomic.Bool
}

// Open makes the ballast of cfg.Size bytes (at most a tenth of the file
// system) in cfg.Dir, or deletes one an earlier run left when cfg.Size is
// 0. A ballast of the right size is kept as it is; one of another size is
// made anew, its space counted as free. A disk with less than twice the
// reserve free starts full. Errors: the file system's.
func Open(cfg Config) (*Reserve, error) {
	r := &Reserve{
		dir:   cfg.Dir,
		path:  filepath.Join(cfg.Dir, BallastName),
		owner: cfg.Owner,
		log:   cmp.Or(cfg.Logger, slog.Default()),
		usage: cfg.UsageFunc,
	}
	if r.usage == nil {
		r.usage = Statfs
	}
	fail := func(err error) (*Reserve, error) {
		return nil, fmt.Errorf("%s: disk reserve: %w", r.owner, err)
	}
	if cfg.Size <= 0 {
		if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(err)
		}
		return r, nil
	}
	size := cfg.Size
	usage, err := r.usage(r.dir)
	if err != nil {
		return fail(err)
	}
	if limit := usage.Total / fraction; size > limit {
		r.log.Info(r.owner+": disk reserve bounded to a tenth of the file system", "dir", r.dir,
			"asked", size, "reserve", limit)
		size = limit
	}
	r.size = size
	if info, err := os.Stat(r.path); err == nil && info.Size() == size {
		return r, nil
	}
	if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	if usage, err = r.usage(r.dir); err != nil {
		return fail(err)
	}
	if usage.Avail < 2*size {
		r.markFull("less than twice the reserve free at start", usage.Avail)
		return r, nil
	}
	if err := r.makeBallast(); err != nil {
		return fail(err)
	}
	return r, nil
}

// Size returns the size of the ballast, bounded: 0 without one.
func (r *Reserve) Size() int64 { return r.size }

// Dir returns the directory of the ballast.
func (r *Reserve) Dir() string { return r.dir }

// Full reports whether the disk is full: new jobs are refused.
func (r *Reserve) Full() bool { return r.full.Load() }

// Err returns core.ErrStorageFull, wrapped with the directory and the
// cause, while the disk is full; nil otherwise.
func (r *Reserve) Err() error {
	if !r.full.Load() {
		return nil
	}
	why := "no space left on device"
	if p := r.why.Load(); p != nil {
		why = *p
	}
	return fmt.Errorf("%s: disk of %s full (%s): %w", r.owner, r.dir, why, core.ErrStorageFull)
}

// Usage reads the space of the ballast's file system.
func (r *Reserve) Usage() (Usage, error) { return r.usage(r.dir) }

// Release deletes the ballast, so that the writes that finish jobs find
// room, and marks the disk full for why (a short cause, for Err and the
// log). Idempotent: a full disk stays full, its first cause kept.
func (r *Reserve) Release(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	released := false
	if r.size > 0 {
		err := os.Remove(r.path)
		released = err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.log.Error(r.owner+": disk full and the reserve could not be released", "path", r.path, "err", err)
		}
	}
	if r.full.Load() {
		return
	}
	r.why.Store(&why)
	r.fullAt.Store(time.Now().UnixNano())
	r.full.Store(true)
	r.log.Error(r.owner+": disk full: new jobs are refused until space is freed; claims, acks and reads go on",
		"dir", r.dir, "why", why, "reserve_released", released, "reserve", r.size)
}

// markFull marks the disk full for why, with free bytes available; the
// ballast is not there.
func (r *Reserve) markFull(why string, free int64) {
	r.why.Store(&why)
	r.fullAt.Store(time.Now().UnixNano())
	r.full.Store(true)
	r.log.Error(r.owner+": disk full: new jobs are refused until space is freed; claims, acks and reads go on",
		"dir", r.dir, "why", why, "free", free, "reserve", r.size)
}

// Check ends a full state once the disk has twice the reserve free (at
// least FreeMin without a reserve): it makes the ballast again first, and
// stays full if it cannot. It does nothing while the disk is not full.
func (r *Reserve) Check() {
	if !r.full.Load() {
		return
	}
	usage, ok := r.read()
	if !ok {
		return
	}
	need := 2 * r.size
	if r.size <= 0 {
		need = FreeMin
	}
	if usage.Avail < need {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size > 0 {
		if err := r.makeBallast(); err != nil {
			r.log.Warn(r.owner+": disk reserve not made again; still full", "path", r.path, "err", err)
			return
		}
	}
	r.full.Store(false)
	r.log.Info(r.owner+": disk space back: new jobs are taken again", "dir", r.dir,
		"free", usage.Avail, "full_for", time.Since(time.Unix(0, r.fullAt.Load())).Round(time.Millisecond))
}

// Watch is one look at the disk by a store that cannot be told of ENOSPC
// before its writes fail: while the disk is not full, a free space under
// low releases the ballast (Refresh); while it is full, Check. low must
// exceed what the store's writes can take between two looks.
func (r *Reserve) Watch(low int64) {
	if r.full.Load() {
		r.Check()
		return
	}
	r.Refresh(low)
}

// Refresh reads the free space now, unless the disk is full, and
// releases the ballast when it is under low: a store calls it before a
// write that adds jobs, so that how fast they come does not matter, only
// how many bytes are being written at once.
func (r *Reserve) Refresh(low int64) {
	if r.full.Load() {
		return
	}
	usage, ok := r.read()
	if !ok || usage.Avail >= low {
		return
	}
	r.Release(fmt.Sprintf("%d bytes free, under the low mark of %d bytes", usage.Avail, low))
}

// read reads the free space, logging a failure once until a read
// succeeds again.
func (r *Reserve) read() (Usage, bool) {
	usage, err := r.usage(r.dir)
	if err != nil {
		if !r.blind.Swap(true) {
			r.log.Warn(r.owner+": free space unknown", "dir", r.dir, "err", err)
		}
		return Usage{}, false
	}
	r.blind.Store(false)
	return usage, true
}

// makeBallast writes the ballast, its blocks allocated, and syncs it; a
// ballast it could not finish is deleted.
func (r *Reserve) makeBallast() error {
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = allocate(f, r.size)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		_ = os.Remove(r.path)
	}
	return err
}

// writeZeros allocates size bytes of f by writing them, where the file
// system cannot allocate without writing.
func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := min(size, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		size -= n
	}
	return nil
}
