package connecttransport

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/transports/wire"
)

// Messages are turned into the engine's parameters here, checking the wire
// form only (durations, times, ranges the HTTP API checks while decoding);
// the engine validates the values, as it does for every transport.

// pushParams turns a job spec into the engine's push parameters. Errors are
// *core.FieldError values naming the field as the HTTP API does.
func pushParams(spec *delayqv1.JobSpec) (*core.PushParams, error) {
	if spec == nil {
		return nil, core.Invalid("job", "job is required")
	}
	return pushParamsAt(spec, 0)
}

// pushParamsAt is pushParams for a spec depth steps deep in a job's then:
// a step's steps are read up to core.ThenDepthMax, for the engine to check,
// their errors naming the fields then.*.
func pushParamsAt(spec *delayqv1.JobSpec, depth int) (*core.PushParams, error) {
	p := &core.PushParams{Topic: spec.Topic, ID: spec.Id, Key: spec.Key, URL: spec.Url}
	if spec.Body != "" {
		p.Body = json.RawMessage(spec.Body)
	}
	if err := core.ValidatePriority("priority", int(spec.Priority)); err != nil {
		return nil, err
	}
	p.Priority = int(spec.Priority)
	if spec.Backoff != nil {
		delays, err := parseDelays("backoff.delays", spec.Backoff.Delays)
		if err != nil {
			return nil, err
		}
		p.RetryDelays = delays
	}
	// An absent max_attempts takes the topic's; a zero one is an error
	// rather than a silent default.
	if spec.MaxAttempts != nil {
		if err := core.ValidateMaxAttempts("max_attempts", int(*spec.MaxAttempts)); err != nil {
			return nil, err
		}
		p.MaxAttempts = int(*spec.MaxAttempts)
	}
	if spec.Delay != "" {
		d, err := wire.ParseDurationText("delay", spec.Delay)
		if err != nil {
			return nil, err
		}
		p.Delay = &d
	}
	if spec.RunAt != "" {
		t, err := wire.ParseTimeText("run_at", spec.RunAt)
		if err != nil {
			return nil, err
		}
		p.RunAt = &t
	}
	if p.Delay != nil && p.RunAt != nil {
		return nil, core.Invalid("delay", "delay and run_at are exclusive")
	}
	if spec.ExpiresIn != "" {
		d, err := wire.ParseDurationText("expires_in", spec.ExpiresIn)
		if err != nil {
			return nil, err
		}
		p.ExpiresIn = &d
	}
	if spec.ExpiresAt != "" {
		t, err := wire.ParseTimeText("expires_at", spec.ExpiresAt)
		if err != nil {
			return nil, err
		}
		p.ExpiresAt = &t
	}
	if spec.Ttr != "" {
		ttr, err := wire.ParseDurationText("ttr", spec.Ttr)
		if err != nil {
			return nil, err
		}
		if err := core.ValidateTTR("ttr", ttr); err != nil {
			return nil, err
		}
		p.TTR = ttr
	}
	if spec.Then != nil {
		if depth >= core.ThenDepthMax {
			return nil, core.Invalid("then", "then holds more than %d steps", core.ThenDepthMax)
		}
		then, err := pushParamsAt(spec.Then, depth+1)
		if fe, ok := errors.AsType[*core.FieldError](err); ok {
			fe.Field = "then." + fe.Field
		}
		if err != nil {
			return nil, err
		}
		p.Then = then
	}
	return p, nil
}

