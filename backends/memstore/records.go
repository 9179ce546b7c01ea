package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/delayq/delayq/core"
)

// GetRecord implements core.Store. Errors: ErrNotFound,
// ErrInvalidArgument, ErrClosed.
func (s *Store) GetRecord(_ context.Context, kind, name string) (*core.Record, error) {
	if err := core.CheckRecord(kind, name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	r := s.records[kind][name]
	if r == nil {
		return nil, fmt.Errorf("memstore: %w", core.RecordNotFound(kind, name))
	}
	return cloneRecord(r), nil
}

// PutRecord implements core.Store: revisions count the store's record
// puts. Errors: ErrConflict, ErrInvalidArgument, ErrClosed.
func (s *Store) PutRecord(_ context.Context, params *core.PutRecordParams) (uint64, error) {
	if err := core.CheckPutRecord(params); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, core.ErrClosed
	}
	if rev := s.revisionOf(params.Kind, params.Name); rev != params.Revision {
		return 0, core.RecordConflict(params.Kind, params.Name, params.Revision)
	}
	byName := s.records[params.Kind]
	if byName == nil {
		byName = make(map[string]*core.Record)
		s.records[params.Kind] = byName
	}
	s.revision++
	byName[params.Name] = &core.Record{Kind: params.Kind, Name: params.Name, Value: slices.Clone(params.Value), Revision: s.revision}
	return s.revision, nil
}

// DeleteRecord implements core.Store. Errors: ErrNotFound, ErrConflict,
// ErrInvalidArgument, ErrClosed.
func (s *Store) DeleteRecord(_ context.Context, params *core.DeleteRecordParams) error {
	if err := core.CheckDeleteRecord(params); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return core.ErrClosed
	}
	switch rev := s.revisionOf(params.Kind, params.Name); rev {
	case 0:
		return fmt.Errorf("memstore: %w", core.RecordNotFound(params.Kind, params.Name))
	case params.Revision:
		delete(s.records[params.Kind], params.Name)
		return nil
	default:
		return core.RecordConflict(params.Kind, params.Name, params.Revision)
	}
}

// ListRecords implements core.Store. Errors: ErrInvalidArgument,
// ErrClosed.
func (s *Store) ListRecords(_ context.Context, kind string) ([]*core.Record, error) {
	if err := core.CheckRecordKind(kind); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	out := make([]*core.Record, 0, len(s.records[kind]))
	for _, r := range s.records[kind] {
		out = append(out, cloneRecord(r))
	}
	slices.SortFunc(out, func(a, b *core.Record) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// revisionOf returns a record's revision, 0 when there is none. The caller
// holds mu.
func (s *Store) revisionOf(kind, name string) uint64 {
	if r := s.records[kind][name]; r != nil {
		return r.Revision
	}
	return 0
}

func cloneRecord(r *core.Record) *core.Record {
	c := *r
	c.Value = slices.Clone(r.Value)
	return &c
}
