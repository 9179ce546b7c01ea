package natsstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// The disk reserve (see "A full disk" in the package doc). nats-server's
// file store keeps the first write error it meets for good (a "Critical
// write error": every later write of the stream fails until a restart),
// and it offers no hook before its writes fail, so the store releases its
// ballast while some space is still free.

const (
	// diskWatchInterval is how often the store reads the free space of
	// Config.DiskDir: statfs is cheap, and the writes no call looks
	// before (acks, the server's own) between two looks must fit under the
	// low mark.
	diskWatchInterval = 100 * time.Millisecond
	// diskLowDivisor sets the low mark, the free space under which the
	// ballast is released: the reserve divided by it. Half of the default
	// 64 MiB holds the writes in flight when a put looks, a compaction,
	// and 320 MiB/s of the others between two looks.
	diskLowDivisor = 2
	// diskReserveMin is the least reserve New does not warn of: nats-server
	// writes a stream in blocks of 4 MiB and a compaction rewrites up to
	// half of one into a new file, which the low mark must hold besides
	// the writes in flight.
	diskReserveMin = 16 << 20
)

// watchDisk runs until Close, looking at the disk every
// diskWatchInterval. Real time, not Config.Clock: it watches what the
// server writes, which a fake clock does not hold back.
func (s *Store) watchDisk() {
	defer s.wg.Done()
	tick := time.NewTicker(diskWatchInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		s.lookAtDisk()
	}
}

// lookAtDisk is one look of watchDisk: under the low mark the ballast is
// released and the store full; while full, twice the reserve free ends it.
func (s *Store) lookAtDisk() { s.disk.Watch(s.diskLow()) }

// diskLow is the low mark, in bytes of free space.
func (s *Store) diskLow() int64 { return s.disk.Size() / diskLowDivisor }

// recordOverhead bounds what a job's message takes on disk beyond its
// payload and subject: headers and the file store's framing.
const recordOverhead = 512

// claimBudget returns how many bytes a claim may have written, -1 for no
// bound. While the disk is full, every claim and ack writes into the
// space the ballast gave back, and nats-server frees the messages they
// replace only block by block: a claim takes only the jobs whose lease,
// and the done message of their ack, fit above the low mark, read afresh,
// so that the writes of claims made stop there and the acks of the jobs
// claimed still find room. Errors: the file system's, as ErrStorageFull.
func (s *Store) claimBudget() (int64, error) {
	if s.disk == nil {
		return -1, nil
	}
	if s.disk.Refresh(s.diskLow()); !s.disk.Full() {
		return -1, nil
	}
	usage, err := s.disk.Usage()
	if err != nil {
		return 0, fmt.Errorf("natsstore: claim: free space of %s unknown while the disk is full: %w: %w", s.disk.Dir(), core.ErrStorageFull, err)
	}
	return max(usage.Avail-s.diskLow(), 0), nil
}

// spent is the error of a claim refused because the reserve is spent.
func (s *Store) spent() error {
	return fmt.Errorf("natsstore: claim: disk of %s full and its reserve spent down to the low mark (%d bytes): claims wait for free space, acks go on: %w",
		s.disk.Dir(), s.diskLow(), core.ErrStorageFull)
}

// diskErr returns core.ErrStorageFull, wrapped with the directory, while
// the disk is full; nil otherwise, and always without a reserve.
func (s *Store) diskErr() error {
	if s.disk == nil {
		return nil
	}
	return s.disk.Err()
}

// admit is diskErr after a fresh look at the free space, for a call that
// adds jobs: the watcher's look may be up to diskWatchInterval old, and
// intake on a fast disk writes more than the low mark in that time
// (measured on tmpfs: 3.7 MiB in one interval), so each such call looks
// itself (statfs: microseconds) and only the writes in flight at once
// count against the mark.
func (s *Store) admit() error {
	if s.disk == nil {
		return nil
	}
	s.disk.Refresh(s.diskLow())
	return s.disk.Err()
}

// DiskFull reports whether the store's disk is full (Config.DiskReserve):
// new jobs are refused until space is freed.
func (s *Store) DiskFull() bool { return s.disk != nil && s.disk.Full() }

// JetStream's answers to a write beyond a storage limit: the server's
// (max_file_store) and the account's (max_file).
const (
	jsErrInsufficientResources    jetstream.ErrorCode = 10023
	jsErrStorageResourcesExceeded jetstream.ErrorCode = 10047
)

// isStorageLimit reports whether err is JetStream refusing a write at a
// storage limit: it answers, and takes writes again once space is freed.
func isStorageLimit(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jsErrInsufficientResources || apiErr.ErrorCode == jsErrStorageResourcesExceeded)
}

// storageFull wraps a write refused at a storage limit.
func storageFull(op string, err error) error {
	return fmt.Errorf("natsstore: %s: JetStream's storage limit reached (the server's max_file_store or the account's): %w: %w", op, core.ErrStorageFull, err)
}
