package core

import (
	"encoding/json"
	"time"
)

// State is where a job is in its life.
type State string

// The states of a job (docs/api.md, Concepts).
const (
	// StateScheduled waits for run_at, including a retry waiting for its backoff.
	StateScheduled State = "scheduled"
	// StateReady is due and waits for a consumer.
	StateReady State = "ready"
	// StateReserved was delivered and its lease holds.
	StateReserved State = "reserved"
	// StateDone was acknowledged.
	StateDone State = "done"
	// StateDead gave up after MaxAttempts, or was buried.
	StateDead State = "dead"
	// StateCancelled was cancelled before it was delivered.
	StateCancelled State = "cancelled"
)

// States lists every state in life order; counts are reported in this order.
var States = []State{StateScheduled, StateReady, StateReserved, StateDone, StateDead, StateCancelled}

// Finished reports whether the state is final: done or cancelled. A finished
// job is kept for the retention period only and its id may be reused.
func (s State) Finished() bool { return s == StateDone || s == StateCancelled }

// Job is one unit of delayed work as stores keep it. The JSON form is the
// storage form shared by backends; transports have wire forms of their own.
type Job struct {
	// ID is unique across topics; generated ids sort by creation time.
	ID string `json:"id"`
	// Topic names where the job goes.
	Topic string `json:"topic"`
	// Key is an optional business key, kept and returned with the job; no
	// store shards or looks up by it.
	Key string `json:"key,omitempty"`
	// Body is delivered byte for byte.
	Body json.RawMessage `json:"body,omitempty"`
	// RunAt is when the job becomes due (ms precision, UTC).
	RunAt time.Time `json:"run_at"`
	// TTR is how long a consumer holds a delivery before it is handed out again.
	TTR time.Duration `json:"ttr"`
	// MaxAttempts bounds deliveries; past it the job goes dead.
	MaxAttempts int `json:"max_attempts"`
	// Attempt counts deliveries so far (1-based once delivered).
	Attempt int `json:"attempt"`
	// State is the job's current state.
	State State `json:"state"`
	// CreatedAt is when the job was first stored.
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is when the job last changed state.
	UpdatedAt time.Time `json:"updated_at"`
	// LastError is the error of the last failed attempt.
	LastError string `json:"last_error,omitempty"`
	// Lease is the token of the current delivery, set while reserved.
	Lease string `json:"lease,omitempty"`
	// LeaseExpiresAt is when the current lease is lost unless touched.
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	// TraceParent is the W3C traceparent of the push, carried to deliveries.
	TraceParent string `json:"traceparent,omitempty"`
}

// Clone returns a deep copy, so stores can hand out jobs that callers may
// change.
func (j *Job) Clone() *Job {
	c := *j
	if j.Body != nil {
		c.Body = append(json.RawMessage(nil), j.Body...)
	}
	return &c
}

// Counts holds the number of jobs of a topic in each state, in the order of
// States. Done and Cancelled count the jobs that finished so within the
// retention period and are still kept (those GetJob finds): a finished job
// whose id a later put reused counts once, in its new state. A store may
// count a finished job a little past its retention (Store.GetTopic says
// how much), never less.
type Counts struct {
	Scheduled int64 `json:"scheduled"`
	Ready     int64 `json:"ready"`
	Reserved  int64 `json:"reserved"`
	Done      int64 `json:"done"`
	Dead      int64 `json:"dead"`
	Cancelled int64 `json:"cancelled"`
}
