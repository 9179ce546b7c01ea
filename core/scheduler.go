package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// UpcomingMax is the most upcoming slots Schedule.Upcoming lists.
const UpcomingMax = 100

// Upcoming returns the schedule's next n slots that may still fire: after
// now, its Cursor and its UpdatedAt. None while it is paused.
func (s *Schedule) Upcoming(now time.Time, n int) []time.Time {
	out := []time.Time{}
	if s.Paused {
		return out
	}
	from := now
	for _, t := range []time.Time{s.Cursor, s.UpdatedAt} {
		if t.After(from) {
			from = t
		}
	}
	sp, err := s.spec()
	if err != nil {
		return out
	}
	for t := s.next(sp, from); !t.IsZero() && len(out) < min(n, UpcomingMax); t = s.next(sp, t) {
		out = append(out, t)
	}
	return out
}

// pastWalkMax bounds the slots Schedule.Past walks through to find the
// last ones: a cron that fires often in bursts far apart (every second of
// Mondays) could otherwise walk a week of seconds.
const pastWalkMax = 100_000

// Past returns the schedule's last n slots up to its Cursor, newest first:
// the slots of its definition as it is now, since its CreatedAt. No cron
// runs backwards, so it walks forward from a window before the cursor, n
// times the gap after the cursor at first, widened until it holds n slots,
// starts at the creation, or has walked pastWalkMax slots.
func (s *Schedule) Past(n int) []time.Time {
	if n <= 0 || s.Cursor.IsZero() {
		return nil
	}
	span := time.Duration(n) * max(s.Next(s.Cursor).Sub(s.Cursor), time.Second)
	walked := 0
	for {
		from := s.Cursor.Add(-span)
		if from.Before(s.CreatedAt) {
			from = s.CreatedAt
		}
		var last []time.Time
		for t := s.Next(from); !t.IsZero() && !t.After(s.Cursor) && walked < pastWalkMax; t = s.Next(t) {
			walked++
			if last = append(last, t); len(last) > n {
				last = last[1:]
			}
		}
		if len(last) == n || !from.After(s.CreatedAt) || walked >= pastWalkMax || span > 100*365*24*time.Hour {
			slices.Reverse(last)
			return last
		}
		span *= 8
	}
}

// PutSchedule validates and stores a schedule, as its name's only
// definition; every instance fires it from its next slot. A put that
// changes nothing keeps the schedule's UpdatedAt, so that the slots a
// downtime missed are still handled by its Missed policy; a change applies
// from now. The job template is checked as a push of it would be. It
// returns the schedule as stored, with its cursor. Errors: *FieldError.
func (e *Engine) PutSchedule(ctx context.Context, s *Schedule) (*Schedule, error) {
	if s == nil {
		return nil, noParams("put schedule")
	}
	now := StoreTime(e.clock.Now())
	if err := e.validateSchedule(s, now); err != nil {
		return nil, err
	}
	for range casTries {
		stored := s.Clone()
		stored.Start, stored.End = StoreTime(s.Start), StoreTime(s.End)
		stored.CreatedAt, stored.UpdatedAt, stored.Cursor = now, now, time.Time{}
		rev := uint64(0)
		old, err := readSchedule(ctx, e.store, s.Name)
		switch {
		case err == nil:
			rev = old.rev
			stored.CreatedAt, stored.Cursor = old.CreatedAt, old.Cursor
			if old.SameDefinition(stored) {
				stored.UpdatedAt = old.UpdatedAt
			}
		case !errors.Is(err, ErrNotFound):
			return nil, err
		}
		err = writeSchedule(ctx, e.store, stored, rev)
		if err == nil {
			e.schedules.lookNow()
			return stored, nil
		}
		if !errors.Is(err, ErrConflict) {
			return nil, err
		}
		// Fired or changed meanwhile: again, from what is stored now.
	}
	return nil, fmt.Errorf("put schedule %q: %w: changed %d times in a row", s.Name, ErrConflict, casTries)
}

// validateSchedule checks a schedule's definition, and its job template as
// a push of it would be checked, naming the template's fields job.*.
func (e *Engine) validateSchedule(s *Schedule, now time.Time) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if _, err := e.slotJob(s, now.Add(time.Second), now); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) && fe.Field != "" {
			fe.Field = "job." + fe.Field
		}
		return err
	}
	return nil
}

// GetSchedule returns a schedule with its cursor. Errors: ErrNotFound.
func (e *Engine) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	if ValidateScheduleName(name) != nil {
		return nil, ErrNotFound
	}
	return readSchedule(ctx, e.store, name)
}

// ListSchedules returns every schedule, sorted by name.
func (e *Engine) ListSchedules(ctx context.Context) ([]*Schedule, error) {
	return listSchedules(ctx, e.store)
}

