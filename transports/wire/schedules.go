package wire

import (
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
