package pebblestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// prefixTopic keys a topic's configuration (JSON) as the release before
// topic records kept it: t<name>. core.MigrateTopics moves them to
// records; the next release drops this file.
const prefixTopic = 't'

var _ core.LegacyTopics = (*Store)(nil)

// LegacyTopics implements core.LegacyTopics: the t keys, in name order.
// Errors: ErrClosed, ErrUnavailable.
func (s *Store) LegacyTopics(context.Context) ([]*core.Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	out := []*core.Topic{}
	err := s.scan(prefixTopic, func(k, v []byte) error {
		var t core.Topic
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("pebblestore: topic %q: %w", k[1:], errCorrupt)
		}
		t.Name = string(k[1:])
		out = append(out, &t)
		return nil
	})
	return out, err
}

// DropLegacyTopics implements core.LegacyTopics: one synced batch.
// Errors: ErrClosed, ErrUnavailable.
func (s *Store) DropLegacyTopics(_ context.Context, names []string) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	b := s.db.NewBatch()
	for _, name := range names {
		_ = b.Delete(idKey(prefixTopic, name), nil)
	}
	wait := s.write(b, pebble.Sync)
	s.mu.Unlock()
	return wait()
}
