package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// Keys of schedules in the topic bucket as the release before records kept
// them. core.MigrateSchedules moves them to records; the next release drops
// this file.
const (
	keySchedule = "sch." // + name: its definition (JSON)
	keyCursor   = "cur." // + name: its cursor, the last slot fired (Unix ms)
)

var _ core.LegacySchedules = (*Store)(nil)

// LegacySchedules implements core.LegacySchedules: each sch. key with its
// cur. key. Errors: ErrClosed, ErrUnavailable.
func (s *Store) LegacySchedules(ctx context.Context) ([]*core.Schedule, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	names, err := s.keyNames(ctx, keySchedule, "legacy schedules")
	if err != nil {
		return nil, err
	}
	list := make([]*core.Schedule, len(names))
	err = s.each(ctx, len(names), func(i int) error {
		sc, err := s.legacySchedule(ctx, names[i])
		list[i] = sc
		return err
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(sc *core.Schedule) bool { return sc == nil }), nil
}

// legacySchedule reads a schedule with its cursor; nil when it is gone.
func (s *Store) legacySchedule(ctx context.Context, name string) (*core.Schedule, error) {
	e, err := s.kv.Get(ctx, keySchedule+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("get legacy schedule", err)
	}
	var sc core.Schedule
	if err := json.Unmarshal(e.Value(), &sc); err != nil {
		return nil, fmt.Errorf("natsstore: schedule %q: bad record: %w", name, err)
	}
	c, err := s.kv.Get(ctx, keyCursor+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &sc, nil
	}
	if err != nil {
		return nil, unavailable("get legacy schedule", err)
	}
	if ms, err := strconv.ParseInt(string(c.Value()), 10, 64); err == nil {
		sc.Cursor = time.UnixMilli(ms).UTC()
	}
	return &sc, nil
}

// DropLegacySchedules implements core.LegacySchedules: the sch. and cur.
// keys, purged. Errors: ErrClosed, ErrUnavailable.
func (s *Store) DropLegacySchedules(ctx context.Context, names []string) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	for _, name := range names {
		for _, k := range []string{keySchedule, keyCursor} {
			if err := s.kv.Purge(ctx, k+name); err != nil {
				return unavailable("drop legacy schedules", err)
			}
		}
	}
	return nil
}
