package core

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"
	// Schedules name IANA zones; a server image without a zoneinfo
	// database (distroless, scratch) must still know them.
	_ "time/tzdata"

	cron "github.com/netresearch/go-cron"
)

// Policies for slots that no instance fired on time (Schedule.Missed).
const (
	// MissedSkip fires none of the missed slots: the schedule goes on with
	// the next slot (the default).
	MissedSkip = "skip"
	// MissedLast fires the latest missed slot once.
	MissedLast = "last"
	// MissedAll fires every missed slot, the latest MissedLimit of them, in
	// order.
	MissedAll = "all"
)

// Bounds of schedules.
const (
	// MaxScheduleNameLen is the longest schedule name.
	MaxScheduleNameLen = 200
	// MissedLimitDefault is a schedule's MissedLimit unless set.
	MissedLimitDefault = 10
	// MissedLimitMax is the largest MissedLimit.
	MissedLimitMax = 1000
	// JitterMax is the largest Jitter.
	JitterMax = 24 * time.Hour
	// EveryMin is the shortest `@every` interval.
	EveryMin = time.Second
	// SlotGrace is how late a slot may be fired and still be on time: a slot
	// fired later than SlotGrace after its time is missed, and its
	// schedule's Missed policy decides whether it fires.
	SlotGrace = time.Minute
	// slotScanMax bounds how many slots one look at a schedule walks
	// through; a schedule further behind than that (a per-second schedule
	// after a day of downtime) starts again at the latest slots.
	slotScanMax = 100_000
)

// Schedule is a recurring job: a cron expression or interval in a time
// zone, and the job each of its slots creates on a topic. Instances share
// schedules through the store, as records of KindSchedule; whichever fires
// a slot first does so, and the cursor (the last slot fired), moved by
// compare-and-set, keeps the others from firing it again. The JSON form is
// the record's value.
type Schedule struct {
	// Name identifies the schedule: 1-200 characters of [A-Za-z0-9_-.].
	Name string `json:"name"`
	// Cron is a cron expression of 5 fields (minute hour day-of-month
	// month day-of-week) or 6 (seconds first), a descriptor (@yearly,
	// @monthly, @weekly, @daily, @hourly), or "@every <duration>" for a
	// fixed interval counted from Start or, without one, from CreatedAt.
	Cron string `json:"cron"`
	// TimeZone is the IANA zone whose wall clock Cron reads; empty is UTC.
	TimeZone string `json:"time_zone,omitempty"`
	// Topic is where each slot's job goes.
	Topic string `json:"topic"`
	// Job is the template of each slot's job.
	Job ScheduleJob `json:"job"`
	// Start, when set, is the earliest slot; End, when set, the latest.
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// Paused schedules fire nothing; slots that pass meanwhile are never
	// fired.
	Paused bool `json:"paused,omitempty"`
	// Missed is what happens to slots no instance fired within SlotGrace
	// (downtime): MissedSkip (empty), MissedLast or MissedAll.
	Missed string `json:"missed,omitempty"`
	// MissedLimit bounds MissedAll: the latest that many missed slots
	// fire. Defaults to MissedLimitDefault.
	MissedLimit int `json:"missed_limit,omitempty"`
	// Jitter, when set, spreads each slot's job over [slot, slot+Jitter)
	// (SlotRunAt), so that the jobs of many schedules on one cron do not all
	// come at once; 0 to JitterMax.
	Jitter time.Duration `json:"jitter,omitempty"`
	// CreatedAt is when the schedule was first stored; UpdatedAt when its
	// definition last changed. Slots at or before UpdatedAt never fire, so
	// a change applies from when it is made.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Cursor is the last slot fired (or passed over), zero before the
	// first: state the engine moves as it fires slots, not configuration;
	// Engine.PutSchedule keeps it.
	Cursor time.Time `json:"cursor,omitzero"`

	// rev is the revision of the schedule's record as read (Record).
	rev uint64
}

