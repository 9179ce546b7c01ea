package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Job states, as Job.State holds them.
const (
	StateScheduled = "scheduled"
	StateReady     = "ready"
	StateReserved  = "reserved"
	StateDone      = "done"
	StateDead      = "dead"
	StateCancelled = "cancelled"
)

// Job is a job as the service shows it (GET /v1/jobs/{id}, finds, dead
// lists, a conflict's existing job), and as export lines hold it: an export
// line decodes into a Job with json.Unmarshal, and a Job marshals into an
// export line (see MarshalJSON).
type Job struct {
	// ID is the job's id.
	ID string `json:"id"`
	// Topic is the job's topic.
	Topic string `json:"topic"`
	// Key is the job's business key; "" without one.
	Key string `json:"key"`
	// Body is the job's body, byte for byte as pushed; "null" without one.
	Body json.RawMessage `json:"body"`
	// RunAt is when the job is (or was) due.
	RunAt time.Time `json:"run_at"`
	// TTR is how long a consumer holds a delivery before it is handed out
	// again.
	TTR time.Duration `json:"ttr"`
	// MaxAttempts is the most deliveries before the job goes dead.
	MaxAttempts int `json:"max_attempts"`
	// Priority orders jobs due together: -10 (most urgent) to 10.
	Priority int `json:"priority"`
	// Attempt counts the deliveries so far.
	Attempt int `json:"attempt"`
	// State is the job's state as of now (StateScheduled...).
	State string `json:"state"`
	// CreatedAt and UpdatedAt are when the job was created and last
	// changed; UpdatedAt is zero on export lines.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// LastError is why the last attempt failed; "" when none did.
	LastError string `json:"last_error"`
	// LeaseExpiresAt is when the current delivery's lease ends, while the
	// job is reserved; zero otherwise.
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// BackoffDelays is the job's own retry schedule; nil when it uses its
	// topic's backoff.
	BackoffDelays []time.Duration `json:"-"`
	// URL is the job's own webhook URL; "" when it uses its topic's.
	URL string `json:"url"`
	// ExpiresAt is when the job stops being delivered; zero when it never
	// expires. An expired job is dead with LastError "expired".
	ExpiresAt time.Time `json:"expires_at"`
	// Retention is how long the job is kept once done or cancelled, its
	// topic's retention when it was pushed; 0: the server's.
	Retention time.Duration `json:"-"`
	// History is the job's last deliveries, oldest first, at most 50 within
	// 16 KiB; nil before the first.
	History []Attempt `json:"history"`
	// Then is the job's next step as pushed (PushParams.Then), its Body a
	// json.RawMessage; nil without one. Export lines leave it out.
	Then *PushParams `json:"-"`
	// Changes are what happened to the job besides its deliveries, oldest
	// first, at most 20: export lines carry them; nil elsewhere.
	Changes []Change `json:"changes"`
	// Trail is the job's trail, oldest first, its last 50 entries: Get
	// sets it; listings, finds and export lines leave it nil.
	Trail []TrailEntry `json:"-"`
}

// Change is one thing that happened to a job besides its deliveries.
type Change struct {
	// At is when it happened.
	At time.Time `json:"at"`
	// Kind is ChangeCreated, ChangeReplaced or ChangeRequeued.
	Kind string `json:"kind"`
	// Via is how the push came: "http", "grpc", "nats", "kafka", or made
	// by delayq: "schedule", "import", "chain", "events", "notices"; ""
	// for a requeue.
	Via string `json:"via,omitempty"`
	// Token is the name of the API token that pushed; "" without tokens.
	Token string `json:"token,omitempty"`
}

// The kinds of a Change.
const (
	ChangeCreated  = "created"
	ChangeReplaced = "replaced"
	ChangeRequeued = "requeued"
)

// TrailEntry is one step of a job's trail (Job.Trail).
type TrailEntry struct {
	// At is when it happened; for a delivery, when it started.
	At time.Time `json:"at"`
	// Event is what happened: a Change kind, or TrailDelivered,
	// TrailCancelled, TrailExpired.
	Event string `json:"event"`
	// Via is, for created and replaced, how the push came (Change.Via);
	// for delivered, how it was delivered (Attempt.Via).
	Via string `json:"via"`
	// Token is, for created and replaced, the name of the token that
	// pushed.
	Token string `json:"token"`
	// Instance and Consumer are, for delivered, the instance that handed
	// the job out and the consumer's address (Attempt).
	Instance string `json:"instance"`
	Consumer string `json:"consumer"`
	// Attempt, Outcome, EndedAt and Error are, for delivered, the
	// attempt's; Outcome and EndedAt are empty while it is in progress.
	Attempt int       `json:"attempt"`
	Outcome string    `json:"outcome"`
	EndedAt time.Time `json:"ended_at"`
	Error   string    `json:"error"`
}

