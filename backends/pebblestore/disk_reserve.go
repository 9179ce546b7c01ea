package pebblestore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/delayq/delayq/core"
)

// The disk reserve (see the package doc, A full disk). Pebble cannot go on
// after a write of its write-ahead log or manifest fails: the log keeps
// the error and fails every later write, and Pebble panics at its next log
// rotation or manifest write. So no such write may meet ENOSPC: the
// ballast is given up first, and puts stop.

const (
	// DiskReserveDefault is the reserve delayq serve keeps by default
	// (--disk-reserve): enough for hours of acks at thousands a second,
	// and for Pebble to flush a full memtable.
	DiskReserveDefault = 64 << 20
	// diskReserveFraction bounds the reserve to a part of the file system,
	// so that a small disk is not mostly ballast.
	diskReserveFraction = 10
	// ballastName is the ballast file in Config.Dir. Pebble ignores files
	// whose names it does not know.
	ballastName = "DISK_RESERVE"
	// diskCheckInterval is how often a full store checks the free space.
	diskCheckInterval = time.Second
)

// diskReserve is the ballast of a store and whether its disk is full.
type diskReserve struct {
	dir  string
	path string // of the ballast
	size int64  // of the ballast; 0: none
	log  *slog.Logger
	full atomic.Bool
	// mu makes the ballast's deletion (in Pebble's callback) and its
	// creation (by the check) one at a time.
	mu sync.Mutex
	// fullAt is when the disk filled, in unix nanoseconds.
	fullAt atomic.Int64
}

// openReserve makes the ballast of size bytes (at most a tenth of the file
// system) in dir, or deletes one left by an earlier run when size is 0. A
// disk with less than twice the reserve free starts full.
func openReserve(dir string, size int64, log *slog.Logger) (*diskReserve, error) {
	r := &diskReserve{dir: dir, path: filepath.Join(dir, ballastName), log: log}
	if size <= 0 {
		if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("pebblestore: disk reserve: %w", err)
		}
		return r, nil
	}
	usage, err := vfs.Default.GetDiskUsage(dir)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: disk reserve: %w", err)
	}
	if limit := int64(usage.TotalBytes / diskReserveFraction); size > limit {
		log.Info("pebblestore: disk reserve bounded to a tenth of the file system", "dir", dir,
			"asked", size, "reserve", limit)
		size = limit
	}
	r.size = size
	if info, err := os.Stat(r.path); err == nil && info.Size() == size {
		return r, nil
	}
	// Missing, or of another size (the setting changed): made anew, the
	// old one's space counted as free.
	if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pebblestore: disk reserve: %w", err)
	}
	if usage, err = vfs.Default.GetDiskUsage(dir); err != nil {
		return nil, fmt.Errorf("pebblestore: disk reserve: %w", err)
	}
	if int64(usage.AvailBytes) < 2*size {
		r.markFull("starting on a disk with less than twice the reserve free", int64(usage.AvailBytes))
		return r, nil
	}
	if err := r.makeBallast(); err != nil {
		return nil, fmt.Errorf("pebblestore: disk reserve: %w", err)
	}
	return r, nil
}

// onDiskFull is Pebble's disk-full callback: it deletes the ballast, so
// that the write that failed succeeds when tried again, and marks the
// store full. Pebble holds every write until it returns.
func (r *diskReserve) onDiskFull() {
	r.mu.Lock()
	defer r.mu.Unlock()
	released := false
	if r.size > 0 {
		err := os.Remove(r.path)
		released = err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.log.Error("pebblestore: disk full and the reserve could not be released", "path", r.path, "err", err)
		}
	}
	if !r.full.Load() {
		r.fullAt.Store(time.Now().UnixNano())
		r.full.Store(true)
		r.log.Error("pebblestore: disk full: new jobs are refused until space is freed; claims, acks and reads go on",
			"dir", r.dir, "reserve_released", released, "reserve", r.size)
	}
}

// markFull marks the store full for why, with free bytes available.
func (r *diskReserve) markFull(why string, free int64) {
	r.fullAt.Store(time.Now().UnixNano())
	r.full.Store(true)
	r.log.Error("pebblestore: disk full: new jobs are refused until space is freed; claims, acks and reads go on",
		"dir", r.dir, "why", why, "free", free, "reserve", r.size)
}

// err returns core.ErrStorageFull, wrapped, while the disk is full.
func (r *diskReserve) err() error {
	if !r.full.Load() {
		return nil
	}
	return fmt.Errorf("pebblestore: disk of %s full (no space left on device): %w", r.dir, core.ErrStorageFull)
}

// check ends a full state once the disk has twice the reserve free (at
// least diskFreeMin without a reserve): it makes the ballast again first.
func (r *diskReserve) check() {
	if !r.full.Load() {
		return
	}
	usage, err := vfs.Default.GetDiskUsage(r.dir)
	if err != nil {
		r.log.Warn("pebblestore: free space unknown", "dir", r.dir, "err", err)
		return
	}
	need := 2 * r.size
	if r.size <= 0 {
		need = diskFreeMin
	}
	if int64(usage.AvailBytes) < need {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size > 0 {
		if err := r.makeBallast(); err != nil {
			r.log.Warn("pebblestore: disk reserve not made again; still full", "path", r.path, "err", err)
			return
		}
	}
	r.full.Store(false)
	r.log.Info("pebblestore: disk space back: new jobs are taken again", "dir", r.dir,
		"free", usage.AvailBytes, "full_for", time.Since(time.Unix(0, r.fullAt.Load())).Round(time.Millisecond))
}

// checkReplay refuses to open a store whose write-ahead log the disk has
// no room to replay: Open flushes the log into tables before it returns,
// and Pebble would retry that flush for ever on a full disk. The ballast
// counts as free (the flush releases it); every log file counts, so it
// may ask for more than the replay takes.
func (r *diskReserve) checkReplay() error {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	var logs int64
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".log" {
			continue
		}
		if info, err := e.Info(); err == nil {
			logs += info.Size()
		}
	}
	usage, err := vfs.Default.GetDiskUsage(r.dir)
	if err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	free := int64(usage.AvailBytes)
	if !r.full.Load() {
		free += r.size
	}
	if free < logs {
		return fmt.Errorf("pebblestore: open %s: disk full (no space left on device): %d bytes free, and replaying the write-ahead log takes up to %d: free space, then start again (no job is lost): %w",
			r.dir, free, logs, core.ErrStorageFull)
	}
	return nil
}

// memTableSize bounds Pebble's memtable, size, by the reserve: a full
// memtable is flushed into a table as large, and a full disk has the
// reserve for it; so has a restart, which flushes what the log holds.
// Without a reserve it is size.
func (r *diskReserve) memTableSize(size uint64) uint64 {
	if r.size <= 0 {
		return size
	}
	return min(size, uint64(max(r.size, 1<<20)))
}

// diskFreeMin is the free space that ends a full state without a reserve.
const diskFreeMin = 64 << 20

// makeBallast writes the ballast, its blocks allocated, and syncs it; a
// ballast it could not finish is deleted.
func (r *diskReserve) makeBallast() error {
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

// isDiskFull reports whether err is the file system's ENOSPC.
func isDiskFull(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// watchDisk runs until Close: while the disk is full it checks every
// diskCheckInterval whether space came back.
func (s *Store) watchDisk() {
	defer s.background.Done()
	tick := s.clock.NewTicker(diskCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.Chan():
		}
		s.reserve.check()
	}
}

// DiskFull reports whether the store's disk is full: puts are refused
// until space is freed (see the package doc, A full disk).
func (s *Store) DiskFull() bool { return s.reserve.full.Load() }
