package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/core"
)

// GetRecord implements core.Store: a field of its kind's hash. Errors:
// ErrNotFound, ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) GetRecord(ctx context.Context, kind, name string) (*core.Record, error) {
	if err := core.CheckRecord(kind, name); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	raw, err := s.rdb.HGet(ctx, s.keys.record(kind), name).Result()
	if err == redis.Nil {
		return nil, fmt.Errorf("redisstore: %w", core.RecordNotFound(kind, name))
	}
	if err != nil {
		return nil, unavailable("get record", err)
	}
	return decodeRecordField(kind, name, raw)
}

// PutRecord implements core.Store with record.lua, on the one key of the
// record's kind. Errors: ErrConflict, ErrInvalidArgument, ErrClosed,
// ErrUnavailable.
func (s *Store) PutRecord(ctx context.Context, params *core.PutRecordParams) (uint64, error) {
	if err := core.CheckPutRecord(params); err != nil {
		return 0, err
	}
	r, err := s.record(ctx, "put", params.Kind, params.Name, params.Revision, params.Value)
	if err != nil {
		return 0, err
	}
	if r < 0 {
		return 0, core.RecordConflict(params.Kind, params.Name, params.Revision)
	}
	return uint64(r), nil
}

// DeleteRecord implements core.Store with record.lua. Errors: ErrNotFound,
// ErrConflict, ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) DeleteRecord(ctx context.Context, params *core.DeleteRecordParams) error {
	if err := core.CheckDeleteRecord(params); err != nil {
		return err
	}
	r, err := s.record(ctx, "del", params.Kind, params.Name, params.Revision, nil)
	switch {
	case err != nil:
		return err
	case r == -2:
		return fmt.Errorf("redisstore: %w", core.RecordNotFound(params.Kind, params.Name))
	case r < 0:
		return core.RecordConflict(params.Kind, params.Name, params.Revision)
	}
	return nil
}

// record runs record.lua.
func (s *Store) record(ctx context.Context, op, kind, name string, rev uint64, value []byte) (int64, error) {
	if s.isClosed() {
		return 0, core.ErrClosed
	}
	r, err := s.run(ctx, []call{{script: scriptRecord, keys: []string{s.keys.record(kind)},
		args: []any{op, name, strconv.FormatUint(rev, 10), value}}})[0].Int64()
	if err != nil {
		return 0, unavailable(op+" record", err)
	}
	return r, nil
}

// ListRecords implements core.Store: the kind's hash. Errors:
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) ListRecords(ctx context.Context, kind string) ([]*core.Record, error) {
	if err := core.CheckRecordKind(kind); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	all, err := s.rdb.HGetAll(ctx, s.keys.record(kind)).Result()
	if err != nil {
		return nil, unavailable("list records", err)
	}
	out := make([]*core.Record, 0, len(all))
	for name, raw := range all {
		if name == "" { // the revision count
			continue
		}
		r, err := decodeRecordField(kind, name, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *core.Record) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// decodeRecordField decodes a field of a kind's hash: "<revision>:<value>".
func decodeRecordField(kind, name, raw string) (*core.Record, error) {
	revText, value, ok := strings.Cut(raw, ":")
	rev, err := strconv.ParseUint(revText, 10, 64)
	if !ok || err != nil || rev == 0 {
		return nil, fmt.Errorf("redisstore: %s %q: bad record", kind, name)
	}
	return &core.Record{Kind: kind, Name: name, Value: []byte(value), Revision: rev}, nil
}
