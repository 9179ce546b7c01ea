package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/delayq/delayq/core"
)

// PutSchedule implements core.Store. Errors: ErrClosed.
func (s *Store) PutSchedule(_ context.Context, sc *core.Schedule) error {
	if sc == nil {
		return core.Invalid("", "memstore: put schedule: no schedule")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return core.ErrClosed
	}
	c := sc.Clone()
	c.Cursor = time.Time{}
	if old := s.schedules[sc.Name]; old != nil {
		c.Cursor = old.Cursor
	}
	s.schedules[sc.Name] = c
	return nil
}

// GetSchedule implements core.Store. Errors: ErrNotFound, ErrClosed.
func (s *Store) GetSchedule(_ context.Context, name string) (*core.Schedule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	sc := s.schedules[name]
	if sc == nil {
		return nil, fmt.Errorf("memstore: schedule %q: %w", name, core.ErrNotFound)
	}
	return sc.Clone(), nil
}

// ListSchedules implements core.Store. Errors: ErrClosed.
func (s *Store) ListSchedules(_ context.Context) ([]*core.Schedule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	out := make([]*core.Schedule, 0, len(s.schedules))
	for _, sc := range s.schedules {
		out = append(out, sc.Clone())
	}
	slices.SortFunc(out, func(a, b *core.Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteSchedule implements core.Store. Errors: ErrNotFound, ErrClosed.
func (s *Store) DeleteSchedule(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return core.ErrClosed
	}
	if s.schedules[name] == nil {
		return fmt.Errorf("memstore: schedule %q: %w", name, core.ErrNotFound)
	}
	delete(s.schedules, name)
	return nil
}

// FireSchedule implements core.Store: the cursor check, the job's creation
// and the cursor's move happen under one lock. Errors: ErrNotFound,
// ErrInvalidArgument, ErrClosed.
func (s *Store) FireSchedule(_ context.Context, params *core.FireScheduleParams) (bool, error) {
	if err := core.CheckFire(params); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, core.ErrClosed
	}
	sc := s.schedules[params.Name]
	if sc == nil {
		return false, fmt.Errorf("memstore: schedule %q: %w", params.Name, core.ErrNotFound)
	}
	if !sc.Cursor.Before(params.Slot) {
		return false, nil
	}
	sc.Cursor = params.Slot.UTC()
	if params.Job == nil {
		return false, nil
	}
	now := s.now()
	s.prune(now)
	if _, ok := s.jobs[params.Job.ID]; ok {
		return false, nil
	}
	touched := make(map[*topic]struct{})
	s.put(params.Job, false, false, now, touched)
	for tp := range touched {
		s.changed(tp, now)
	}
	return true, nil
}
