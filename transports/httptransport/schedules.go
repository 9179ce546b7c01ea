package httptransport

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// scheduleRequest is the body of PUT /v1/schedules/{name}.
type scheduleRequest struct {
	Name        string          `json:"name"`
	Cron        string          `json:"cron"`
	TimeZone    string          `json:"time_zone"`
	Topic       string          `json:"topic"`
	Job         json.RawMessage `json:"job"`
	Start       json.RawMessage `json:"start"`
	End         json.RawMessage `json:"end"`
	Paused      bool            `json:"paused"`
	Missed      string          `json:"missed"`
	MissedLimit int             `json:"missed_limit"`
	Jitter      json.RawMessage `json:"jitter"`
}

// scheduleJobRequest is a schedule's job template.
type scheduleJobRequest struct {
	Body        json.RawMessage `json:"body"`
	Key         string          `json:"key"`
	TTR         json.RawMessage `json:"ttr"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
}

// DecodeSchedule decodes data, a schedule in the JSON form of the body of
// PUT /v1/schedules/{name}, for the schedule called name, as the HTTP API
// does: unknown fields and wrong types are errors, durations are Go
// duration strings or integers of milliseconds, times RFC 3339 or Unix
// seconds, and a "name" field must equal name. Engine.PutSchedule
// validates the values. Errors are *core.FieldError values naming the
// field.
func DecodeSchedule(name string, data []byte) (*core.Schedule, error) {
	var req scheduleRequest
	if err := wire.DecodeObject(data, "", &req); err != nil {
		return nil, err
	}
	if req.Name != "" && req.Name != name {
		return nil, core.Invalid("name", "name %q does not match the schedule of the path %q", req.Name, name)
	}
	sc := &core.Schedule{Name: name, Cron: req.Cron, TimeZone: req.TimeZone, Topic: req.Topic,
		Paused: req.Paused, Missed: req.Missed, MissedLimit: req.MissedLimit}
	var err error
	if sc.Start, _, err = parseTime("start", req.Start); err != nil {
		return nil, err
	}
	if sc.End, _, err = parseTime("end", req.End); err != nil {
		return nil, err
	}
	if sc.Jitter, _, err = parseDuration("jitter", req.Jitter); err != nil {
		return nil, err
	}
	if !isNull(req.Job) {
		var j scheduleJobRequest
		if err := wire.DecodeObject(req.Job, "job", &j); err != nil {
			return nil, err
		}
		sc.Job = core.ScheduleJob{Body: j.Body, Key: j.Key, MaxAttempts: j.MaxAttempts, Priority: j.Priority}
		if sc.Job.TTR, _, err = parseDuration("job.ttr", j.TTR); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// scheduleView is the wire form of a schedule.
type scheduleView struct {
	Name        string          `json:"name"`
	Cron        string          `json:"cron"`
	TimeZone    string          `json:"time_zone"`
	Topic       string          `json:"topic"`
	Job         scheduleJobView `json:"job"`
	Start       *wireTime       `json:"start,omitempty"`
	End         *wireTime       `json:"end,omitempty"`
	Paused      bool            `json:"paused"`
	Missed      string          `json:"missed"`
	MissedLimit int             `json:"missed_limit,omitempty"`
	Jitter      string          `json:"jitter,omitempty"`
	CreatedAt   wireTime        `json:"created_at"`
	UpdatedAt   wireTime        `json:"updated_at"`
	// LastSlot is the cursor: the last slot fired or passed over.
	LastSlot *wireTime `json:"last_slot"`
	// NextRuns are the slots still to fire, as the definition stands; not
	// in an export.
	NextRuns []wireTime `json:"next_runs,omitzero"`
	// LastRuns are the last slots and their jobs, newest first, when the
	// query's runs asks for them.
	LastRuns []scheduleRunView `json:"last_runs,omitzero"`
}

// scheduleRunView is a past slot of a schedule and its job's state now,
// absent when no job has the slot's id.
type scheduleRunView struct {
	Slot  wireTime `json:"slot"`
	JobID string   `json:"job_id"`
	State string   `json:"state,omitempty"`
}

type scheduleJobView struct {
	Body        json.RawMessage `json:"body"`
	Key         string          `json:"key,omitempty"`
	TTR         string          `json:"ttr,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	Priority    int             `json:"priority,omitempty"`
}

type scheduleListView struct {
	Schedules []scheduleView `json:"schedules"`
}

func optTime(t time.Time) *wireTime {
	if t.IsZero() {
		return nil
	}
	w := wireTime(t)
	return &w
}

func newScheduleView(stored *core.Schedule, now time.Time, next int) scheduleView {
	sc := wire.ScheduleShown(stored)
	v := scheduleView{
		Name: sc.Name, Cron: sc.Cron, TimeZone: sc.TimeZone, Topic: sc.Topic,
		Job:   scheduleJobView{Body: sc.Job.Body, Key: sc.Job.Key, MaxAttempts: sc.Job.MaxAttempts, Priority: sc.Job.Priority},
		Start: optTime(sc.Start), End: optTime(sc.End), Paused: sc.Paused,
		Missed: sc.Missed, MissedLimit: sc.MissedLimit,
		CreatedAt: wireTime(sc.CreatedAt), UpdatedAt: wireTime(sc.UpdatedAt), LastSlot: optTime(sc.Cursor),
		NextRuns: []wireTime{},
	}
	if len(v.Job.Body) == 0 {
		v.Job.Body = json.RawMessage("null")
	}
	if sc.Job.TTR > 0 {
		v.Job.TTR = sc.Job.TTR.String()
	}
	if sc.Jitter > 0 {
		v.Jitter = sc.Jitter.String()
	}
	for _, t := range stored.Upcoming(now, next) {
		v.NextRuns = append(v.NextRuns, wireTime(t))
	}
	return v
}

