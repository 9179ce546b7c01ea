package history

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Kind names what an operation did.
type Kind string

// The kinds of operations, one per API call (a batch of acks is recorded as
// one OpAck per item, with the batch's times).
const (
	// OpPush is POST /v1/jobs: a create, or on a topic whose unique keys
	// replace (Op.Replace), a create or replace.
	OpPush Kind = "push"
	// OpReplace is PUT /v1/jobs/{id}: create or replace.
	OpReplace Kind = "replace"
	// OpCancel is DELETE /v1/jobs/{id}.
	OpCancel Kind = "cancel"
	// OpGet is GET /v1/jobs/{id}.
	OpGet Kind = "get"
	// OpClaim is POST /v1/topics/{topic}/claim; its deliveries are in
	// Op.Jobs.
	OpClaim Kind = "claim"
	// OpAck is POST /v1/jobs/{id}/ack, or one item of POST /v1/acks
	// (Op.Batch).
	OpAck Kind = "ack"
	// OpNack is POST /v1/jobs/{id}/nack with Op.Delay.
	OpNack Kind = "nack"
	// OpTouch is POST /v1/jobs/{id}/touch.
	OpTouch Kind = "touch"
	// OpRequeue is POST /v1/jobs/{id}/requeue.
	OpRequeue Kind = "requeue"
	// OpPause is POST /v1/topics/{topic}/pause.
	OpPause Kind = "pause"
	// OpResume is POST /v1/topics/{topic}/resume.
	OpResume Kind = "resume"
)

// Op is one operation of a history: what was asked, when, and what was
// answered. Times are the client's real time; Return is zero when no
// answer came (the operation is indeterminate).
type Op struct {
	// Client is the number of the client that invoked it, Instance the
	// deployment's instance it was sent to.
	Client, Instance int
	Kind             Kind
	Topic            string
	// ID is the job's id (none for claims, pauses and resumes).
	ID string

	// Lease is the lease an ack, nack or touch settles.
	Lease string
	// Delay is a push's delay or a nack's; RunAt a push's run_at when it
	// gave one instead.
	Delay time.Duration
	RunAt time.Time
	// MaxAttempts and TTR are a push's.
	MaxAttempts int
	TTR         time.Duration
	// Key is a push's business key.
	Key string
	// Replace marks a push to a topic whose unique keys replace: it
	// answers as PUT does.
	Replace bool
	// Batch marks an ack that was an item of POST /v1/acks.
	Batch bool

	// Call is when it was invoked, Return when its answer came (zero when
	// none came).
	Call, Return time.Time
	// CallFromLease marks a subscriber's claim whose Call is the lease
	// expiry of the delivery before (less 5 ms), as its instance answered
	// it: the subscription frees that delivery's slot when the instance's
	// clock reaches it, so a clock fault of the instance moves it.
	CallFromLease bool `json:",omitempty"`
	// ReleasedAtClose marks a subscriber's claim left without an answer
	// by the end of its connection: what the server claimed for it is
	// released by Until, its attempt given back when it was never sent
	// (core.Engine.Release), nacked with delay 0 when it was
	// (transports/wstransport, "Disconnects").
	ReleasedAtClose bool `json:",omitempty"`
	// Until, for an operation without an answer, is the latest moment it
	// may take effect, when known: a released claim's connection end,
	// plus the time a release may take.
	Until time.Time `json:",omitzero"`
	// Status is the HTTP status answered (for a batch item, the status its
	// single route would have answered); 0 when no answer came, or when
	// the answer does not say what happened (a 5xx: the store may have
	// applied the call before it failed).
	Status int
	// State and Attempt are what a get answered; AnswerRunAt the run_at a
	// push or get answered.
	State       string
	Attempt     int
	AnswerRunAt time.Time
	// LeaseExpiresAt is what a touch answered.
	LeaseExpiresAt time.Time
	// Jobs are a claim's deliveries.
	Jobs []Delivery
}

