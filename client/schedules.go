package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ScheduleConfig is a recurring schedule for PutSchedule (docs/api.md,
// "HTTP: schedules"): a job on Topic at each slot of Cron in TimeZone.
type ScheduleConfig struct {
	// Cron is a cron expression of 5 fields or 6 (seconds first), a
	// descriptor such as "@hourly", or "@every 90s". Required.
	Cron string
	// TimeZone is the IANA zone Cron reads, such as "Europe/Paris"; "":
	// UTC.
	TimeZone string
	// Topic is where each slot's job goes. Required.
	Topic string
	// Job is the template of each slot's job.
	Job ScheduleJob
	// Start and End, when set, bound the slots.
	Start, End time.Time
	// Paused schedules fire nothing.
	Paused bool
	// Missed is what happens to slots a downtime missed: "skip" (""),
	// "last", or "all" (the latest MissedLimit of them).
	Missed      string
	MissedLimit int
	// Jitter, 0 to 24h, spreads each slot's job over [slot, slot+Jitter),
	// the same offset on every instance of the service.
	Jitter time.Duration
}

// ScheduleJob is the template of a schedule's jobs. Zero fields take the
// topic's defaults.
type ScheduleJob struct {
	// Body is the jobs' body, as PushParams.Body.
	Body        any
	Key         string
	TTR         time.Duration
	MaxAttempts int
	Priority    int
}

// Schedule is a schedule as the service shows it.
type Schedule struct {
	Name     string
	Cron     string
	TimeZone string
	Topic    string
	// Job is the template; its Body is a json.RawMessage.
	Job         ScheduleJob
	Start, End  time.Time
	Paused      bool
	Missed      string
	MissedLimit int
	Jitter      time.Duration
	// CreatedAt is when it was first stored, UpdatedAt when its
	// definition last changed.
	CreatedAt, UpdatedAt time.Time
	// LastSlot is the last slot fired or passed over; zero before the
	// first.
	LastSlot time.Time
	// NextRuns are its next slots, as many as asked for.
	NextRuns []time.Time
}

type scheduleJobWire struct {
	Body        json.RawMessage `json:"body,omitempty"`
	Key         string          `json:"key,omitempty"`
	TTR         *jsonDuration   `json:"ttr,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	Priority    int             `json:"priority,omitempty"`
}

type scheduleWire struct {
	Name        string          `json:"name,omitempty"`
	Cron        string          `json:"cron"`
	TimeZone    string          `json:"time_zone,omitempty"`
	Topic       string          `json:"topic"`
	Job         scheduleJobWire `json:"job"`
	Start       *time.Time      `json:"start,omitempty"`
	End         *time.Time      `json:"end,omitempty"`
	Paused      bool            `json:"paused,omitempty"`
	Missed      string          `json:"missed,omitempty"`
	MissedLimit int             `json:"missed_limit,omitempty"`
	Jitter      *jsonDuration   `json:"jitter,omitempty"`
	CreatedAt   *time.Time      `json:"created_at,omitempty"`
	UpdatedAt   *time.Time      `json:"updated_at,omitempty"`
	LastSlot    *time.Time      `json:"last_slot,omitempty"`
	NextRuns    []time.Time     `json:"next_runs,omitempty"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func (c *ScheduleConfig) wire() ([]byte, error) {
	body, err := marshalBody("job.body", c.Job.Body)
	if err != nil {
		return nil, err
	}
	w := scheduleWire{Cron: c.Cron, TimeZone: c.TimeZone, Topic: c.Topic, Start: optTime(c.Start), End: optTime(c.End),
		Paused: c.Paused, Missed: c.Missed, MissedLimit: c.MissedLimit,
		Job: scheduleJobWire{Body: body, Key: c.Job.Key, MaxAttempts: c.Job.MaxAttempts, Priority: c.Job.Priority}}
	if c.Job.TTR != 0 {
		d := jsonDuration(c.Job.TTR)
		w.Job.TTR = &d
	}
	if c.Jitter != 0 {
		d := jsonDuration(c.Jitter)
		w.Jitter = &d
	}
	return jsonBody(&w), nil
}

// UnmarshalJSON reads a schedule in the service's form.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	var w scheduleWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Schedule{Name: w.Name, Cron: w.Cron, TimeZone: w.TimeZone, Topic: w.Topic,
		Job:   ScheduleJob{Body: w.Job.Body, Key: w.Job.Key, MaxAttempts: w.Job.MaxAttempts, Priority: w.Job.Priority},
		Start: timeOf(w.Start), End: timeOf(w.End), Paused: w.Paused, Missed: w.Missed, MissedLimit: w.MissedLimit,
		CreatedAt: timeOf(w.CreatedAt), UpdatedAt: timeOf(w.UpdatedAt), LastSlot: timeOf(w.LastSlot), NextRuns: w.NextRuns}
	if w.Job.TTR != nil {
		s.Job.TTR = time.Duration(*w.Job.TTR)
	}
	if w.Jitter != nil {
		s.Jitter = time.Duration(*w.Jitter)
	}
	return nil
}

