package natsstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// keyRecord starts the keys of metadata records in the topic bucket:
// rec.<kind>.<name in unpadded base64url>, since a record's name may hold
// what a key may not. The key's revision is the record's.
const keyRecord = "rec."

func recordKey(kind, name string) string {
	return keyRecord + kind + "." + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// GetRecord implements core.Store. Errors: ErrNotFound,
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) GetRecord(ctx context.Context, kind, name string) (*core.Record, error) {
	if err := core.CheckRecord(kind, name); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	e, err := s.kv.Get(ctx, recordKey(kind, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("natsstore: %w", core.RecordNotFound(kind, name))
	}
	if err != nil {
		return nil, unavailable("get record", err)
	}
	return &core.Record{Kind: kind, Name: name, Value: e.Value(), Revision: e.Revision()}, nil
}

// PutRecord implements core.Store with the bucket's own compare-and-set:
// Create for revision 0, Update otherwise. Errors: ErrConflict,
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) PutRecord(ctx context.Context, params *core.PutRecordParams) (uint64, error) {
	if err := core.CheckPutRecord(params); err != nil {
		return 0, err
	}
	if s.isClosed() {
		return 0, core.ErrClosed
	}
	k := recordKey(params.Kind, params.Name)
	var rev uint64
	var err error
	if params.Revision == 0 {
		rev, err = s.kv.Create(ctx, k, params.Value)
	} else {
		rev, err = s.kv.Update(ctx, k, params.Value, params.Revision)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyExists) || isWrongSeq(err):
		return 0, core.RecordConflict(params.Kind, params.Name, params.Revision)
	case err != nil:
		return 0, unavailable("put record", err)
	}
	return rev, nil
}

// DeleteRecord implements core.Store: a purge that holds only at the
// revision. Errors: ErrNotFound, ErrConflict, ErrInvalidArgument,
// ErrClosed, ErrUnavailable.
func (s *Store) DeleteRecord(ctx context.Context, params *core.DeleteRecordParams) error {
	if err := core.CheckDeleteRecord(params); err != nil {
		return err
	}
	cur, err := s.GetRecord(ctx, params.Kind, params.Name)
	if err != nil {
		return err
	}
	if cur.Revision != params.Revision {
		return core.RecordConflict(params.Kind, params.Name, params.Revision)
	}
	err = s.kv.Purge(ctx, recordKey(params.Kind, params.Name), jetstream.LastRevision(params.Revision))
	switch {
	case isWrongSeq(err):
		return core.RecordConflict(params.Kind, params.Name, params.Revision)
	case err != nil:
		return unavailable("delete record", err)
	}
	return nil
}

// ListRecords implements core.Store: the kind's keys, each read. Errors:
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) ListRecords(ctx context.Context, kind string) ([]*core.Record, error) {
	if err := core.CheckRecordKind(kind); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	encoded, err := s.keyNames(ctx, keyRecord+kind+".", "records")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(encoded))
	for _, enc := range encoded {
		if name, err := base64.RawURLEncoding.DecodeString(enc); err == nil {
			names = append(names, string(name))
		}
	}
	slices.Sort(names) // by name, not by its encoding
	list := make([]*core.Record, len(names))
	err = s.each(ctx, len(names), func(i int) error {
		r, err := s.GetRecord(ctx, kind, names[i])
		if errors.Is(err, core.ErrNotFound) {
			return nil // deleted meanwhile
		}
		list[i] = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(r *core.Record) bool { return r == nil }), nil
}
