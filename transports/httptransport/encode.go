package httptransport

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Job answers are written by hand rather than by encoding/json, which would
// compact and HTML-escape the raw body: a body is answered byte for byte.

// writeRaw answers an already encoded JSON body.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeJSON answers v encoded by encoding/json; v holds no job body.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeRaw(w, status, b)
}

// appendString appends s as a JSON string; see wire.AppendString.
func appendString(b []byte, s string) []byte { return wire.AppendString(b, s) }

// appendTime appends t as a JSON string in RFC 3339 with milliseconds, UTC.
func appendTime(b []byte, t time.Time) []byte { return wire.AppendTime(b, t) }

// appendBody appends a job body as it was given; an empty body is null.
func appendBody(b []byte, body json.RawMessage) []byte { return wire.AppendBody(b, body) }

// appendJob appends the GET form of a job: its fields, state and history,
// and lease_expires_at while reserved, but never the lease itself.
func appendJob(b []byte, j *core.Job) []byte {
	return append(appendJobOpen(b, j), '}')
}

// appendJobTrail appends the form of GET /v1/jobs/{id}: appendJob's with
// the job's trail (core.Trail), which listings leave out.
func appendJobTrail(b []byte, j *core.Job) []byte {
	b = appendJobOpen(b, j)
	b = append(b, `,"trail":[`...)
	for i, e := range core.Trail(j) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"at":`...)
		b = appendTime(b, e.At)
		b = append(b, `,"event":`...)
		b = appendString(b, e.Event)
		b = appendOptional(b, "via", e.Via)
		b = appendOptional(b, "token", e.Token)
		b = appendOptional(b, "instance", e.Instance)
		b = appendOptional(b, "consumer", e.Consumer)
		if e.Attempt != 0 {
			b = append(b, `,"attempt":`...)
			b = strconv.AppendInt(b, int64(e.Attempt), 10)
		}
		b = appendOptional(b, "outcome", e.Outcome)
		if !e.EndedAt.IsZero() {
			b = append(b, `,"ended_at":`...)
			b = appendTime(b, e.EndedAt)
		}
		b = appendOptional(b, "error", e.Error)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendOptional appends the string field name with value v, nothing when
// v is empty.
func appendOptional(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return appendString(b, v)
}

// appendJobOpen appends appendJob's form without its closing brace.
func appendJobOpen(b []byte, j *core.Job) []byte {
	b = appendJobFields(b, j)
	if !j.UpdatedAt.IsZero() {
		b = append(b, `,"updated_at":`...)
		b = appendTime(b, j.UpdatedAt)
	}
	b = append(b, `,"last_error":`...)
	b = appendString(b, j.LastError)
	if j.State == core.StateReserved && !j.LeaseExpiresAt.IsZero() {
		b = append(b, `,"lease_expires_at":`...)
		b = appendTime(b, j.LeaseExpiresAt)
	}
	if j.Then != nil {
		b = append(b, `,"then":`...)
		b = appendStep(b, j.Then)
	}
	return b
}

// appendStep appends a job's next step in the form of a push's job
// object, in the order of its fields: those it sets, and its own then.
func appendStep(b []byte, p *core.PushParams) []byte {
	b = append(b, `{"topic":`...)
	b = appendString(b, p.Topic)
	name := func(n string) { b = append(b, `,"`+n+`":`...) }
	if len(p.Body) > 0 {
		name("body")
		b = appendBody(b, p.Body)
	}
	if p.Delay != nil {
		name("delay")
		b = appendString(b, p.Delay.String())
	}
	if p.RunAt != nil {
		name("run_at")
		b = appendTime(b, *p.RunAt)
	}
	if p.TTR != 0 {
		name("ttr")
		b = appendString(b, p.TTR.String())
	}
	if p.MaxAttempts != 0 {
		name("max_attempts")
		b = strconv.AppendInt(b, int64(p.MaxAttempts), 10)
	}
	if p.Key != "" {
		name("key")
		b = appendString(b, p.Key)
	}
	if len(p.RetryDelays) > 0 {
		b = appendBackoff(b, p.RetryDelays)
	}
	if p.Priority != 0 {
		name("priority")
		b = strconv.AppendInt(b, int64(p.Priority), 10)
	}
	if p.URL != "" {
		name("url")
		b = appendString(b, p.URL)
	}
	if p.ExpiresAt != nil {
		name("expires_at")
		b = appendTime(b, *p.ExpiresAt)
	}
	if p.ExpiresIn != nil {
		name("expires_in")
		b = appendString(b, p.ExpiresIn.String())
	}
	if p.Then != nil {
		name("then")
		b = appendStep(b, p.Then)
	}
	return append(b, '}')
}

// appendJobFields opens a job object and appends the fields that the GET
// form and an export line share, from id to created_at, and the job's
// expiry, retention, own url, backoff and history when it has them.
func appendJobFields(b []byte, j *core.Job) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, j.ID)
	b = append(b, `,"topic":`...)
	b = appendString(b, j.Topic)
	b = append(b, `,"key":`...)
	b = appendString(b, j.Key)
	b = append(b, `,"body":`...)
	b = appendBody(b, j.Body)
	b = append(b, `,"run_at":`...)
	b = appendTime(b, j.RunAt)
	b = append(b, `,"ttr":`...)
	b = appendString(b, j.TTR.String())
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(j.Priority), 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, `,"state":`...)
	b = appendString(b, string(j.State))
	b = append(b, `,"created_at":`...)
	b = appendTime(b, j.CreatedAt)
	if !j.ExpiresAt.IsZero() {
		b = append(b, `,"expires_at":`...)
		b = appendTime(b, j.ExpiresAt)
	}
	if j.Retention != 0 {
		b = append(b, `,"retention":`...)
		b = appendString(b, j.Retention.String())
	}
	if j.URL != "" {
		b = append(b, `,"url":`...)
		b = appendString(b, j.URL)
	}
	if len(j.RetryDelays) > 0 {
		b = appendBackoff(b, j.RetryDelays)
	}
	return appendHistory(b, j.History)
}

// appendBackoff appends a job's own retry schedule as "backoff".
func appendBackoff(b []byte, delays []time.Duration) []byte {
	b = append(b, `,"backoff":{"delays":[`...)
	for i, d := range delays {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, d.String())
	}
	return append(b, "]}"...)
}

// appendHistory appends a job's attempts, oldest first, as "history";
// nothing when it has none.
func appendHistory(b []byte, h []core.Attempt) []byte {
	if len(h) == 0 {
		return b
	}
	b = append(b, `,"history":[`...)
	for i := range h {
		a := &h[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"attempt":`...)
		b = strconv.AppendInt(b, int64(a.Attempt), 10)
		b = append(b, `,"started_at":`...)
		b = appendTime(b, a.StartedAt)
		if !a.EndedAt.IsZero() {
			b = append(b, `,"ended_at":`...)
			b = appendTime(b, a.EndedAt)
		}
		b = append(b, `,"via":`...)
		b = appendString(b, a.Via)
		b = appendOptional(b, "instance", a.Instance)
		b = appendOptional(b, "consumer", a.Consumer)
		b = append(b, `,"outcome":`...)
		b = appendString(b, a.Outcome)
		b = appendOptional(b, "error", a.Error)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendChanges appends a job's changes, oldest first, as "changes";
// nothing when it has none.
func appendChanges(b []byte, changes []core.Change) []byte {
	if len(changes) == 0 {
		return b
	}
	b = append(b, `,"changes":[`...)
	for i, c := range changes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"at":`...)
		b = appendTime(b, c.At)
		b = append(b, `,"kind":`...)
		b = appendString(b, c.Kind)
		b = appendOptional(b, "via", c.Via)
		b = appendOptional(b, "token", c.Token)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendDelivery appends a claimed job as a delivery, lease included.
func appendDelivery(b []byte, j *core.Job) []byte { return wire.AppendDelivery(b, j) }

// appendPushed appends the answer to a created job: id, topic, run_at and
// state.
func appendPushed(b []byte, j *core.Job, replaced bool) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, j.ID)
	b = append(b, `,"topic":`...)
	b = appendString(b, j.Topic)
	b = append(b, `,"run_at":`...)
	b = appendTime(b, j.RunAt)
	b = append(b, `,"state":`...)
	b = appendString(b, string(j.State))
	if replaced {
		b = append(b, `,"replaced":true`...)
	}
	return append(b, '}')
}

// streamBufferBytes is how much of a job list's answer is buffered before
// it is written.
const streamBufferBytes = 64 << 10

// writeJobList answers 200 with `{"jobs":[...]}`, each job appended by one
// and the object's other fields by tail (nil for none). The answer is
// written as its buffer fills, so that an answer of many or large jobs is
// never held whole in memory; one that fits in the buffer is answered with
// its Content-Length.
func writeJobList(w http.ResponseWriter, jobs []*core.Job, one func([]byte, *core.Job) []byte, tail func([]byte) []byte) {
	b := append(make([]byte, 0, streamBufferBytes), `{"jobs":[`...)
	streaming := false
	for i, j := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = one(b, j)
		if len(b) < streamBufferBytes {
			continue
		}
		if !streaming {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			streaming = true
		}
		if _, err := w.Write(b); err != nil {
			return
		}
		b = b[:0]
	}
	b = append(b, ']')
	if tail != nil {
		b = tail(b)
	}
	b = append(b, '}')
	if !streaming {
		writeRaw(w, http.StatusOK, b)
		return
	}
	_, _ = w.Write(append(b, '\n'))
}

// wireTime is a time answered as RFC 3339 with milliseconds in UTC.
type wireTime time.Time

// MarshalJSON implements json.Marshaler.
func (t wireTime) MarshalJSON() ([]byte, error) { return appendTime(nil, time.Time(t)), nil }

// touchView is the answer to touch.
type touchView struct {
	LeaseExpiresAt wireTime `json:"lease_expires_at"`
}

// topicView is the wire form of a topic: its configuration with defaults
// filled, the delivery secrets replaced by secret_set and
// previous_secret_set, and its counts.
type topicView struct {
	Name        string       `json:"name"`
	Delivery    deliveryView `json:"delivery"`
	TTR         string       `json:"ttr"`
	MaxAttempts int          `json:"max_attempts"`
	Backoff     backoffView  `json:"backoff"`
	Concurrency int          `json:"concurrency"`
	UniqueKeys  string       `json:"unique_keys,omitempty"`
	OnDead      string       `json:"on_dead,omitempty"`
	Events      *eventsView  `json:"events,omitempty"`
	Rate        *rateView    `json:"rate,omitempty"`
	MaxInFlight int          `json:"max_in_flight,omitempty"`
	// KeyConcurrency is shown only when set.
	KeyConcurrency int `json:"key_concurrency,omitempty"`
	// Fair is shown only when set.
	Fair      bool   `json:"fair,omitempty"`
	ExpiresIn string `json:"expires_in,omitempty"`
	// Delay is shown only when set.
	Delay string `json:"delay,omitempty"`
	// Retention is shown only when set: else the server's.
	Retention  string `json:"retention,omitempty"`
	Configured bool   `json:"configured"`
	// Paused is true while the topic's deliveries are paused.
	Paused bool `json:"paused"`
	// Counts has every state, in the order of core.States: done and
	// cancelled jobs count within the retention period.
	Counts core.Counts `json:"counts"`
}

type deliveryView struct {
	Type    string `json:"type"`
	URL     string `json:"url,omitempty"`
	Timeout string `json:"timeout,omitempty"`
	Subject string `json:"subject,omitempty"`
	// KafkaTopic is the Kafka topic of a kafka delivery.
	KafkaTopic string `json:"kafka_topic,omitempty"`
	Success    string `json:"success,omitempty"`
	SecretSet  bool   `json:"secret_set"`
	// PreviousSecretSet is shown only while a rotation is under way.
	PreviousSecretSet bool   `json:"previous_secret_set,omitempty"`
	ErrorBody         bool   `json:"error_body,omitempty"`
	Method            string `json:"method,omitempty"`
	// AllowJobURL is shown only when set, as ErrorBody.
	AllowJobURL bool `json:"allow_job_url,omitempty"`
	// HeaderNames names the headers a webhook topic adds; their values,
	// often credentials, are never shown, as the secret is not.
	HeaderNames []string `json:"header_names,omitempty"`
}

// rateView is a topic's rate limit, shown only when it limits.
type rateView struct {
	Limit  int    `json:"limit"`
	Period string `json:"period"`
	Burst  int    `json:"burst"`
	// PerKey is shown only when set.
	PerKey bool `json:"per_key,omitempty"`
}

type backoffView struct {
	Initial string   `json:"initial"`
	Max     string   `json:"max"`
	Factor  float64  `json:"factor"`
	Jitter  float64  `json:"jitter"`
	Delays  []string `json:"delays,omitempty"`
}

func newRateView(r core.Rate) *rateView {
	if r.Limit == 0 {
		return nil
	}
	return &rateView{Limit: r.Limit, Period: r.Period.String(), Burst: r.Burst, PerKey: r.PerKey}
}

func newTopicView(t *core.Topic) topicView {
	d := t.WithDefaults()
	v := topicView{
		Name: d.Name,
		Delivery: deliveryView{
			Type:              d.Delivery.Type,
			URL:               d.Delivery.URL,
			Subject:           d.Delivery.Subject,
			KafkaTopic:        d.Delivery.KafkaTopic,
			Success:           d.Delivery.Success,
			SecretSet:         d.Delivery.Secret != "",
			PreviousSecretSet: d.Delivery.PreviousSecret != "",
			ErrorBody:         d.Delivery.ErrorBody,
			Method:            d.Delivery.Method,
			AllowJobURL:       d.Delivery.AllowJobURL,
		},
		TTR:         d.TTR.String(),
		MaxAttempts: d.MaxAttempts,
		Backoff: backoffView{
			Initial: d.Backoff.Initial.String(),
			Max:     d.Backoff.Max.String(),
			Factor:  d.Backoff.Factor,
			Jitter:  d.Backoff.Jitter,
		},
		Concurrency:    d.Concurrency,
		UniqueKeys:     d.UniqueKeys,
		OnDead:         d.OnDead,
		Events:         newEventsView(d.Events),
		Rate:           newRateView(d.Rate),
		MaxInFlight:    d.MaxInFlight,
		KeyConcurrency: d.KeyConcurrency,
		Fair:           d.Fair,
		Configured:     t.Configured,
		Paused:         t.Paused,
		Counts:         t.Counts,
	}
	if d.ExpiresIn != 0 {
		v.ExpiresIn = d.ExpiresIn.String()
	}
	if d.Delay != 0 {
		v.Delay = d.Delay.String()
	}
	if d.Retention != 0 {
		v.Retention = d.Retention.String()
	}
	if d.Delivery.Timeout != 0 {
		v.Delivery.Timeout = d.Delivery.Timeout.String()
	}
	for name := range d.Delivery.Headers {
		v.Delivery.HeaderNames = append(v.Delivery.HeaderNames, http.CanonicalHeaderKey(name))
	}
	slices.Sort(v.Delivery.HeaderNames)
	for _, delay := range d.Backoff.Delays {
		v.Backoff.Delays = append(v.Backoff.Delays, delay.String())
	}
	return v
}

// topicListView is the answer to GET /v1/topics.
type topicListView struct {
	Topics []topicView `json:"topics"`
}

// statusView is the answer of the health probes.
type statusView struct {
	Status string `json:"status"`
}

// eventsView is the wire form of a topic's events (core.Events), in
// answers and requests.
type eventsView struct {
	Topic string   `json:"topic"`
	On    []string `json:"on,omitempty"`
}

// newEventsView returns the view of e, nil for none.
func newEventsView(e core.Events) *eventsView {
	if e.IsZero() {
		return nil
	}
	return &eventsView{Topic: e.Topic, On: e.On}
}
