package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// Keys of metadata records (core.Record).
const (
	// prefixMetaRecord keys a record: r<kind>\x00<name>, its value the
	// revision (8 bytes) and then the record's value.
	prefixMetaRecord = 'r'
	// revisionKey holds the last record revision given (8 bytes), written
	// with every record put, so that a record made again after a restart
	// never gets a revision it had.
	revisionKey = "q"
)

func metaRecordKey(kind, name string) []byte {
	k := make([]byte, 0, 2+len(kind)+len(name))
	k = append(k, prefixMetaRecord)
	k = append(k, kind...)
	k = append(k, 0)
	return append(k, name...)
}

// GetRecord implements core.Store. Errors: ErrNotFound,
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) GetRecord(_ context.Context, kind, name string) (*core.Record, error) {
	if err := core.CheckRecord(kind, name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	r, err := s.metaRecord(kind, name)
	if err == nil && r == nil {
		err = fmt.Errorf("pebblestore: %w", core.RecordNotFound(kind, name))
	}
	return r, err
}

// PutRecord implements core.Store: the check and the write under the
// store's lock, the write synced. Errors: ErrConflict, ErrInvalidArgument,
// ErrClosed, ErrUnavailable.
func (s *Store) PutRecord(_ context.Context, params *core.PutRecordParams) (uint64, error) {
	if err := core.CheckPutRecord(params); err != nil {
		return 0, err
	}
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, core.ErrClosed
	}
	old, err := s.metaRecord(params.Kind, params.Name)
	if err == nil && revisionOf(old) != params.Revision {
		err = core.RecordConflict(params.Kind, params.Name, params.Revision)
	}
	if err == nil && s.revision == 0 {
		s.revision, err = s.lastRevision()
	}
	if err != nil {
		s.mu.Unlock()
		return 0, err
	}
	s.revision++
	rev := s.revision
	b := s.db.NewBatch()
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(params.Value)), rev)
	_ = b.Set(metaRecordKey(params.Kind, params.Name), append(v, params.Value...), nil)
	_ = b.Set([]byte(revisionKey), binary.BigEndian.AppendUint64(nil, rev), nil)
	wait := s.write(b, pebble.Sync)
	s.mu.Unlock()
	return rev, wait()
}

// DeleteRecord implements core.Store. Errors: ErrNotFound, ErrConflict,
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) DeleteRecord(_ context.Context, params *core.DeleteRecordParams) error {
	if err := core.CheckDeleteRecord(params); err != nil {
		return err
	}
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	old, err := s.metaRecord(params.Kind, params.Name)
	switch {
	case err != nil:
	case old == nil:
		err = fmt.Errorf("pebblestore: %w", core.RecordNotFound(params.Kind, params.Name))
	case old.Revision != params.Revision:
		err = core.RecordConflict(params.Kind, params.Name, params.Revision)
	}
	if err != nil {
		s.mu.Unlock()
		return err
	}
	b := s.db.NewBatch()
	_ = b.Delete(metaRecordKey(params.Kind, params.Name), nil)
	wait := s.write(b, pebble.Sync)
	s.mu.Unlock()
	return wait()
}

// ListRecords implements core.Store: in name order, the keys' order.
// Errors: ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) ListRecords(_ context.Context, kind string) ([]*core.Record, error) {
	if err := core.CheckRecordKind(kind); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	lower := metaRecordKey(kind, "")
	upper := append(bytes.Clone(lower[:len(lower)-1]), 1)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, wrap(err)
	}
	out := []*core.Record{}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			var r *core.Record
			if r, err = decodeMetaRecord(kind, string(it.Key()[len(lower):]), v); err == nil {
				out = append(out, r)
			}
		}
		if err != nil {
			_ = it.Close()
			return nil, wrap(err)
		}
	}
	return out, wrap(it.Close())
}

// metaRecord reads a record; nil when there is none. The caller holds mu.
func (s *Store) metaRecord(kind, name string) (*core.Record, error) {
	raw, err := s.get(metaRecordKey(kind, name))
	if raw == nil || err != nil {
		return nil, err
	}
	return decodeMetaRecord(kind, name, raw)
}

// lastRevision reads the last record revision given, 0 for none. The
// caller holds mu.
func (s *Store) lastRevision() (uint64, error) {
	raw, err := s.get([]byte(revisionKey))
	if raw == nil || err != nil {
		return 0, err
	}
	if len(raw) != 8 {
		return 0, fmt.Errorf("pebblestore: record revision: %w", errCorrupt)
	}
	return binary.BigEndian.Uint64(raw), nil
}

func decodeMetaRecord(kind, name string, raw []byte) (*core.Record, error) {
	if len(raw) < 8 {
		return nil, fmt.Errorf("pebblestore: %s %q: %w", kind, name, errCorrupt)
	}
	return &core.Record{Kind: kind, Name: name, Value: bytes.Clone(raw[8:]), Revision: binary.BigEndian.Uint64(raw)}, nil
}

// revisionOf returns r's revision, 0 for none.
func revisionOf(r *core.Record) uint64 {
	if r == nil {
		return 0
	}
	return r.Revision
}
