// Package diskreserve keeps free space in reserve for a store whose files
// must never meet a full disk (ENOSPC): a ballast file of Config.Size
// bytes, its blocks allocated, in the store's directory, at most a tenth
// of the file system. When the disk fills, the store releases it
// (Reserve.Release) and is full: it refuses new jobs (Reserve.Err is
// core.ErrStorageFull) while the writes that finish jobs go on in the space
// the ballast gave back. Reserve.Check ends the full state once the disk
// has twice the reserve free again, the ballast made again first.
//
// A store learns that the disk is full in one of two ways:
//
//   - pebblestore is told by Pebble's vfs.OnDiskFull, the first write that
//     met ENOSPC, which is tried again after the release;
//   - natsstore, whose nats-server offers no such hook and keeps a failed
//     write's error for good, asks the file system every 100 ms
//     (Reserve.Watch) and before each call that adds jobs
//     (Reserve.Refresh), and releases the ballast while some free space is
//     still left, so that nats-server never meets ENOSPC.
//
// Both stores share this package so that the ballast, its bound, and the
// check that ends a full state are written once.
package diskreserve
