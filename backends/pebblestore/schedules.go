package pebblestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// prefixSchedule keys a schedule with its cursor (JSON): S<name>.
const prefixSchedule = 'S'

// PutSchedule implements core.Store. Errors: ErrClosed, ErrUnavailable.
func (s *Store) PutSchedule(_ context.Context, sc *core.Schedule) error {
	if sc == nil {
		return core.Invalid("", "pebblestore: put schedule: no schedule")
	}
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	c := sc.Clone()
	c.Cursor = time.Time{}
	old, err := s.schedule(sc.Name)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if old != nil {
		c.Cursor = old.Cursor
	}
	b := s.db.NewBatch()
	if err := setSchedule(b, c); err != nil {
		_ = b.Close()
		s.mu.Unlock()
		return err
	}
	wait := s.write(b, pebble.Sync)
	s.mu.Unlock()
	return wait()
}

// GetSchedule implements core.Store. Errors: ErrNotFound, ErrClosed,
// ErrUnavailable.
func (s *Store) GetSchedule(_ context.Context, name string) (*core.Schedule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	sc, err := s.schedule(name)
	if err == nil && sc == nil {
		err = fmt.Errorf("pebblestore: schedule %q: %w", name, core.ErrNotFound)
	}
	return sc, err
}

// ListSchedules implements core.Store: in name order, the keys' order.
// Errors: ErrClosed, ErrUnavailable.
func (s *Store) ListSchedules(context.Context) ([]*core.Schedule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	out := []*core.Schedule{}
	err := s.scan(prefixSchedule, func(k, v []byte) error {
		sc, err := decodeSchedule(k[1:], v)
		if err == nil {
			out = append(out, sc)
		}
		return err
	})
	return out, err
}

// DeleteSchedule implements core.Store. Errors: ErrNotFound, ErrClosed,
// ErrUnavailable.
func (s *Store) DeleteSchedule(_ context.Context, name string) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	sc, err := s.schedule(name)
	if err == nil && sc == nil {
		err = fmt.Errorf("pebblestore: schedule %q: %w", name, core.ErrNotFound)
	}
	if err != nil {
		s.mu.Unlock()
		return err
	}
	b := s.db.NewBatch()
	_ = b.Delete(idKey(prefixSchedule, name), nil)
	wait := s.write(b, pebble.Sync)
	s.mu.Unlock()
	return wait()
}

// FireSchedule implements core.Store: the cursor's check and move and the
// job's creation are one batch, written under the store's lock. A slot
// with a job is refused while the disk is full, as a put is: the cursor
// stays, and the slot fires once space is back (or its schedule's missed
// policy passes it). Errors: ErrNotFound, ErrInvalidArgument,
// ErrStorageFull, ErrClosed, ErrUnavailable.
func (s *Store) FireSchedule(_ context.Context, params *core.FireScheduleParams) (bool, error) {
	if err := core.CheckFire(params); err != nil {
		return false, err
	}
	if params.Job != nil {
		if err := s.reserve.Err(); err != nil {
			return false, err
		}
	}
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, core.ErrClosed
	}
	sc, err := s.schedule(params.Name)
	if err == nil && sc == nil {
		err = fmt.Errorf("pebblestore: schedule %q: %w", params.Name, core.ErrNotFound)
	}
	if err != nil || !sc.Cursor.Before(params.Slot) {
		s.mu.Unlock()
		return false, err
	}
	sc.Cursor = params.Slot.UTC()
	b := s.db.NewBatch()
	if err := setSchedule(b, sc); err != nil {
		_ = b.Close()
		s.mu.Unlock()
		return false, err
	}
	created := false
	now := s.now()
	touched := make(map[*topic]struct{})
	if j := params.Job; j != nil && s.x.lookup(j.ID) == 0 {
		finished, err := s.get(idKey(prefixFinished, j.ID))
		if err == nil && finished == nil {
			pb := &putBatch{Batch: b, jobs: map[string]*core.Job{}}
			_, err = s.put(pb, j, false, false, now, touched)
			created = err == nil
		}
		if err != nil {
			// The index may have changed for a batch that is not
			// written; only a failed read gets here (as in PutJobs).
			_ = b.Close()
			s.mu.Unlock()
			return false, err
		}
	}
	if err := s.commitPut(b, now, touched); err != nil {
		return false, err
	}
	return created, nil
}

// schedule reads a schedule; nil when there is none. The caller holds mu.
func (s *Store) schedule(name string) (*core.Schedule, error) {
	raw, err := s.get(idKey(prefixSchedule, name))
	if raw == nil || err != nil {
		return nil, err
	}
	return decodeSchedule([]byte(name), raw)
}

func setSchedule(b *pebble.Batch, sc *core.Schedule) error {
	raw, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("pebblestore: schedule %q: %w", sc.Name, err)
	}
	return b.Set(idKey(prefixSchedule, sc.Name), raw, nil)
}

func decodeSchedule(name, raw []byte) (*core.Schedule, error) {
	var sc core.Schedule
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, fmt.Errorf("pebblestore: schedule %q: %w", name, errCorrupt)
	}
	return &sc, nil
}