// stepSpec is a job's next step p as a job spec: the fields it sets.
func stepSpec(p *core.PushParams) *delayqv1.JobSpec {
	if p == nil {
		return nil
	}
	s := &delayqv1.JobSpec{Topic: p.Topic, Key: p.Key, Url: p.URL, Priority: int32(p.Priority), Then: stepSpec(p.Then)}
	if len(p.Body) > 0 {
		s.Body = string(p.Body)
	}
	if p.Delay != nil {
		s.Delay = p.Delay.String()
	}
	if p.RunAt != nil {
		s.RunAt = timeText(*p.RunAt)
	}
	if p.TTR != 0 {
		s.Ttr = p.TTR.String()
	}
	if p.MaxAttempts != 0 {
		n := int32(p.MaxAttempts)
		s.MaxAttempts = &n
	}
	if len(p.RetryDelays) > 0 {
		s.Backoff = &delayqv1.JobBackoff{Delays: durationTexts(p.RetryDelays)}
	}
	if p.ExpiresAt != nil {
		s.ExpiresAt = timeText(*p.ExpiresAt)
	}
	if p.ExpiresIn != nil {
		s.ExpiresIn = p.ExpiresIn.String()
	}
	return s
}

// parseDuration decodes an optional duration field: "" is zero.
func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return wire.ParseDurationText(field, s)
}

// parseDelays decodes a retry schedule named field.
func parseDelays(field string, list []string) ([]time.Duration, error) {
	var delays []time.Duration
	for i, s := range list {
		d, err := wire.ParseDurationText(fmt.Sprintf("%s[%d]", field, i), s)
		if err != nil {
			return nil, err
		}
		delays = append(delays, d)
	}
	return delays, nil
}