// DeleteSchedule drops a schedule: no slot fires after it returns (a slot
// being fired by an instance at that moment may still create its job).
// Jobs it created stay. Errors: ErrNotFound.
func (e *Engine) DeleteSchedule(ctx context.Context, name string) error {
	if ValidateScheduleName(name) != nil {
		return ErrNotFound
	}
	for range casTries {
		s, err := readSchedule(ctx, e.store, name)
		if err != nil {
			return err
		}
		err = e.store.DeleteRecord(ctx, &DeleteRecordParams{Kind: KindSchedule, Name: name, Revision: s.rev})
		if !errors.Is(err, ErrConflict) {
			return err
		}
		// Fired or changed meanwhile: read it again.
	}
	return fmt.Errorf("delete schedule %q: %w: changed %d times in a row", name, ErrConflict, casTries)
}

// slotJob returns the job a schedule's slot creates: its template's fields,
// run_at the slot (SlotRunAt: later within the schedule's jitter), and the
// id ScheduleID(name, slot), or the key's on a topic with unique keys, so
// that a slot creates nothing while the job of an earlier one is
// unfinished (a slot never replaces a job).
func (e *Engine) slotJob(s *Schedule, slot, now time.Time) (*Job, error) {
	p := s.PushParams()
	runAt := s.SlotRunAt(slot)
	p.RunAt = &runAt
	j, _, err := e.newJob(p, now, nil)
	if err != nil {
		return nil, err
	}
	if !IsKeyID(j.ID) {
		j.ID = ScheduleID(s.Name, slot)
	}
	j.Changes = madeChange(OriginSchedule)
	return j, nil
}

// PushParams returns the push of one job of the schedule's template,
// without a time: what a slot creates (with its run_at and id) and what a
// run of the schedule by hand pushes (due now).
func (s *Schedule) PushParams() *PushParams {
	return &PushParams{
		Topic:       s.Topic,
		Body:        s.Job.Body,
		TTR:         s.Job.TTR,
		MaxAttempts: s.Job.MaxAttempts,
		Key:         s.Job.Key,
		Priority:    s.Job.Priority,
	}
}

// scheduler is the engine's service that fires the slots of every
// schedule as they come: it reads the schedules at each slot and at least
// every TopicRefresh (so it sees the changes and firings of other
// instances), and fires what is due. Every instance runs it; the
// schedule's cursor makes one of them fire each slot.
type scheduler struct {
	e    *Engine
	life startStop // its wake asks the loop to look at the schedules now
}

// Start runs the loop and returns at once. Errors: errStarted.
func (sc *scheduler) Start(ctx context.Context) error { return sc.life.start(ctx, sc.run) }

// Stop ends the loop, waiting for it until ctx is done. Idempotent; safe
// before Start.
func (sc *scheduler) Stop(ctx context.Context) error { return sc.life.stop(ctx) }

// lookNow asks the loop to look at the schedules now, after a change.
func (sc *scheduler) lookNow() { sc.life.nudge() }

func (sc *scheduler) run(ctx context.Context) {
	t := sc.e.clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		case <-sc.life.wake:
		}
		wait := sc.fireDue(ctx)
		t.Stop()
		t.Reset(wait)
	}
}

// fireDue fires the due slots of every schedule and returns how long
// to wait before the next one (at most TopicRefresh).
func (sc *scheduler) fireDue(ctx context.Context) time.Duration {
	e := sc.e
	e.migrateSchedules(ctx)
	list, err := listSchedules(ctx, e.store)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("engine: listing schedules failed", "err", err)
		}
		return e.refresh.every
	}
	now := e.clock.Now()
	wait := e.refresh.every
	for _, s := range list {
		sc.fire(ctx, s, now)
		if next := s.Upcoming(now, 1); len(next) > 0 {
			wait = min(wait, next[0].Sub(now))
		}
	}
	return max(wait, time.Millisecond)
}

// fire fires a schedule's due slots (Schedule.Due), moving s's
// cursor with them. Each slot's job is created first, only where no job
// of its id is kept in any state (PutJobsParams.IfAbsent; a keyed
// schedule's, where no unfinished job has the key), then the cursor
// moves by compare-and-set: a crash between the two fires nothing twice,
// since firing the slot again finds the job, and an instance that fired
// the slot meanwhile has moved the cursor past it.
func (sc *scheduler) fire(ctx context.Context, s *Schedule, now time.Time) {
	e := sc.e
	fire, missed, pass := s.Due(now)
	if pass.IsZero() {
		return
	}
	if len(fire) == 0 {
		// Every slot missed and passed over: move the cursor alone.
		p := &FireScheduleParams{Name: s.Name, Slot: pass, Missed: missed}
		moved, err := e.moveCursor(ctx, s, pass)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, ErrNotFound) {
				e.log.Warn("engine: passing over missed slots failed", "schedule", s.Name, "err", err)
			}
			return
		}
		if moved {
			sc.observeSlot(ctx, p, false)
		}
		return
	}
	for i, slot := range fire {
		p := &FireScheduleParams{Name: s.Name, Slot: slot}
		if i == 0 {
			p.Missed = missed
		}
		job, err := e.slotJob(s, slot, now)
		if err != nil {
			// The topic changed since the schedule was put (a job URL it
			// no longer allows, limits): the slot passes, said in the log.
			e.log.Warn("engine: a schedule's job is invalid; its slot passes", "schedule", s.Name, "slot", slot, "err", err)
		} else {
			p.Job = job
			p.Blocked = sc.slotHeld(ctx, slot, job)
		}
		created, moved, err := sc.fireSlot(ctx, s, p)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, ErrNotFound) {
				e.log.Warn("engine: firing a schedule's slot failed; trying again", "schedule", s.Name, "slot", slot, "err", err)
			}
			return
		}
		if !moved {
			// Another instance is at or past the slot. It may have moved
			// the cursor after this one made the job: the job is counted
			// here, the rest there.
			if created {
				sc.observeSlot(ctx, &FireScheduleParams{Name: s.Name, Slot: slot, Job: job}, true)
			}
			return
		}
		sc.observeSlot(ctx, p, created)
		if p.Blocked && !created {
			e.log.Warn("engine: a schedule's slot created no job: a job not made for the slot holds its id", "schedule", s.Name, "slot", slot, "id", job.ID)
		}
	}
}