// nextQuery asks for next upcoming slots; negative: the service's default.
func nextQuery(next int) url.Values {
	if next < 0 {
		return nil
	}
	return url.Values{"next": {strconv.Itoa(next)}}
}

// PutSchedule creates or replaces a schedule (PUT /v1/schedules/{name})
// and returns it with its next runs. The same definition again changes
// nothing. Errors: ErrInvalidArgument (Field names the field, such as
// "cron" or "job.ttr"), ErrPermissionDenied (admin), ErrUnavailable.
func (c *Client) PutSchedule(ctx context.Context, name string, cfg *ScheduleConfig) (*Schedule, error) {
	body, err := cfg.wire()
	if err != nil {
		return nil, err
	}
	var s Schedule
	if _, err := c.do(ctx, &request{method: http.MethodPut, path: "/v1/schedules/" + segment(name), body: body}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// PutScheduleJSON is PutSchedule with the definition given as the JSON
// body of PUT /v1/schedules/{name} (docs/api.md), sent byte for byte, and
// the schedule returned with its next next runs (0-100; negative: the
// service's default, 3) as GetSchedule. Errors: ErrInvalidArgument when
// def is not one JSON object (checked before sending), else those of
// PutSchedule.
func (c *Client) PutScheduleJSON(ctx context.Context, name string, def json.RawMessage, next int) (*Schedule, error) {
	body, err := rawObject("schedule", def)
	if err != nil {
		return nil, err
	}
	var s Schedule
	if _, err := c.do(ctx, &request{method: http.MethodPut, path: "/v1/schedules/" + segment(name), query: nextQuery(next), body: body}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// GetSchedule reads a schedule with its next next runs (0-100; negative:
// the service's default, 3) (GET /v1/schedules/{name}). Errors:
// ErrNotFound, ErrPermissionDenied, ErrUnavailable.
func (c *Client) GetSchedule(ctx context.Context, name string, next int) (*Schedule, error) {
	var s Schedule
	if _, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/schedules/" + segment(name), query: nextQuery(next)}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSchedules lists every schedule by name (GET /v1/schedules), each
// with its next next runs as GetSchedule. Errors: ErrPermissionDenied,
// ErrUnavailable.
func (c *Client) ListSchedules(ctx context.Context, next int) ([]*Schedule, error) {
	var out struct {
		Schedules []*Schedule `json:"schedules"`
	}
	if _, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/schedules", query: nextQuery(next)}, &out); err != nil {
		return nil, err
	}
	return out.Schedules, nil
}

// DeleteSchedule deletes a schedule (DELETE /v1/schedules/{name}); the jobs
// it created stay. Errors: ErrNotFound, ErrPermissionDenied,
// ErrUnavailable.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, &request{method: http.MethodDelete, path: "/v1/schedules/" + segment(name)}, nil)
	return err
}

// RunSchedule pushes one job of the schedule's template now, beside its
// slots, whose cursor does not move (POST /v1/schedules/{name}/run): a
// fresh id, or the key's on a topic with unique keys. Errors: ErrNotFound,
// ErrConflict when the template's unique key has an unfinished job, and
// as Push. Not idempotent: each call pushes a job.
func (c *Client) RunSchedule(ctx context.Context, name string) (*Pushed, error) {
	var out Pushed
	if _, err := c.do(ctx, &request{method: http.MethodPost, path: "/v1/schedules/" + segment(name) + "/run"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
