package pebblestore

import (
	"bytes"
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

var _ core.BodyRewriter = (*Store)(nil)

// RewriteBody implements core.BodyRewriter: under s.mu, which every
// change of a job holds, it reads the job and writes its record (what a
// put sets, the body with it) again with the new body, synced before it
// returns; the job's state keys are not written. Errors: ErrNotFound,
// ErrConflict, ErrClosed, ErrStorageFull while the disk is full,
// ErrUnavailable.
func (s *Store) RewriteBody(_ context.Context, params *core.RewriteBodyParams) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if err := s.reserve.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	j, err := s.read(params.ID, true)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if !bytes.Equal(j.Body, params.Old) {
		s.mu.Unlock()
		return core.BodyChangedConflict(params.ID)
	}
	r, err := recordOf(j)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	r.body = params.Body
	b := s.db.NewBatch()
	_ = b.Set(idKey(prefixRecord, params.ID), r.encode(), nil)
	wait := s.write(b, pebble.Sync)
	s.mu.Unlock()
	return wait()
}