// Indeterminate reports whether it is unknown what the operation did: it
// got no answer, or one that does not say.
func (o *Op) Indeterminate() bool { return o.Status == 0 }

// OK reports whether the operation was answered 2xx.
func (o *Op) OK() bool { return o.Status >= 200 && o.Status < 300 }

// Delivery is one job a claim answered.
type Delivery struct {
	ID             string
	Attempt        int
	Lease          string
	RunAt          time.Time
	LeaseExpiresAt time.Time
}

// FaultKind names a fault injected into a deployment.
type FaultKind string

// The faults a run injects.
const (
	// FaultKill is a kill -9 of an instance; FaultStart its restart.
	FaultKill  FaultKind = "kill"
	FaultStart FaultKind = "start"
	// FaultStop is a SIGSTOP of an instance, FaultCont its SIGCONT.
	FaultStop FaultKind = "stop"
	FaultCont FaultKind = "cont"
	// FaultPartition cuts an instance off its backend (its connections
	// refused and closed), FaultHeal ends the cut.
	FaultPartition FaultKind = "partition"
	FaultHeal      FaultKind = "heal"
	// FaultLatency adds latency between an instance and its backend,
	// FaultLatencyEnd removes it.
	FaultLatency    FaultKind = "latency"
	FaultLatencyEnd FaultKind = "latency-end"
	// FaultBackendKill is a kill -9 of the backend's node that leads the
	// job stream (Fault.Instance is the node), FaultBackendStart its
	// restart.
	FaultBackendKill  FaultKind = "backend-kill"
	FaultBackendStart FaultKind = "backend-start"
	// FaultClock moves an instance's clock to Fault.Offset from the real
	// time (0: back to it).
	FaultClock FaultKind = "clock"
)

// Fault is a fault injected at a moment of the run.
type Fault struct {
	Kind     FaultKind
	Instance int
	At       time.Time
	// Offset is a FaultClock's: the instance's clock minus the real time
	// from At on.
	Offset time.Duration `json:",omitempty"`
}

// History is a record of operations and faults, safe for concurrent use.
type History struct {
	mu     sync.Mutex
	ops    []Op
	faults []Fault
}

// Add records a completed (or indeterminate) operation.
func (h *History) Add(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// AddFault records a fault.
func (h *History) AddFault(f Fault) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.mu.Unlock()
}

// Ops returns a copy of the operations, in order of invocation.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	slices.SortStableFunc(ops, func(a, b Op) int { return a.Call.Compare(b.Call) })
	return ops
}

// Faults returns a copy of the faults, in order.
func (h *History) Faults() []Fault {
	h.mu.Lock()
	fs := slices.Clone(h.faults)
	h.mu.Unlock()
	slices.SortStableFunc(fs, func(a, b Fault) int { return a.At.Compare(b.At) })
	return fs
}

// Counts returns how many operations were recorded, how many of them got
// no answer, and how many faults of each kind were injected.
func (h *History) Counts() (ops, indeterminate int, faults map[FaultKind]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	faults = map[FaultKind]int{}
	for i := range h.ops {
		if h.ops[i].Indeterminate() {
			indeterminate++
		}
	}
	for _, f := range h.faults {
		faults[f.Kind]++
	}
	return len(h.ops), indeterminate, faults
}

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// record is a History's form in JSON.
type record struct {
	Ops    []Op    `json:"ops"`
	Faults []Fault `json:"faults"`
}

// WriteJSON writes the history as JSON, for ReadJSON to check it again.
func (h *History) WriteJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(record{Ops: h.Ops(), Faults: h.Faults()})
}

// ReadJSON reads a history WriteJSON wrote.
func ReadJSON(r io.Reader) (*History, error) {
	var rec record
	if err := json.NewDecoder(r).Decode(&rec); err != nil {
		return nil, fmt.Errorf("history: read: %w", err)
	}
	return &History{ops: rec.Ops, faults: rec.Faults}, nil
}
