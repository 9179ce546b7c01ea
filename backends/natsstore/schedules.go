package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// Keys of schedules in the topic bucket.
const (
	keySchedule = "sch." // + name: its definition (JSON)
	keyCursor   = "cur." // + name: its cursor, the last slot fired (Unix ms)
)

// PutSchedule implements core.Store: the definition; the cursor, a key of
// its own, stays. Errors: ErrClosed, ErrUnavailable.
func (s *Store) PutSchedule(ctx context.Context, sc *core.Schedule) error {
	if sc == nil {
		return core.Invalid("", "natsstore: put schedule: no schedule")
	}
	if s.isClosed() {
		return core.ErrClosed
	}
	c := sc.Clone()
	c.Cursor = time.Time{}
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("natsstore: encode schedule %q: %w", sc.Name, err)
	}
	if _, err := s.kv.Put(ctx, keySchedule+sc.Name, data); err != nil {
		return unavailable("put schedule", err)
	}
	return nil
}

// GetSchedule implements core.Store. Errors: ErrNotFound, ErrClosed,
// ErrUnavailable.
func (s *Store) GetSchedule(ctx context.Context, name string) (*core.Schedule, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	sc, _, err := s.schedule(ctx, name)
	return sc, err
}

// schedule reads a schedule with its cursor, and the revision of the
// cursor's key (0: none yet). Errors: ErrNotFound, ErrUnavailable.
func (s *Store) schedule(ctx context.Context, name string) (*core.Schedule, uint64, error) {
	e, err := s.kv.Get(ctx, keySchedule+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("natsstore: schedule %q: %w", name, core.ErrNotFound)
	}
	if err != nil {
		return nil, 0, unavailable("get schedule", err)
	}
	var sc core.Schedule
	if err := json.Unmarshal(e.Value(), &sc); err != nil {
		return nil, 0, fmt.Errorf("natsstore: schedule %q: bad record: %w", name, err)
	}
	c, err := s.kv.Get(ctx, keyCursor+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &sc, 0, nil
	}
	if err != nil {
		return nil, 0, unavailable("get schedule", err)
	}
	if ms, err := strconv.ParseInt(string(c.Value()), 10, 64); err == nil {
		sc.Cursor = time.UnixMilli(ms).UTC()
	}
	return &sc, c.Revision(), nil
}

// ListSchedules implements core.Store. Errors: ErrClosed, ErrUnavailable.
func (s *Store) ListSchedules(ctx context.Context) ([]*core.Schedule, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	lister, err := s.kv.ListKeysFiltered(ctx, keySchedule+">")
	if err != nil {
		return nil, unavailable("list schedules", err)
	}
	defer func() { _ = lister.Stop() }() // errs once the keys were all read
	var names []string
	for k := range lister.Keys() {
		if name, ok := strings.CutPrefix(k, keySchedule); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	list := make([]*core.Schedule, len(names))
	err = s.each(ctx, len(names), func(i int) error {
		sc, _, err := s.schedule(ctx, names[i])
		if errors.Is(err, core.ErrNotFound) {
			return nil // deleted meanwhile
		}
		list[i] = sc
		return err
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(sc *core.Schedule) bool { return sc == nil }), nil
}

// DeleteSchedule implements core.Store. Errors: ErrNotFound, ErrClosed,
// ErrUnavailable.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	if _, _, err := s.schedule(ctx, name); err != nil {
		return err
	}
	for _, k := range []string{keySchedule, keyCursor} {
		if err := s.kv.Purge(ctx, k+name); err != nil {
			return unavailable("delete schedule", err)
		}
	}
	return nil
}

// FireSchedule implements core.Store in two steps, since the job and the
// cursor live in different streams: the job is created first, only where
// its id has no message at all (finished jobs keep theirs for the
// retention), then the cursor moves by compare-and-set on its revision.
// Firing a slot again, after a crash between the two or from another
// instance that read the old cursor, finds the job and moves the cursor.
// A slot with a job is not fired while the disk is full: the engine fires
// it once space is back. Errors: ErrNotFound, ErrInvalidArgument,
// ErrClosed, ErrStorageFull, ErrUnavailable.
func (s *Store) FireSchedule(ctx context.Context, params *core.FireScheduleParams) (bool, error) {
	if err := core.CheckFire(params); err != nil {
		return false, err
	}
	if s.isClosed() {
		return false, core.ErrClosed
	}
	if params.Job != nil {
		if err := s.admit(); err != nil {
			return false, err
		}
	}
	created := false
	slot := []byte(strconv.FormatInt(params.Slot.UnixMilli(), 10))
	for range maxTries {
		sc, rev, err := s.schedule(ctx, params.Name)
		if err != nil {
			return false, err
		}
		if !sc.Cursor.Before(params.Slot) {
			return created, nil
		}
		if j := params.Job; j != nil && !created {
			if created, err = s.create(ctx, j); err != nil {
				return false, err
			}
		}
		if rev == 0 {
			_, err = s.kv.Create(ctx, keyCursor+params.Name, slot)
		} else {
			_, err = s.kv.Update(ctx, keyCursor+params.Name, slot, rev)
		}
		if err == nil {
			return created, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSeq(err) {
			return false, unavailable("fire schedule", err)
		}
		// Another instance moved the cursor meanwhile: look again.
	}
	return false, unavailable("fire schedule", fmt.Errorf("schedule %q's cursor changed %d times in a row", params.Name, maxTries))
}

// create stores j unless its id has a message, in any state. It reports
// whether it did.
func (s *Store) create(ctx context.Context, j *core.Job) (bool, error) {
	if err := s.markSeen(ctx, j.Topic); err != nil {
		return false, err
	}
	cur, err := s.load(ctx, j.ID)
	if err != nil || cur != nil {
		return false, err
	}
	now := s.now()
	in := j.Clone()
	in.Reset(now, now)
	_, err = s.write(ctx, in, now, nil)
	if errors.Is(err, errCAS) {
		return false, nil
	}
	return err == nil, err
}
