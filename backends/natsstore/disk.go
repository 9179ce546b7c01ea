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
	// Config.DiskDir: statfs is cheap, and what intake writes between two
	// looks must fit under the low mark.
	diskWatchInterval = 100 * time.Millisecond
	// diskLowDivisor sets the low mark, the free space under which the
	// ballast is released: the reserve divided by it. Half of the default
	// 64 MiB covers writes of 320 MiB/s between two looks.
	diskLowDivisor = 2
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
func (s *Store) lookAtDisk() { s.disk.Watch(s.disk.Size() / diskLowDivisor) }

// diskErr returns core.ErrStorageFull, wrapped with the directory, while
// the disk is full; nil otherwise, and always without a reserve.
func (s *Store) diskErr() error {
	if s.disk == nil {
		return nil
	}
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
