package pebblestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// The release before records kept schedules and topic configurations in
// keys of their own; core.MigrateSchedules and core.MigrateTopics move them
// to records. The next release drops this file.
const (
	// prefixSchedule keys a schedule with its cursor (JSON): S<name>.
	prefixSchedule = 'S'
	// prefixTopic keys a topic's configuration (JSON): t<name>.
	prefixTopic = 't'
)

var (
	_ core.LegacySchedules = (*Store)(nil)
	_ core.LegacyTopics    = (*Store)(nil)
)

// LegacySchedules implements core.LegacySchedules: the S keys, in name
// order. Errors: ErrClosed, ErrUnavailable.
func (s *Store) LegacySchedules(context.Context) ([]*core.Schedule, error) {
	return readLegacy(s, prefixSchedule, "schedule", func(*core.Schedule, string) {})
}

// DropLegacySchedules implements core.LegacySchedules: one synced batch.
// Errors: ErrClosed, ErrUnavailable.
func (s *Store) DropLegacySchedules(_ context.Context, names []string) error {
	return s.dropLegacy(prefixSchedule, names)
}

// LegacyTopics implements core.LegacyTopics: the t keys, in name order.
// Errors: ErrClosed, ErrUnavailable.
func (s *Store) LegacyTopics(context.Context) ([]*core.Topic, error) {
	return readLegacy(s, prefixTopic, "topic", func(t *core.Topic, name string) { t.Name = name })
}

// DropLegacyTopics implements core.LegacyTopics: one synced batch. Errors:
// ErrClosed, ErrUnavailable.
func (s *Store) DropLegacyTopics(_ context.Context, names []string) error {
	return s.dropLegacy(prefixTopic, names)
}

// readLegacy decodes every value under prefix, in name order, each given
// its name by named.
func readLegacy[T any](s *Store, prefix byte, what string, named func(*T, string)) ([]*T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	out := []*T{}
	err := s.scan(prefix, func(k, v []byte) error {
		var x T
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("pebblestore: %s %q: %w", what, k[1:], errCorrupt)
		}
		named(&x, string(k[1:]))
		out = append(out, &x)
		return nil
	})
	return out, err
}

// dropLegacy deletes the named keys under prefix in one synced batch.
func (s *Store) dropLegacy(prefix byte, names []string) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	b := s.db.NewBatch()
	for _, name := range names {
		_ = b.Delete(idKey(prefix, name), nil)
	}
	wait := s.write(b, pebble.Sync)
	s.mu.Unlock()
	return wait()
}
