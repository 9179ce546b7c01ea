package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/internal/diskreserve"
)

// The disk reserve (see the package doc, A full disk). Pebble cannot go on
// after a write of its write-ahead log or manifest fails: the log keeps
// the error and fails every later write, and Pebble panics at its next log
// rotation or manifest write. So no such write may meet ENOSPC: the
// ballast (internal/diskreserve, which natsstore shares) is given up
// first, and puts stop.

// DiskReserveDefault is the reserve delayq serve keeps by default
// (--disk-reserve): enough for hours of acks at thousands a second, and
// for Pebble to flush a full memtable.
const DiskReserveDefault = 64 << 20

// diskCheckInterval is how often a full store checks the free space.
const diskCheckInterval = time.Second

// diskReserve is the ballast of a store and whether its disk is full.
type diskReserve struct{ *diskreserve.Reserve }

// openReserve makes the ballast of size bytes (at most a tenth of the file
// system) in dir, or deletes one left by an earlier run when size is 0. A
// disk with less than twice the reserve free starts full.
func openReserve(dir string, size int64, log *slog.Logger) (*diskReserve, error) {
	r, err := diskreserve.Open(diskreserve.Config{Dir: dir, Size: size, Owner: "pebblestore", Logger: log})
	if err != nil {
		return nil, err
	}
	return &diskReserve{r}, nil
}

// onDiskFull is Pebble's disk-full callback: it deletes the ballast, so
// that the write that failed succeeds when tried again, and marks the
// store full. Pebble holds every write until it returns.
func (r *diskReserve) onDiskFull() { r.Release("no space left on device") }

// checkReplay refuses to open a store whose write-ahead log the disk has
// no room to replay: Open flushes the log into tables before it returns,
// and Pebble would retry that flush for ever on a full disk. The ballast
// counts as free (the flush releases it); every log file counts, so it
// may ask for more than the replay takes.
func (r *diskReserve) checkReplay() error {
	entries, err := os.ReadDir(r.Dir())
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
	usage, err := r.Usage()
	if err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	free := usage.Avail
	if !r.Full() {
		free += r.Size()
	}
	if free < logs {
		return fmt.Errorf("pebblestore: open %s: disk full (no space left on device): %d bytes free, and replaying the write-ahead log takes up to %d: free space, then start again (no job is lost): %w",
			r.Dir(), free, logs, core.ErrStorageFull)
	}
	return nil
}

// memTableSize bounds Pebble's memtable, size, by the reserve: a full
// memtable is flushed into a table as large, and a full disk has the
// reserve for it; so has a restart, which flushes what the log holds.
// Without a reserve it is size.
func (r *diskReserve) memTableSize(size uint64) uint64 {
	if r.Size() <= 0 {
		return size
	}
	return min(size, uint64(max(r.Size(), 1<<20)))
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
		s.reserve.Check()
	}
}

// DiskFull reports whether the store's disk is full: puts are refused
// until space is freed (see the package doc, A full disk).
func (s *Store) DiskFull() bool { return s.reserve.Full() }