// queryNext returns the query's next: how many upcoming slots to show.
func queryNext(r *http.Request) (int, error) {
	q := r.URL.Query()
	if !q.Has("next") {
		return wire.NextRunsDefault, nil
	}
	n, err := strconv.Atoi(q.Get("next"))
	if err != nil {
		n = -1 // refused by ValidateNext with its message
	}
	return n, wire.ValidateNext(n)
}

// putSchedule serves PUT /v1/schedules/{name}: it stores the schedule and
// answers 200 with it as GET shows it. A token restricted to some topics
// may name only those, and may not replace a schedule of another topic.
func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	next, err := queryNext(r)
	if err != nil {
		return err
	}
	data, release, err := readBody(w, r, s.maxJobBytes)
	if err != nil {
		return err
	}
	sc, err := DecodeSchedule(name, data)
	release()
	if err != nil {
		return err
	}
	stored, err := s.svc.PutSchedule(r.Context(), sc)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, newScheduleView(stored, s.engine.Clock().Now(), next))
	return nil
}

// getSchedule serves GET /v1/schedules/{name}?next=3&runs=10: with runs,
// the last runs too.
func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	next, err := queryNext(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	runs := 0
	if q.Has("runs") {
		if runs, err = strconv.Atoi(q.Get("runs")); err != nil {
			runs = -1 // refused by ScheduleRuns with its message
		}
	}
	sc, err := s.svc.GetSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	last, err := s.svc.ScheduleRuns(r.Context(), sc, runs)
	if err != nil {
		return err
	}
	v := newScheduleView(sc, s.engine.Clock().Now(), next)
	if q.Has("runs") {
		v.LastRuns = make([]scheduleRunView, 0, len(last))
		for _, run := range last {
			rv := scheduleRunView{Slot: wireTime(run.Slot), JobID: run.JobID}
			if run.Job != nil {
				rv.State = string(run.Job.State)
			}
			v.LastRuns = append(v.LastRuns, rv)
		}
	}
	s.writeJSON(w, r, http.StatusOK, v)
	return nil
}

// listSchedules serves GET /v1/schedules?next=3: every schedule by name;
// for a token restricted to some topics, those of its topics.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	next, err := queryNext(r)
	if err != nil {
		return err
	}
	list, err := s.svc.ListSchedules(r.Context())
	if err != nil {
		return err
	}
	now := s.engine.Clock().Now()
	v := scheduleListView{Schedules: make([]scheduleView, 0, len(list))}
	for _, sc := range list {
		v.Schedules = append(v.Schedules, newScheduleView(sc, now, next))
	}
	s.writeJSON(w, r, http.StatusOK, v)
	return nil
}

// deleteSchedule serves DELETE /v1/schedules/{name}: 204.
func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.DeleteSchedule(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// runSchedule serves POST /v1/schedules/{name}/run: one job of the
// schedule's template now (service.RunSchedule), answered as POST /v1/jobs
// answers: 201 with Location, 200 when a unique key's job was replaced.
func (s *Server) runSchedule(w http.ResponseWriter, r *http.Request) error {
	res, err := s.svc.RunSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writePushed(w, res)
	return nil
}

// scheduleLine is a schedule's line of an export: the schedule as GET
// shows it (without next_runs) under "schedule", so that an import tells
// it from a job's line by its first key.
type scheduleLine struct {
	Schedule scheduleView `json:"schedule"`
}

// scheduleLinePrefix starts a schedule's line, spaces aside.
var scheduleLinePrefix = []byte(`{"schedule"`)

// scheduleExportLine returns a schedule's export line.
func scheduleExportLine(sc *core.Schedule) ([]byte, error) {
	v := newScheduleView(sc, time.Time{}, 0)
	v.NextRuns = nil
	return json.Marshal(scheduleLine{Schedule: v})
}

// isScheduleLine reports whether an import line is a schedule's.
func isScheduleLine(line []byte) bool {
	t := trimJSONSpace(line)
	if len(t) == 0 || t[0] != '{' {
		return false
	}
	t = trimJSONSpace(t[1:])
	return bytes.HasPrefix(t, scheduleLinePrefix[1:])
}

// decodeScheduleLine decodes a schedule's line of an import: the fields
// of PUT and those GET shows.
func decodeScheduleLine(line []byte) (*core.Schedule, error) {
	var l struct {
		Schedule json.RawMessage `json:"schedule"`
	}
	if err := wire.DecodeObject(line, "", &l); err != nil {
		return nil, err
	}
	var v struct {
		scheduleRequest
		CreatedAt json.RawMessage `json:"created_at"`
		UpdatedAt json.RawMessage `json:"updated_at"`
		LastSlot  json.RawMessage `json:"last_slot"`
		NextRuns  json.RawMessage `json:"next_runs"`
	}
	if err := wire.DecodeObject(l.Schedule, "schedule", &v); err != nil {
		return nil, err
	}
	if v.Name == "" {
		return nil, core.Invalid("schedule.name", "a schedule's line needs its name")
	}
	def, err := json.Marshal(v.scheduleRequest)
	if err != nil {
		return nil, err
	}
	sc, err := DecodeSchedule(v.Name, def)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *time.Time
	}{{"schedule.created_at", v.CreatedAt, &sc.CreatedAt}, {"schedule.updated_at", v.UpdatedAt, &sc.UpdatedAt}, {"schedule.last_slot", v.LastSlot, &sc.Cursor}} {
		if *f.dst, _, err = parseTime(f.name, f.raw); err != nil {
			return nil, err
		}
	}
	return sc, nil
}