// topicConfig turns a topic configuration into the engine's topic named
// name; nil is every default. The engine validates the values.
func topicConfig(name string, c *delayqv1.TopicConfig) (*core.Topic, error) {
	t := &core.Topic{Name: name}
	if c == nil {
		return t, nil
	}
	t.MaxAttempts, t.Concurrency, t.MaxInFlight = int(c.MaxAttempts), int(c.Concurrency), int(c.MaxInFlight)
	t.KeyConcurrency = int(c.KeyConcurrency)
	t.Fair = c.Fair
	t.UniqueKeys, t.OnDead = c.UniqueKeys, c.OnDead
	if ev := c.Events; ev != nil {
		t.Events = core.Events{Topic: ev.Topic, On: ev.On}
	}
	var err error
	if t.TTR, err = parseDuration("ttr", c.Ttr); err != nil {
		return nil, err
	}
	if t.ExpiresIn, err = parseDuration("expires_in", c.ExpiresIn); err != nil {
		return nil, err
	}
	if t.Delay, err = parseDuration("delay", c.Delay); err != nil {
		return nil, err
	}
	if t.Retention, err = parseDuration("retention", c.Retention); err != nil {
		return nil, err
	}
	if d := c.Delivery; d != nil {
		t.Delivery = core.Delivery{Type: d.Type, URL: d.Url, Secret: d.Secret, PreviousSecret: d.PreviousSecret,
			Subject: d.Subject, KafkaTopic: d.KafkaTopic, Success: d.Success, Method: d.Method, Headers: d.Headers,
			ErrorBody: d.ErrorBody, AllowJobURL: d.AllowJobUrl}
		if t.Delivery.Timeout, err = parseDuration("delivery.timeout", d.Timeout); err != nil {
			return nil, err
		}
	}
	if r := c.Rate; r != nil {
		t.Rate.Limit, t.Rate.Burst, t.Rate.PerKey = int(r.Limit), int(r.Burst), r.PerKey
		if t.Rate.Period, err = parseDuration("rate.period", r.Period); err != nil {
			return nil, err
		}
	}
	if b := c.Backoff; b != nil {
		t.Backoff.Factor, t.Backoff.Jitter = b.Factor, b.Jitter
		if t.Backoff.Initial, err = parseDuration("backoff.initial", b.Initial); err != nil {
			return nil, err
		}
		if t.Backoff.Max, err = parseDuration("backoff.max", b.Max); err != nil {
			return nil, err
		}
		// "" is absent, "0s" an explicit zero, and zeros names zeros: of
		// those fields that are 0, so that an update that gives one a value
		// (UpdateTopic's mask) needs not drop it from zeros.
		for _, z := range []struct {
			field string
			zero  bool
			given bool
		}{
			{"initial", t.Backoff.Initial == 0, b.Initial != ""},
			{"max", t.Backoff.Max == 0, b.Max != ""},
			{"jitter", t.Backoff.Jitter == 0, false},
		} {
			if z.zero && (z.given || slices.Contains(b.Zeros, z.field)) {
				t.Backoff.Zeros = append(t.Backoff.Zeros, z.field)
			}
		}
		for _, f := range b.Zeros {
			if !slices.Contains(core.BackoffZeroable, f) {
				t.Backoff.Zeros = append(t.Backoff.Zeros, f) // for the engine to refuse
			}
		}
		if t.Backoff.Delays, err = parseDelays("backoff.delays", b.Delays); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// timeText writes t as every transport answers times: RFC 3339 with
// milliseconds, in UTC.
func timeText(t time.Time) string { return t.UTC().Format(wire.TimeLayout) }

// bodyText is a job's body as given; an empty body is null.
func bodyText(body json.RawMessage) string {
	if len(body) == 0 {
		return "null"
	}
	return string(body)
}

// jobMessage is j as GetJob shows it: without its lease, with
// lease_expires_at only while reserved.
func jobMessage(j *core.Job) *delayqv1.Job {
	m := &delayqv1.Job{
		Id: j.ID, Topic: j.Topic, Key: j.Key, Body: bodyText(j.Body),
		RunAt: timeText(j.RunAt), Ttr: j.TTR.String(), MaxAttempts: int32(j.MaxAttempts),
		Priority: int32(j.Priority), Attempt: int32(j.Attempt), State: string(j.State),
		CreatedAt: timeText(j.CreatedAt), LastError: j.LastError, Url: j.URL, Then: stepSpec(j.Then),
	}
	if !j.UpdatedAt.IsZero() {
		m.UpdatedAt = timeText(j.UpdatedAt)
	}
	if j.State == core.StateReserved && !j.LeaseExpiresAt.IsZero() {
		m.LeaseExpiresAt = timeText(j.LeaseExpiresAt)
	}
	if !j.ExpiresAt.IsZero() {
		m.ExpiresAt = timeText(j.ExpiresAt)
	}
	m.Retention = durText(j.Retention)
	if len(j.RetryDelays) > 0 {
		m.Backoff = &delayqv1.JobBackoff{Delays: durationTexts(j.RetryDelays)}
	}
	for _, a := range j.History {
		pa := &delayqv1.Attempt{Attempt: int32(a.Attempt), StartedAt: timeText(a.StartedAt), Via: a.Via, Outcome: a.Outcome, Error: a.Error,
			Instance: a.Instance, Consumer: a.Consumer}
		if !a.EndedAt.IsZero() {
			pa.EndedAt = timeText(a.EndedAt)
		}
		m.History = append(m.History, pa)
	}
	return m
}

// trailMessage is j as GetJob shows it: jobMessage's form with the job's
// trail (core.Trail).
func trailMessage(j *core.Job) *delayqv1.Job {
	m := jobMessage(j)
	for _, e := range core.Trail(j) {
		te := &delayqv1.TrailEntry{At: timeText(e.At), Event: e.Event, Via: e.Via, Token: e.Token, Instance: e.Instance,
			Consumer: e.Consumer, Attempt: int32(e.Attempt), Outcome: e.Outcome, Error: e.Error}
		if !e.EndedAt.IsZero() {
			te.EndedAt = timeText(e.EndedAt)
		}
		m.Trail = append(m.Trail, te)
	}
	return m
}

// exportMessage is j as Export sends it: as jobMessage has it, but without
// updated_at, lease_expires_at and then, and with its changes, as an
// export line of the HTTP API.
func exportMessage(j *core.Job) *delayqv1.Job {
	m := jobMessage(j)
	m.UpdatedAt, m.LeaseExpiresAt, m.Then = "", "", nil
	for _, c := range j.Changes {
		m.Changes = append(m.Changes, &delayqv1.Change{At: timeText(c.At), Kind: c.Kind, Via: c.Via, Token: c.Token})
	}
	return m
}

// importJob turns a job of an import into the engine's job, checking the
// wire form only (Engine.Import validates the values); run_at and
// created_at are times, ttr and the backoff's delays durations.
// updated_at and lease_expires_at are ignored.
func importJob(m *delayqv1.Job) (*core.Job, error) {
	if m == nil {
		return nil, core.Invalid("", "no job")
	}
	j := &core.Job{
		ID: m.Id, Topic: m.Topic, Key: m.Key, MaxAttempts: int(m.MaxAttempts), Attempt: int(m.Attempt),
		State: core.State(m.State), LastError: m.LastError, Priority: int(m.Priority), URL: m.Url,
	}
	if m.Body != "" {
		j.Body = json.RawMessage(m.Body)
	}
	var err error
	if m.RunAt != "" {
		if j.RunAt, err = wire.ParseTimeText("run_at", m.RunAt); err != nil {
			return nil, err
		}
	}
	if m.CreatedAt != "" {
		if j.CreatedAt, err = wire.ParseTimeText("created_at", m.CreatedAt); err != nil {
			return nil, err
		}
	}
	if m.ExpiresAt != "" {
		if j.ExpiresAt, err = wire.ParseTimeText("expires_at", m.ExpiresAt); err != nil {
			return nil, err
		}
	}
	if j.TTR, err = parseDuration("ttr", m.Ttr); err != nil {
		return nil, err
	}
	if j.Retention, err = parseDuration("retention", m.Retention); err != nil {
		return nil, err
	}
	if m.Backoff != nil {
		if j.RetryDelays, err = parseDelays("backoff.delays", m.Backoff.Delays); err != nil {
			return nil, err
		}
	}
	for _, pa := range m.History {
		if pa == nil {
			return nil, core.Invalid("history", "history holds an empty attempt")
		}
		a := core.Attempt{Attempt: int(pa.Attempt), Via: pa.Via, Instance: pa.Instance, Consumer: pa.Consumer, Outcome: pa.Outcome, Error: pa.Error}
		if pa.StartedAt != "" {
			if a.StartedAt, err = wire.ParseTimeText("history.started_at", pa.StartedAt); err != nil {
				return nil, err
			}
		}
		if pa.EndedAt != "" {
			if a.EndedAt, err = wire.ParseTimeText("history.ended_at", pa.EndedAt); err != nil {
				return nil, err
			}
		}
		j.History = append(j.History, a)
	}
	for _, pc := range m.Changes {
		if pc == nil {
			return nil, core.Invalid("changes", "changes holds an empty change")
		}
		c := core.Change{Kind: pc.Kind, Via: pc.Via, Token: pc.Token}
		if c.At, err = wire.ParseTimeText("changes.at", pc.At); err != nil {
			return nil, err
		}
		j.Changes = append(j.Changes, c)
	}
	return j, nil
}

// jobMessages maps jobMessage over jobs.
func jobMessages(jobs []*core.Job) []*delayqv1.Job {
	out := make([]*delayqv1.Job, len(jobs))
	for i, j := range jobs {
		out[i] = jobMessage(j)
	}
	return out
}

// deliveryMessage is a claimed job as a delivery, lease included.
func deliveryMessage(j *core.Job) *delayqv1.Delivery {
	return &delayqv1.Delivery{
		Id: j.ID, Topic: j.Topic, Body: bodyText(j.Body), Attempt: int32(j.Attempt),
		RunAt: timeText(j.RunAt), Lease: j.Lease, LeaseExpiresAt: timeText(j.LeaseExpiresAt),
	}
}

// pushedMessage is the answer to a created or replaced job.
func pushedMessage(j *core.Job, replaced bool) *delayqv1.PushResponse {
	return &delayqv1.PushResponse{Id: j.ID, Topic: j.Topic, RunAt: timeText(j.RunAt), State: string(j.State), Replaced: replaced}
}

func durationTexts(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

// topicMessage is t as GetTopic shows it: its configuration with defaults
// filled, secrets and header values replaced by whether they are set, and
// its counts, as the HTTP API's topic answer.
func topicMessage(t *core.Topic) *delayqv1.Topic {
	d := t.WithDefaults()
	m := &delayqv1.Topic{
		Name: d.Name,
		Delivery: &delayqv1.DeliveryView{
			Type: d.Delivery.Type, Url: d.Delivery.URL, Subject: d.Delivery.Subject, KafkaTopic: d.Delivery.KafkaTopic, Success: d.Delivery.Success,
			SecretSet: d.Delivery.Secret != "", PreviousSecretSet: d.Delivery.PreviousSecret != "",
			ErrorBody: d.Delivery.ErrorBody, Method: d.Delivery.Method, AllowJobUrl: d.Delivery.AllowJobURL,
		},
		Ttr:         d.TTR.String(),
		MaxAttempts: int32(d.MaxAttempts),
		Backoff: &delayqv1.BackoffConfig{
			Initial: d.Backoff.Initial.String(), Max: d.Backoff.Max.String(),
			Factor: d.Backoff.Factor, Jitter: d.Backoff.Jitter, Zeros: d.Backoff.Zeros,
		},
		Concurrency:    int32(d.Concurrency),
		UniqueKeys:     d.UniqueKeys,
		OnDead:         d.OnDead,
		Events:         eventsMessage(d.Events),
		MaxInFlight:    int32(d.MaxInFlight),
		KeyConcurrency: int32(d.KeyConcurrency),
		Fair:           d.Fair,
		ExpiresIn:      durText(d.ExpiresIn),
		Delay:          durText(d.Delay),
		Retention:      durText(d.Retention),
		Configured:     t.Configured,
		Paused:         t.Paused,
		Counts: &delayqv1.Counts{
			Scheduled: t.Counts.Scheduled, Ready: t.Counts.Ready, Reserved: t.Counts.Reserved,
			Done: t.Counts.Done, Dead: t.Counts.Dead, Cancelled: t.Counts.Cancelled,
		},
	}
	if d.Delivery.Timeout != 0 {
		m.Delivery.Timeout = d.Delivery.Timeout.String()
	}
	if d.Rate.Limit != 0 {
		m.Rate = &delayqv1.RateConfig{Limit: int32(d.Rate.Limit), Period: d.Rate.Period.String(), Burst: int32(d.Rate.Burst), PerKey: d.Rate.PerKey}
	}
	for name := range d.Delivery.Headers {
		m.Delivery.HeaderNames = append(m.Delivery.HeaderNames, http.CanonicalHeaderKey(name))
	}
	slices.Sort(m.Delivery.HeaderNames)
	if len(d.Backoff.Delays) > 0 {
		m.Backoff.Delays = durationTexts(d.Backoff.Delays)
	}
	return m
}

// scheduleConfig turns a schedule's definition into the engine's schedule
// named name, checking the wire form only (start and end are times, the
// job's ttr a duration), as httptransport.DecodeSchedule does for the HTTP
// body; nil is every default. Engine.PutSchedule validates the values.
func scheduleConfig(name string, c *delayqv1.ScheduleConfig) (*core.Schedule, error) {
	sc := &core.Schedule{Name: name}
	if c == nil {
		return sc, nil
	}
	sc.Cron, sc.TimeZone, sc.Topic, sc.Paused = c.Cron, c.TimeZone, c.Topic, c.Paused
	sc.Missed, sc.MissedLimit = c.Missed, int(c.MissedLimit)
	var err error
	if sc.Jitter, err = parseDuration("jitter", c.Jitter); err != nil {
		return nil, err
	}
	if sc.Start, err = parseTime("start", c.Start); err != nil {
		return nil, err
	}
	if sc.End, err = parseTime("end", c.End); err != nil {
		return nil, err
	}
	if j := c.Job; j != nil {
		sc.Job = core.ScheduleJob{Key: j.Key, MaxAttempts: int(j.MaxAttempts), Priority: int(j.Priority)}
		if j.Body != "" {
			sc.Job.Body = json.RawMessage(j.Body)
		}
		if sc.Job.TTR, err = parseDuration("job.ttr", j.Ttr); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// parseTime decodes an optional time field: "" is zero.
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return wire.ParseTimeText(field, s)
}

// optTimeText is timeText(t), or "" for the zero time (unset).
func optTimeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return timeText(t)
}

// scheduleMessage is a stored schedule as GetSchedule shows it, with its
// next (0 to core.UpcomingMax) upcoming slots after now, as the HTTP API's
// schedule answer.
func scheduleMessage(stored *core.Schedule, now time.Time, next int) *delayqv1.Schedule {
	sc := wire.ScheduleShown(stored)
	m := &delayqv1.Schedule{
		Name: sc.Name, Cron: sc.Cron, TimeZone: sc.TimeZone, Topic: sc.Topic,
		Job: &delayqv1.ScheduleJob{Body: bodyText(sc.Job.Body), Key: sc.Job.Key,
			MaxAttempts: int32(sc.Job.MaxAttempts), Priority: int32(sc.Job.Priority)},
		Start: optTimeText(sc.Start), End: optTimeText(sc.End), Paused: sc.Paused,
		Missed: sc.Missed, MissedLimit: int32(sc.MissedLimit),
		CreatedAt: timeText(sc.CreatedAt), UpdatedAt: timeText(sc.UpdatedAt), LastSlot: optTimeText(sc.Cursor),
	}
	if sc.Job.TTR > 0 {
		m.Job.Ttr = sc.Job.TTR.String()
	}
	if sc.Jitter > 0 {
		m.Jitter = sc.Jitter.String()
	}
	for _, t := range stored.Upcoming(now, next) {
		m.NextRuns = append(m.NextRuns, timeText(t))
	}
	return m
}

// importedSchedule turns a schedule of an import, in the form Export sends,
// into the engine's schedule: its definition as PutSchedule reads it, and
// its created_at, updated_at and last_slot (the cursor), so that it goes
// on from where it was. next_runs is ignored. Engine.ImportSchedule
// validates the values.
func importedSchedule(m *delayqv1.Schedule) (*core.Schedule, error) {
	if m == nil {
		return nil, core.Invalid("", "no schedule")
	}
	if m.Name == "" {
		return nil, core.Invalid("name", "a schedule of an import needs its name")
	}
	sc, err := scheduleConfig(m.Name, &delayqv1.ScheduleConfig{
		Cron: m.Cron, TimeZone: m.TimeZone, Topic: m.Topic, Job: m.Job, Start: m.Start, End: m.End,
		Paused: m.Paused, Missed: m.Missed, MissedLimit: m.MissedLimit, Jitter: m.Jitter,
	})
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name, text string
		dst        *time.Time
	}{{"created_at", m.CreatedAt, &sc.CreatedAt}, {"updated_at", m.UpdatedAt, &sc.UpdatedAt}, {"last_slot", m.LastSlot, &sc.Cursor}} {
		if *f.dst, err = parseTime(f.name, f.text); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// eventsMessage returns the message of a topic's events, nil for none.
func eventsMessage(e core.Events) *delayqv1.EventsConfig {
	if e.IsZero() {
		return nil
	}
	return &delayqv1.EventsConfig{Topic: e.Topic, On: e.On}
}
