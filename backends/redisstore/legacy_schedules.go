package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/core"
)

// The release before records kept schedules in {P}:sched (name ->
// definition) and their cursors in {P}:scur (name -> last slot fired, ms),
// and on a Cluster in each shard's {P:n}:scur too. core.MigrateSchedules
// moves them to records; the next release drops this file.

var _ core.LegacySchedules = (*Store)(nil)

// LegacySchedules implements core.LegacySchedules: each schedule with the
// latest of its cursors. Errors: ErrClosed, ErrUnavailable.
func (s *Store) LegacySchedules(ctx context.Context) ([]*core.Schedule, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	var defs *redis.MapStringStringCmd
	var curs []*redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		defs = p.HGetAll(ctx, s.keys.sched)
		curs = append(curs, p.HGetAll(ctx, s.keys.cursors))
		if !s.multiShard { // a Cluster: the shards' cursors too
			for n := range s.keys.shard {
				curs = append(curs, p.HGetAll(ctx, s.keys.shardCursors(n)))
			}
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("read legacy schedules", err)
	}
	out := make([]*core.Schedule, 0, len(defs.Val()))
	for name, def := range defs.Val() {
		var sc core.Schedule
		if err := json.Unmarshal([]byte(def), &sc); err != nil {
			return nil, fmt.Errorf("redisstore: decode schedule %q: %w", name, err)
		}
		for _, c := range curs {
			if ms, err := strconv.ParseInt(c.Val()[name], 10, 64); err == nil && time.UnixMilli(ms).After(sc.Cursor) {
				sc.Cursor = time.UnixMilli(ms).UTC()
			}
		}
		out = append(out, &sc)
	}
	slices.SortFunc(out, func(a, b *core.Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DropLegacySchedules implements core.LegacySchedules: the definitions and
// every cursor. Errors: ErrClosed, ErrUnavailable.
func (s *Store) DropLegacySchedules(ctx context.Context, names []string) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	if len(names) == 0 {
		return nil
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, s.keys.sched, names...)
		p.HDel(ctx, s.keys.cursors, names...)
		if !s.multiShard {
			for n := range s.keys.shard {
				p.HDel(ctx, s.keys.shardCursors(n), names...)
			}
		}
		return nil
	})
	if err != nil {
		return unavailable("drop legacy schedules", err)
	}
	return nil
}