// ScheduleJob is the template of a schedule's jobs: the fields a push sets
// but for the time, which each slot gives. Zero fields take the topic's
// defaults, as a push's do.
type ScheduleJob struct {
	Body        json.RawMessage `json:"body,omitempty"`
	Key         string          `json:"key,omitempty"`
	TTR         time.Duration   `json:"ttr,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	Priority    int             `json:"priority,omitempty"`
}

// SameDefinition reports whether two schedules define the same thing:
// equal but for timestamps and cursor. A put of the same definition keeps
// UpdatedAt, so that a deployment tool applying its schedules again does
// not make the missed slots of a downtime look like a change.
func (s *Schedule) SameDefinition(o *Schedule) bool {
	a, b := *s, *o
	for _, x := range []*Schedule{&a, &b} {
		x.CreatedAt, x.UpdatedAt, x.Cursor = time.Time{}, time.Time{}, time.Time{}
		x.Start, x.End = x.Start.UTC(), x.End.UTC()
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// ValidateScheduleName checks a schedule name, which follows the rules of
// topic names.
func ValidateScheduleName(name string) error {
	if err := ValidateTopicName(name); err != nil {
		fe := err.(*FieldError)
		return Invalid("name", "schedule %s", strings.TrimPrefix(fe.Message, "topic "))
	}
	return nil
}

// Validate checks a schedule's definition, as an engine is given it (the
// job template's body and limits are the engine's to check).
func (s *Schedule) Validate() error {
	if err := ValidateScheduleName(s.Name); err != nil {
		return err
	}
	if _, err := s.spec(); err != nil {
		return err
	}
	if err := ValidateTopicName(s.Topic); err != nil {
		return err
	}
	switch s.Missed {
	case "", MissedSkip, MissedLast, MissedAll:
	default:
		return Invalid("missed", "missed must be skip, last or all, not %q", s.Missed)
	}
	if s.MissedLimit < 0 || s.MissedLimit > MissedLimitMax {
		return Invalid("missed_limit", "missed_limit must be between 0 (the default, %d) and %d", MissedLimitDefault, MissedLimitMax)
	}
	if s.Jitter < 0 || s.Jitter > JitterMax {
		return Invalid("jitter", "jitter must be between 0 and %s", JitterMax)
	}
	if !s.Start.IsZero() && !s.End.IsZero() && !s.End.After(s.Start) {
		return Invalid("end", "end must be after start")
	}
	if len(s.Job.Key) > MaxKeyLen {
		return Invalid("job.key", "key must be at most %d characters", MaxKeyLen)
	}
	if s.Job.TTR < 0 || s.Job.MaxAttempts < 0 {
		return Invalid("job", "ttr and max_attempts must not be negative")
	}
	return nil
}

// spec is a parsed Cron in its zone.
type spec struct {
	loc   *time.Location
	every time.Duration // "@every": a fixed interval
	cron  cron.Schedule // otherwise: wall-clock slots, read in UTC
}

// cronParser reads 5 or 6 fields (seconds optional, first) and the
// descriptors. Day of month and day of week, when both are restricted, must
// both match (go-cron's rule).
var cronParser = cron.MustNewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func (s *Schedule) spec() (spec, error) {
	loc, err := loadZone(s.TimeZone)
	if err != nil {
		return spec{}, err
	}
	c := strings.TrimSpace(s.Cron)
	if c == "" {
		return spec{}, Invalid("cron", "cron must not be empty")
	}
	if rest, ok := strings.CutPrefix(c, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < EveryMin || d%time.Millisecond != 0 {
			return spec{}, Invalid("cron", "@every needs a duration of at least %s in whole milliseconds, such as 90s", EveryMin)
		}
		return spec{loc: loc, every: d}, nil
	}
	upper := strings.ToUpper(c)
	if strings.HasPrefix(upper, "TZ=") || strings.HasPrefix(upper, "CRON_TZ=") {
		return spec{}, Invalid("cron", "give the zone in time_zone, not in cron")
	}
	sched, err := cronParser.Parse(c)
	if err != nil {
		return spec{}, Invalid("cron", "cron %q: %v", c, err)
	}
	return spec{loc: loc, cron: sched}, nil
}

// zones caches the locations loadZone loaded: time.LoadLocation reads and
// parses the zone's file at each call, and the schedule loop asks often.
var zones sync.Map // name -> *time.Location

// loadZone returns the IANA zone name, UTC for "".
func loadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return nil, Invalid("time_zone", "time_zone %q is not an IANA time zone name", name)
	}
	zones.Store(name, l)
	return l, nil
}

// Next returns the schedule's first slot after t, or zero when it has none
// (past End). Slots are whole instants; for a cron expression, delayq's own
// rules for daylight-saving transitions hold, whatever the parser does:
// a wall-clock time that occurs twice (a fall-back) fires once, at its
// first occurrence, and one that does not occur (a spring-forward gap)
// fires at the instant the gap ends, once even when several slots fall in
// the gap. Start and End bound the slots; Cursor and UpdatedAt do not
// (see Due).
func (s *Schedule) Next(t time.Time) time.Time {
	sp, err := s.spec()
	if err != nil {
		return time.Time{}
	}
	return s.next(sp, t)
}

func (s *Schedule) next(sp spec, t time.Time) time.Time {
	if !s.Start.IsZero() && t.Before(s.Start) {
		t = s.Start.Add(-time.Millisecond)
	}
	var n time.Time
	if sp.every > 0 {
		anchor := s.Start
		if anchor.IsZero() {
			anchor = s.CreatedAt
		}
		anchor = StoreTime(anchor)
		if t.Before(anchor) {
			n = anchor
		} else {
			n = anchor.Add((t.Sub(anchor)/sp.every + 1) * sp.every)
		}
	} else {
		n = nextWall(sp, t)
	}
	if n.IsZero() || !s.End.IsZero() && n.After(s.End) {
		return time.Time{}
	}
	return n.UTC()
}

// nextWall returns the first slot of a cron spec after t: the parser walks
// the wall clock of the spec's zone as if it were UTC (no transitions), and
// wallInstant maps each wall time it gives back onto the zone's instants.
func nextWall(sp spec, t time.Time) time.Time {
	w := wallOf(t, sp.loc)
	for range 4 { // a wall time maps at most an hour or two back
		w = sp.cron.Next(w)
		if w.IsZero() {
			return time.Time{}
		}
		if u := wallInstant(w, sp.loc); u.After(t) {
			return u
		}
	}
	return time.Time{}
}

// wallOf returns the wall clock of t in loc, held in a UTC time.
func wallOf(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	y, mo, d := l.Date()
	h, mi, sec := l.Clock()
	return time.Date(y, mo, d, h, mi, sec, l.Nanosecond(), time.UTC)
}

// wallInstant returns the first instant at which loc's wall clock shows w
// (a wall time held in UTC); when it never does (a spring-forward gap), the
// instant the gap ends. Go's time.Date leaves both cases unspecified.
func wallInstant(w time.Time, loc *time.Location) time.Time {
	// The offsets in force well before and well after w: a transition near
	// w lies between them (zones change at most once within a day).
	_, before := w.Add(-15 * time.Hour).In(loc).Zone()
	_, after := w.Add(15 * time.Hour).In(loc).Zone()
	var first time.Time
	for _, off := range []int{before, after} {
		u := w.Add(-time.Duration(off) * time.Second)
		if wallOf(u, loc).Equal(w) && (first.IsZero() || u.Before(first)) {
			first = u
		}
	}
	if !first.IsZero() {
		return first
	}
	// In a gap: read with the offset before it, w names an instant past
	// the transition; the zone in force there starts at the gap's end.
	start, _ := w.Add(-time.Duration(before) * time.Second).In(loc).ZoneBounds()
	return start
}

// Due returns what firing the schedule at now involves: the slots to fire,
// oldest first, and how many slots were missed and not fired. The slots
// considered are those after its Cursor and its UpdatedAt, up to now. Those
// within SlotGrace of now are on time and fire; older ones were missed
// (downtime) and fire by the Missed policy: none, the latest, or the
// latest MissedLimit. pass is the latest slot considered, which the cursor
// moves to even when it does not fire; zero when none was. A paused
// schedule has nothing due.
func (s *Schedule) Due(now time.Time) (fire []time.Time, missed int, pass time.Time) {
	if s.Paused {
		return nil, 0, time.Time{}
	}
	sp, err := s.spec()
	if err != nil {
		return nil, 0, time.Time{}
	}
	from := s.UpdatedAt
	if s.Cursor.After(from) {
		from = s.Cursor
	}
	keep := 0 // missed slots kept to fire
	switch s.Missed {
	case MissedLast:
		keep = 1
	case MissedAll:
		keep = s.MissedLimit
		if keep == 0 {
			keep = MissedLimitDefault
		}
	}
	var late, onTime []time.Time
	n := 0
	add := func(t time.Time) {
		n++
		pass = t
		if now.Sub(t) <= SlotGrace {
			onTime = append(onTime, t)
			return
		}
		if keep > 0 {
			if len(late) == keep {
				late = late[1:]
			}
			late = append(late, t)
		}
	}
	for t := s.next(sp, from); !t.IsZero() && !t.After(now); t = s.next(sp, t) {
		if n == slotScanMax {
			// Far behind: n is a lower bound; go on from the latest
			// slots alone.
			late, onTime = nil, nil
			for _, t := range s.catchUp(sp, now, keep+int(SlotGrace/EveryMin)+1) {
				add(t)
			}
			break
		}
		add(t)
	}
	if n == 0 {
		return nil, 0, time.Time{}
	}
	fire = append(late, onTime...)
	return fire, n - len(fire), pass
}

// catchUp returns the latest limit slots up to now, oldest first, without
// walking from the cursor: it walks from a window before now that it
// widens until it holds a slot.
func (s *Schedule) catchUp(sp spec, now time.Time, limit int) []time.Time {
	for w := 2 * SlotGrace; w <= 800*24*time.Hour; w *= 4 {
		var latest []time.Time
		n := 0
		for t := s.next(sp, now.Add(-w)); !t.IsZero() && !t.After(now) && n < slotScanMax; t = s.next(sp, t) {
			n++
			if len(latest) == limit {
				latest = latest[1:]
			}
			latest = append(latest, t)
		}
		if len(latest) > 0 {
			return latest
		}
	}
	return nil
}

// scheduleIDPrefix starts every ScheduleID.
const scheduleIDPrefix = "s-"

// ScheduleID returns the id of the job a schedule creates for a slot: "s-"
// and 32 hex digits of the SHA-256 of the schedule's name and the slot (ms),
// the same on every instance. The cursor, not the id, keeps a slot from
// firing twice: the job's id may be reused once it has finished.
func ScheduleID(name string, slot time.Time) string {
	h := sha256.New()
	h.Write([]byte(name))
	var ms [9]byte
	binary.BigEndian.PutUint64(ms[1:], uint64(slot.UnixMilli()))
	h.Write(ms[:])
	return scheduleIDPrefix + hex.EncodeToString(h.Sum(nil)[:keyIDHexLen/2])
}

// SlotRunAt returns the run_at of the job of a slot: the slot, plus with
// Jitter an offset below it, in whole milliseconds, taken from the SHA-256
// of the schedule's name and the slot, so that every instance, and every
// firing of the slot, puts the job at the same time.
func (s *Schedule) SlotRunAt(slot time.Time) time.Time {
	ms := s.Jitter.Milliseconds()
	if ms <= 0 {
		return slot
	}
	h := sha256.New()
	h.Write([]byte(s.Name))
	var b [9]byte
	b[0] = 1 // not ScheduleID's input, so that the offset tells nothing of the id
	binary.BigEndian.PutUint64(b[1:], uint64(slot.UnixMilli()))
	h.Write(b[:])
	offset := binary.BigEndian.Uint64(h.Sum(nil)) % uint64(ms)
	return slot.Add(time.Duration(offset) * time.Millisecond)
}

// IsScheduleID reports whether id has the form of a ScheduleID, which
// clients may not choose: one who could would block a slot of a schedule
// on another topic.
func IsScheduleID(id string) bool { return isDerivedID(id, scheduleIDPrefix) }

// FireScheduleParams is what the engine tells a SlotObserver of a slot it
// fired or passed over.
type FireScheduleParams struct {
	// Name of the schedule.
	Name string
	// Slot is where the schedule's cursor moved.
	Slot time.Time
	// Job is the slot's job; nil when the slot was passed over (missed,
	// or its job invalid).
	Job *Job
	// Missed is how many slots up to Slot were missed and not fired.
	Missed int
	// Blocked tells that a job not made for this slot already held Job's
	// id (a job that took the slot's id; a keyed schedule's earlier run is
	// no block), so the slot created nothing unless that job went first.
	Blocked bool
}

// Clone returns a deep copy of the schedule.
func (s *Schedule) Clone() *Schedule {
	c := *s
	c.Job.Body = slices.Clone(s.Job.Body)
	return &c
}