// The events of a trail besides the kinds of a Change (TrailEntry.Event).
const (
	TrailDelivered = "delivered"
	TrailCancelled = "cancelled"
	TrailExpired   = "expired"
)

// Attempt is one delivery of a job, as Job.History shows it.
type Attempt struct {
	// Attempt is the job's attempt this delivery counted as; a requeue
	// counts from 1 again.
	Attempt int `json:"attempt"`
	// StartedAt is when it was claimed.
	StartedAt time.Time `json:"started_at"`
	// EndedAt is when it ended; zero while in progress. A lease that ran
	// out ended at its expiry.
	EndedAt time.Time `json:"ended_at,omitzero"`
	// Via is how it was delivered: ViaPull, ViaWebSocket, ViaGRPC,
	// ViaWebhook or ViaNATS.
	Via string `json:"via"`
	// Instance is the delayq instance that handed it out; "" when unknown.
	Instance string `json:"instance,omitempty"`
	// Consumer is the address of the consumer it was handed to, for pull,
	// WebSocket and gRPC deliveries; "" otherwise.
	Consumer string `json:"consumer,omitempty"`
	// Outcome is how it ended: OutcomeAcked, OutcomeRetried, OutcomeBuried,
	// OutcomeLeaseExpired, OutcomeReleased or OutcomeCancelled; "" while in
	// progress.
	Outcome string `json:"outcome"`
	// Error is the reason a retry or bury gave; "" for none.
	Error string `json:"error,omitempty"`
}

// How an attempt was delivered (Attempt.Via).
const (
	ViaPull      = "pull"
	ViaWebSocket = "websocket"
	ViaGRPC      = "grpc"
	ViaWebhook   = "webhook"
	ViaNATS      = "nats"
)

// How an attempt ended (Attempt.Outcome).
const (
	OutcomeAcked        = "acked"
	OutcomeRetried      = "retried"
	OutcomeBuried       = "buried"
	OutcomeLeaseExpired = "lease_expired"
	OutcomeReleased     = "released"
	OutcomeCancelled    = "cancelled"
)

// jobWire is Job as the service writes it: durations as strings.
type jobWire struct {
	ID             string          `json:"id"`
	Topic          string          `json:"topic"`
	Key            string          `json:"key"`
	Body           json.RawMessage `json:"body"`
	RunAt          time.Time       `json:"run_at"`
	TTR            jsonDuration    `json:"ttr"`
	MaxAttempts    int             `json:"max_attempts"`
	Priority       int             `json:"priority"`
	Attempt        int             `json:"attempt"`
	State          string          `json:"state"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	LastError      string          `json:"last_error"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	URL            string          `json:"url"`
	ExpiresAt      time.Time       `json:"expires_at"`
	Retention      jsonDuration    `json:"retention"`
	History        []Attempt       `json:"history"`
	Backoff        *struct {
		Delays []jsonDuration `json:"delays"`
	} `json:"backoff"`
	Then    *stepWire    `json:"then"`
	Changes []Change     `json:"changes"`
	Trail   []TrailEntry `json:"trail"`
}

