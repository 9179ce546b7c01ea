package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Schedules are metadata records of KindSchedule (Store.PutRecord): the
// definition with its cursor, as JSON, changed by compare-and-set on the
// record's revision, so that every store keeps them with the same code.

// casTries bounds the compare-and-set rounds of one change of a schedule
// that other instances keep changing meanwhile.
const casTries = 16

// SlotObserver is an optional capability of the store an engine is given
// (a decorator's, such as telemetry's): the engine tells it what each
// firing of a schedule's slot did, so that it counts slots fired, missed
// and blocked.
type SlotObserver interface {
	// ObserveSlot reports a slot fired or passed over: params as it was
	// fired, and whether it created its job.
	ObserveSlot(ctx context.Context, params *FireScheduleParams, created bool)
}

// LegacySchedules is an optional capability of a store that kept schedules
// in a format of its own before they were records: MigrateSchedules moves
// them to records. Stores keep it until the release after the one that
// moved schedules to records.
type LegacySchedules interface {
	// LegacySchedules returns the schedules kept in the earlier format,
	// each with its cursor.
	LegacySchedules(ctx context.Context) ([]*Schedule, error)
	// DropLegacySchedules deletes the named schedules of the earlier
	// format. Idempotent.
	DropLegacySchedules(ctx context.Context, names []string) error
}

// MigrateSchedules moves the schedules a store kept in its earlier format
// (LegacySchedules, looked for through decorators' Unwrap) to records, each
// with its cursor, and drops them from the earlier format; a schedule that
// already has a record keeps the record. It returns how many it moved;
// none for a store without the capability. Idempotent: instances starting
// together move each schedule once. Errors: those of the store.
func MigrateSchedules(ctx context.Context, store Store) (int, error) {
	legacy, ok := capability[LegacySchedules](store)
	if !ok {
		return 0, nil
	}
	old, err := legacy.LegacySchedules(ctx)
	if err != nil || len(old) == 0 {
		return 0, err
	}
	moved := 0
	names := make([]string, 0, len(old))
	for _, s := range old {
		err := writeSchedule(ctx, store, s, 0)
		switch {
		case err == nil:
			moved++
		case !errors.Is(err, ErrConflict): // a conflict: moved already
			return moved, fmt.Errorf("migrate schedule %q: %w", s.Name, err)
		}
		names = append(names, s.Name)
	}
	return moved, legacy.DropLegacySchedules(ctx, names)
}

// capability returns the optional capability T of store, or of the store
// a decorator wraps (Unwrap), the outermost that has it.
func capability[T any](store Store) (T, bool) {
	for s := store; s != nil; {
		if c, ok := s.(T); ok {
			return c, true
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}

// migrateSchedules runs MigrateSchedules once per engine, until it
// succeeds.
func (e *Engine) migrateSchedules(ctx context.Context) {
	if e.schedulesMigrated.Load() {
		return
	}
	n, err := MigrateSchedules(ctx, e.store)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("engine: moving schedules to records failed; retrying", "err", err)
		}
		return
	}
	if n > 0 {
		e.log.Info("engine: moved schedules of the earlier format to records", "schedules", n)
	}
	e.schedulesMigrated.Store(true)
}

// readSchedule reads a schedule with its record's revision. Errors:
// ErrNotFound, those of the store.
func readSchedule(ctx context.Context, store Store, name string) (*Schedule, error) {
	r, err := store.GetRecord(ctx, KindSchedule, name)
	if err != nil {
		return nil, err
	}
	return decodeSchedule(r)
}

func decodeSchedule(r *Record) (*Schedule, error) {
	var v scheduleValue
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return nil, fmt.Errorf("schedule %q: bad record: %w", r.Name, err)
	}
	s := v.Schedule
	if v.JobBody != nil {
		s.Job.Body = v.JobBody
	}
	s.rev = r.Revision
	return &s, nil
}

// listSchedules reads every schedule, sorted by name.
func listSchedules(ctx context.Context, store Store) ([]*Schedule, error) {
	recs, err := store.ListRecords(ctx, KindSchedule)
	if err != nil {
		return nil, err
	}
	out := make([]*Schedule, 0, len(recs))
	for _, r := range recs {
		s, err := decodeSchedule(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// scheduleValue is a schedule as its record holds it: the job template's
// body apart, as bytes (base64 in the JSON), since a raw message would be
// written compacted and a body is kept byte for byte.
type scheduleValue struct {
	Schedule
	JobBody []byte `json:"job_body,omitempty"`
}

// writeSchedule stores s if its record has the revision rev (0: if there
// is none) and sets s's revision to the new one. Errors: ErrConflict,
// those of the store.
func writeSchedule(ctx context.Context, store Store, s *Schedule, rev uint64) error {
	v := scheduleValue{Schedule: *s, JobBody: s.Job.Body}
	v.Schedule.Job.Body = nil
	data, err := json.Marshal(&v)
	if err != nil {
		return fmt.Errorf("schedule %q: %w", s.Name, err)
	}
	n, err := store.PutRecord(ctx, &PutRecordParams{Kind: KindSchedule, Name: s.Name, Value: data, Revision: rev})
	if err != nil {
		return err
	}
	s.rev = n
	return nil
}

// moveCursor moves s's cursor to slot by compare-and-set, reading the
// schedule again when another instance changed it meanwhile (s then holds
// what it read: a new definition is kept). It reports false when the
// cursor was at or past the slot already. Errors: ErrNotFound when the
// schedule is gone, those of the store.
func (e *Engine) moveCursor(ctx context.Context, s *Schedule, slot time.Time) (bool, error) {
	for range casTries {
		if !s.Cursor.Before(slot) {
			return false, nil
		}
		next := s.Clone()
		next.Cursor = slot
		err := writeSchedule(ctx, e.store, next, s.rev)
		if err == nil {
			*s = *next
			return true, nil
		}
		if !errors.Is(err, ErrConflict) {
			return false, err
		}
		fresh, err := readSchedule(ctx, e.store, s.Name)
		if err != nil {
			return false, err
		}
		*s = *fresh
	}
	return false, fmt.Errorf("schedule %q: %w: changed %d times in a row", s.Name, ErrConflict, casTries)
}
