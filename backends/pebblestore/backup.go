package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

var _ core.Checkpointer = (*Store)(nil)

// Checkpoint implements core.Checkpointer: it writes into dir, which must
// not exist yet, a Pebble checkpoint of the store, a directory that Open
// opens as it is (Config.Dir), while the store goes on serving.
//
// Pebble first syncs its write-ahead log (so that the claims, acks and
// other writes that did not wait for their sync are in it too), then
// hard-links the tables, which never change once written, and copies the
// log and the manifest: the checkpoint holds every write answered before
// the call, and any later one whole or not at all, in the order the
// store made them. On another file system than Config.Dir's the tables
// are copied. dir is made with mode 0700; its parent should be readable
// by the service's user alone, as Config.Dir's is, since Pebble makes dir
// world-readable for a moment before that.
//
// Errors: ctx's before it began (the checkpoint itself does not stop
// for it), core.ErrClosed, fs.ErrExist when dir exists, and those of the
// file system, which are not core.ErrUnavailable: a failed checkpoint
// says nothing of the store's health. A checkpoint that failed leaves no
// dir behind (a dir that existed is left as it was).
func (s *Store) Checkpoint(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Close waits for the checkpoint to end before it closes the database.
	s.ops.RLock()
	defer s.ops.RUnlock()
	if s.isClosed() {
		return core.ErrClosed
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("pebblestore: checkpoint into %s: %w", dir, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pebblestore: checkpoint into %s: %w", dir, err)
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		if errors.Is(err, pebble.ErrClosed) {
			return core.ErrClosed
		}
		// Pebble removes what it made of dir when it fails.
		return fmt.Errorf("pebblestore: checkpoint into %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("pebblestore: checkpoint into %s: %w", dir, err)
	}
	return nil
}