// fireSlot fires one slot of s: unless the stored cursor is at or past
// p.Slot (read again, so that a schedule deleted or fired elsewhere since
// the listing creates nothing), it creates p.Job (when set) unless a job
// of its id is kept, then moves the cursor. It reports whether it created
// the job and whether it moved the cursor. Errors: ErrNotFound when the
// schedule is gone, those of the store.
func (sc *scheduler) fireSlot(ctx context.Context, s *Schedule, p *FireScheduleParams) (created, moved bool, err error) {
	e := sc.e
	if p.Job != nil {
		fresh, err := readSchedule(ctx, e.store, s.Name)
		if err != nil {
			return false, false, err
		}
		*s = *fresh
		if !s.Cursor.Before(p.Slot) {
			return false, false, nil
		}
		// A keyed schedule's job takes the key's id over once the run
		// before it finished (docs/api.md: only an unfinished run blocks
		// the next); a slot's own id is never taken over, so that a slot
		// fired before a crash is not fired again.
		pp := e.putParams([]*Job{p.Job})
		pp.IfAbsent = !IsKeyID(p.Job.ID)
		res, err := e.store.PutJobs(ctx, pp)
		if err != nil {
			return false, false, err
		}
		if len(res) != 1 || res[0].Err != nil && !errors.Is(res[0].Err, ErrConflict) {
			return false, false, fmt.Errorf("schedule %q: create slot job: %v", s.Name, res)
		}
		created = res[0].Err == nil
	}
	moved, err = e.moveCursor(ctx, s, p.Slot)
	return created, moved, err
}

// observeSlot tells the store, when it observes slots (SlotObserver),
// what firing one did.
func (sc *scheduler) observeSlot(ctx context.Context, p *FireScheduleParams, created bool) {
	e := sc.e
	if o, ok := e.store.(SlotObserver); ok {
		o.ObserveSlot(ctx, p, created)
	}
}

// slotHeld reports whether a job not made for slot holds the id of the
// slot's job, which the store will then not create: a job that took a
// ScheduleID (before clients were refused those ids, or by an import). A
// job of the slot's topic created at or after the slot is the slot's own,
// fired by another instance meanwhile; a keyed schedule's job (its key's
// id) from an earlier slot is the guard against overlapping runs that
// docs/api.md describes, not a block. A failed read reports false: the
// slot's create meets the same store next.
func (sc *scheduler) slotHeld(ctx context.Context, slot time.Time, job *Job) bool {
	e := sc.e
	if IsKeyID(job.ID) {
		return false
	}
	held, err := e.store.GetJob(ctx, job.ID)
	if err != nil {
		return false
	}
	return held.Topic != job.Topic || held.CreatedAt.Before(StoreTime(slot))
}

// ImportSchedule stores an exported schedule as it was (its CreatedAt,
// UpdatedAt and cursor kept) unless one of its name exists, which it
// reports by returning false. It is validated as PutSchedule validates.
// Errors: *FieldError, those of the store.
func (e *Engine) ImportSchedule(ctx context.Context, s *Schedule) (bool, error) {
	if s == nil {
		return false, noParams("import schedule")
	}
	now := StoreTime(e.clock.Now())
	if err := e.validateSchedule(s, now); err != nil {
		return false, err
	}
	stored := s.Clone()
	stored.Start, stored.End = StoreTime(s.Start), StoreTime(s.End)
	if stored.CreatedAt.IsZero() {
		stored.CreatedAt = now
	}
	if stored.UpdatedAt.IsZero() {
		stored.UpdatedAt = stored.CreatedAt
	}
	stored.CreatedAt, stored.UpdatedAt = StoreTime(stored.CreatedAt), StoreTime(stored.UpdatedAt)
	stored.Cursor = StoreTime(s.Cursor)
	err := writeSchedule(ctx, e.store, stored, 0)
	if errors.Is(err, ErrConflict) {
		return false, nil // one of its name exists
	}
	if err != nil {
		return false, err
	}
	e.schedules.lookNow()
	return true, nil
}
