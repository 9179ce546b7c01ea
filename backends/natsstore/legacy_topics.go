package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// keyConfig + topic, in the topic bucket: the topic's configuration (JSON)
// as the release before topic records kept it. core.MigrateTopics moves
// them to records; the next release drops this file.
const keyConfig = "cfg."

var _ core.LegacyTopics = (*Store)(nil)

// LegacyTopics implements core.LegacyTopics: the cfg. keys. Errors:
// ErrClosed, ErrUnavailable.
func (s *Store) LegacyTopics(ctx context.Context) ([]*core.Topic, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	names, err := s.keyNames(ctx, keyConfig, "legacy topics")
	if err != nil {
		return nil, err
	}
	list := make([]*core.Topic, len(names))
	err = s.each(ctx, len(names), func(i int) error {
		t, err := s.legacyTopic(ctx, names[i])
		list[i] = t
		return err
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(t *core.Topic) bool { return t == nil }), nil
}

// legacyTopic reads a topic's configuration; nil when it is gone.
func (s *Store) legacyTopic(ctx context.Context, name string) (*core.Topic, error) {
	e, err := s.kv.Get(ctx, keyConfig+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("get legacy topic", err)
	}
	var t core.Topic
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return nil, fmt.Errorf("natsstore: topic %q: bad record: %w", name, err)
	}
	t.Name = name
	return &t, nil
}

// DropLegacyTopics implements core.LegacyTopics: the cfg. keys, purged.
// Errors: ErrClosed, ErrUnavailable.
func (s *Store) DropLegacyTopics(ctx context.Context, names []string) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	for _, name := range names {
		if err := s.kv.Purge(ctx, keyConfig+name); err != nil {
			return unavailable("drop legacy topics", err)
		}
	}
	return nil
}
