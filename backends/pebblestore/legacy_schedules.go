package pebblestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// prefixSchedule keys a schedule with its cursor (JSON) as the release
// before records kept it: S<name>. core.MigrateSchedules moves them to
// records; the next release drops this file.
const prefixSchedule = 'S'

var _ core.LegacySchedules = (*Store)(nil)

// LegacySchedules implements core.LegacySchedules: the S keys, in name
// order. Errors: ErrClosed, ErrUnavailable.
func (s *Store) LegacySchedules(context.Context) ([]*core.Schedule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	out := []*core.Schedule{}
	err := s.scan(prefixSchedule, func(k, v []byte) error {
		var sc core.Schedule
		if err := json.Unmarshal(v, &sc); err != nil {
			return fmt.Errorf("pebblestore: schedule %q: %w", k[1:], errCorrupt)
		}
		out = append(out, &sc)
		return nil
	})
	return out, err
}

// DropLegacySchedules implements core.LegacySchedules: one synced batch.
// Errors: ErrClosed, ErrUnavailable.
func (s *Store) DropLegacySchedules(_ context.Context, names []string) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	b := s.db.NewBatch()
	for _, name := range names {
		_ = b.Delete(idKey(prefixSchedule, name), nil)
	}
	wait := s.write(b, pebble.Sync)
	s.mu.Unlock()
	return wait()
}