// stepWire is a job's next step as the service shows it.
type stepWire struct {
	Topic       string          `json:"topic"`
	Body        json.RawMessage `json:"body"`
	Delay       jsonDuration    `json:"delay"`
	RunAt       time.Time       `json:"run_at"`
	Key         string          `json:"key"`
	TTR         jsonDuration    `json:"ttr"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
	Backoff     *struct {
		Delays []jsonDuration `json:"delays"`
	} `json:"backoff"`
	URL       string       `json:"url"`
	ExpiresAt time.Time    `json:"expires_at"`
	ExpiresIn jsonDuration `json:"expires_in"`
	Then      *stepWire    `json:"then"`
}

// UnmarshalJSON reads a job object in the service's form, as POST /v1/jobs
// takes it (its id aside) and GET /v1/jobs/{id} shows a job's then:
// durations as Go duration strings or milliseconds, times in RFC 3339.
// A field it does not know is an error, as the service refuses it.
func (p *PushParams) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w stepWire
	if err := dec.Decode(&w); err != nil {
		return err
	}
	*p = *w.params()
	return nil
}

// params returns the step as PushParams, nil for nil.
func (w *stepWire) params() *PushParams {
	if w == nil {
		return nil
	}
	p := &PushParams{Topic: w.Topic, Delay: time.Duration(w.Delay), RunAt: w.RunAt, Key: w.Key, TTR: time.Duration(w.TTR),
		MaxAttempts: w.MaxAttempts, Priority: w.Priority, URL: w.URL, ExpiresAt: w.ExpiresAt, ExpiresIn: time.Duration(w.ExpiresIn),
		Then: w.Then.params()}
	if w.Body != nil {
		p.Body = w.Body
	}
	if w.Backoff != nil {
		for _, d := range w.Backoff.Delays {
			p.BackoffDelays = append(p.BackoffDelays, time.Duration(d))
		}
	}
	return p
}

// UnmarshalJSON reads a job in the service's form.
func (j *Job) UnmarshalJSON(b []byte) error {
	var w jobWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*j = Job{
		ID: w.ID, Topic: w.Topic, Key: w.Key, Body: w.Body, RunAt: w.RunAt, TTR: time.Duration(w.TTR),
		MaxAttempts: w.MaxAttempts, Priority: w.Priority, Attempt: w.Attempt, State: w.State,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, LastError: w.LastError, LeaseExpiresAt: w.LeaseExpiresAt,
		URL: w.URL, ExpiresAt: w.ExpiresAt, Retention: time.Duration(w.Retention), History: w.History, Then: w.Then.params(),
		Changes: w.Changes, Trail: w.Trail,
	}
	if w.Backoff != nil {
		for _, d := range w.Backoff.Delays {
			j.BackoffDelays = append(j.BackoffDelays, time.Duration(d))
		}
	}
	return nil
}

// exportWire is a job in the export form, the one Import reads.
type exportWire struct {
	ID          string          `json:"id"`
	Topic       string          `json:"topic"`
	Key         string          `json:"key"`
	Body        json.RawMessage `json:"body"`
	RunAt       time.Time       `json:"run_at"`
	TTR         jsonDuration    `json:"ttr"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
	Attempt     int             `json:"attempt"`
	State       string          `json:"state"`
	CreatedAt   time.Time       `json:"created_at"`
	LastError   string          `json:"last_error"`
	URL         string          `json:"url,omitempty"`
	ExpiresAt   time.Time       `json:"expires_at,omitzero"`
	Retention   jsonDuration    `json:"retention,omitempty"`
	Backoff     *struct {
		Delays []jsonDuration `json:"delays"`
	} `json:"backoff,omitempty"`
	History []Attempt `json:"history,omitempty"`
	Changes []Change  `json:"changes,omitempty"`
}

// MarshalJSON writes a job as an export line has it, which Import reads:
// without UpdatedAt and LeaseExpiresAt, which the service refuses there.
// encoding/json compacts the body (whitespace aside, it is unchanged); to
// move jobs byte for byte, pass Export's lines to Import as they are.
func (j Job) MarshalJSON() ([]byte, error) {
	w := exportWire{
		ID: j.ID, Topic: j.Topic, Key: j.Key, Body: j.Body, RunAt: j.RunAt.UTC(), TTR: jsonDuration(j.TTR),
		MaxAttempts: j.MaxAttempts, Priority: j.Priority, Attempt: j.Attempt, State: j.State,
		CreatedAt: j.CreatedAt.UTC(), LastError: j.LastError, URL: j.URL, ExpiresAt: j.ExpiresAt.UTC(),
		Retention: jsonDuration(j.Retention), History: j.History, Changes: j.Changes,
	}
	if len(w.Body) == 0 {
		w.Body = json.RawMessage("null")
	}
	if len(j.BackoffDelays) > 0 {
		w.Backoff = &struct {
			Delays []jsonDuration `json:"delays"`
		}{}
		for _, d := range j.BackoffDelays {
			w.Backoff.Delays = append(w.Backoff.Delays, jsonDuration(d))
		}
	}
	return json.Marshal(w)
}

// jsonDuration reads a duration as the service writes it (a Go duration
// string, or milliseconds) and writes it as a Go duration string.
type jsonDuration time.Duration

// UnmarshalJSON reads "30s" or 30000.
func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*d = 0
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = jsonDuration(v)
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration %s: want a string or milliseconds", b)
	}
	*d = jsonDuration(time.Duration(ms) * time.Millisecond)
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}
