package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/delayq/delayq/core"
)

// The release before topic records kept topic configurations in
// {P}:topics (topic -> configuration JSON). core.MigrateTopics moves them
// to records; the next release drops this file.

var _ core.LegacyTopics = (*Store)(nil)

// LegacyTopics implements core.LegacyTopics. Errors: ErrClosed,
// ErrUnavailable.
func (s *Store) LegacyTopics(ctx context.Context) ([]*core.Topic, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	cfgs, err := s.rdb.HGetAll(ctx, s.keys.topics).Result()
	if err != nil {
		return nil, unavailable("read legacy topics", err)
	}
	out := make([]*core.Topic, 0, len(cfgs))
	for name, data := range cfgs {
		t := &core.Topic{}
		if err := json.Unmarshal([]byte(data), t); err != nil {
			return nil, fmt.Errorf("redisstore: decode topic %q: %w", name, err)
		}
		t.Name = name
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *core.Topic) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DropLegacyTopics implements core.LegacyTopics. Errors: ErrClosed,
// ErrUnavailable.
func (s *Store) DropLegacyTopics(ctx context.Context, names []string) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	if len(names) == 0 {
		return nil
	}
	if err := s.rdb.HDel(ctx, s.keys.topics, names...).Err(); err != nil {
		return unavailable("drop legacy topics", err)
	}
	return nil
}
