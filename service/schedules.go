package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
	"golang.org/x/sync/errgroup"
)

// ListSchedules returns every schedule by name; for a token restricted to
// some topics, those of its topics.
func (s *Service) ListSchedules(ctx context.Context) ([]*core.Schedule, error) {
	list, err := s.engine.ListSchedules(ctx)
	return keepAllowed(ctx, list, func(sc *core.Schedule) string { return sc.Topic }), err
}

// GetSchedule reads the schedule name. A schedule of a topic the caller
// may not use is not found, as one that does not exist, so that a token
// restricted to topics learns nothing of other topics' schedules. Errors:
// core.ErrNotFound naming the schedule, the store's.
func (s *Service) GetSchedule(ctx context.Context, name string) (*core.Schedule, error) {
	sc, err := s.engine.GetSchedule(ctx, name)
	if err == nil && !Allows(ctx, sc.Topic) {
		err = core.ErrNotFound
	}
	if errors.Is(err, core.ErrNotFound) {
		return nil, wire.WithMessage(fmt.Sprintf("schedule %q not found", name), err)
	}
	return sc, err
}

// PutSchedule creates or replaces sc and returns it as stored. The caller
// must be allowed sc's topic and, when it replaces a schedule, that
// schedule's topic, so that a token restricted to topics can neither aim a
// schedule at another topic nor take over another topic's schedule; a
// schedule of a topic it may not use is answered not found naming only
// sc's name, as GetSchedule answers it. Errors: the engine's naming the
// field (nothing is stored), wire.ErrPermissionDenied, core.ErrNotFound.
func (s *Service) PutSchedule(ctx context.Context, sc *core.Schedule) (*core.Schedule, error) {
	if err := s.AllowTopic(ctx, sc.Topic); err != nil {
		return nil, err
	}
	old, err := s.engine.GetSchedule(ctx, sc.Name)
	switch {
	case err == nil && !Allows(ctx, old.Topic):
		return nil, wire.WithMessage(fmt.Sprintf("schedule %q not found", sc.Name), core.ErrNotFound)
	case err != nil && !errors.Is(err, core.ErrNotFound):
		return nil, err
	}
	return s.engine.PutSchedule(ctx, sc)
}

// DeleteSchedule drops the schedule name: no slot fires after it; the
// jobs it created stay. Errors as GetSchedule.
func (s *Service) DeleteSchedule(ctx context.Context, name string) error {
	sc, err := s.GetSchedule(ctx, name)
	if err != nil {
		return err
	}
	return Describe(s.engine.DeleteSchedule(ctx, sc.Name), core.ErrNotFound, "schedule %q not found", sc.Name)
}

// RunSchedule pushes one job of the schedule name's template, due now (not
// after the topic's delay), as Push would (a fresh id, or the key's on a
// topic with unique keys), beside its slots: the schedule's cursor does
// not move, and a paused schedule runs too, since the caller asks for it. Errors: as GetSchedule, and as Push
// (a conflict when a unique key's job is unfinished, the token's quota).
func (s *Service) RunSchedule(ctx context.Context, name string) (core.PushResult, error) {
	sc, err := s.GetSchedule(ctx, name)
	if err != nil {
		return core.PushResult{}, err
	}
	p := sc.PushParams()
	now := s.engine.Clock().Now()
	p.RunAt = &now
	return s.Push(ctx, p)
}

// ScheduleRunsMax is the most past runs ScheduleRuns lists.
const ScheduleRunsMax = core.UpcomingMax

// ScheduleRun is a past slot of a schedule and the job it made.
type ScheduleRun struct {
	// Slot is when the slot was due.
	Slot time.Time
	// JobID is the id a slot's job takes: core.ScheduleID of the name and
	// slot.
	JobID string
	// Job is the job of JobID as it is now; nil when there is none: the
	// slot was passed over (missed skip, or a paused schedule), its job was
	// removed, the slot is of the definition as it is now but fired under
	// an earlier one, or the schedule's job has a key on a topic with
	// unique keys (its jobs take the key's id).
	Job *core.Job
}

// ScheduleRuns returns the last n slots of sc, read by GetSchedule, up to
// its cursor (last_slot), newest first, with the jobs they made as they
// are now. The slots are those of sc's definition as it is now, since its
// creation. Errors: core.ErrInvalidArgument on runs when n is not 0 to
// ScheduleRunsMax, the store's.
func (s *Service) ScheduleRuns(ctx context.Context, sc *core.Schedule, n int) ([]ScheduleRun, error) {
	if n < 0 || n > ScheduleRunsMax {
		return nil, core.Invalid("runs", "runs must be an integer between 0 and %d", ScheduleRunsMax)
	}
	slots := sc.Past(n)
	out := make([]ScheduleRun, len(slots))
	// The jobs are read a few at a time: one by one, the 100 reads of a
	// shared store each wait a round trip.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(scheduleRunReaders)
	for i, slot := range slots {
		r := &out[i]
		*r = ScheduleRun{Slot: slot, JobID: core.ScheduleID(sc.Name, slot)}
		g.Go(func() error {
			j, err := s.engine.Get(gctx, r.JobID)
			switch {
			case err == nil:
				r.Job = j
			case !errors.Is(err, core.ErrNotFound):
				return err
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// scheduleRunReaders is how many jobs ScheduleRuns reads at once.
const scheduleRunReaders = 8
