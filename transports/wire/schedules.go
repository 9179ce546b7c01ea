package wire

import (
	"context"
	"errors"
	"fmt"

	"github.com/delayq/delayq/core"
)

// NextRunsDefault is how many upcoming slots a schedule is shown with
// unless the request's next says otherwise.
const NextRunsDefault = 3

// ValidateNext checks a request's next, how many upcoming slots to show:
// 0 to core.UpcomingMax. Errors: a *core.FieldError naming next.
func ValidateNext(n int) error {
	if n < 0 || n > core.UpcomingMax {
		return core.Invalid("next", "next must be an integer between 0 and %d", core.UpcomingMax)
	}
	return nil
}

// ScheduleShown returns a copy of sc with the defaults every transport
// shows filled in: time_zone UTC, missed skip, and missed_limit's default
// under missed all.
func ScheduleShown(sc *core.Schedule) *core.Schedule {
	v := *sc
	if v.TimeZone == "" {
		v.TimeZone = "UTC"
	}
	if v.Missed == "" {
		v.Missed = core.MissedSkip
	}
	if v.Missed == core.MissedAll && v.MissedLimit == 0 {
		v.MissedLimit = core.MissedLimitDefault
	}
	return &v
}

// ScheduleFor returns the schedule name for a call whose allow says
// whether it may use a topic (the transport's check, which logs and words
// the refusal). A schedule of a topic the call may not use is not found,
// as one that does not exist, so that a token restricted to topics learns
// nothing of other topics' schedules. Errors: core.ErrNotFound with a
// message naming the schedule, the store's.
func ScheduleFor(ctx context.Context, e *core.Engine, name string, allow func(topic string) error) (*core.Schedule, error) {
	sc, err := e.GetSchedule(ctx, name)
	if err == nil && allow(sc.Topic) != nil {
		err = core.ErrNotFound
	}
	if errors.Is(err, core.ErrNotFound) {
		return nil, WithMessage(fmt.Sprintf("schedule %q not found", name), err)
	}
	return sc, err
}

// AllowSchedulePut checks that a call may put sc: it must be allowed sc's
// topic and, when it replaces a schedule, that schedule's topic, so that a
// token restricted to topics can neither aim a schedule at another topic
// nor take over another topic's schedule. allow is the transport's check
// of a topic; its error is returned for sc's topic. A schedule of a topic
// the call may not use is answered core.ErrNotFound naming only sc's name,
// as ScheduleFor answers a read of it, so that a put learns neither that
// the name is taken nor by which topic. Other errors: the store's.
func AllowSchedulePut(ctx context.Context, e *core.Engine, sc *core.Schedule, allow func(topic string) error) error {
	if err := allow(sc.Topic); err != nil {
		return err
	}
	old, err := e.GetSchedule(ctx, sc.Name)
	switch {
	case err == nil:
		if allow(old.Topic) != nil {
			return WithMessage(fmt.Sprintf("schedule %q not found", sc.Name), core.ErrNotFound)
		}
		return nil
	case errors.Is(err, core.ErrNotFound):
		return nil
	}
	return err
}
