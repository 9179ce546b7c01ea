package core

import (
	"encoding/json"
	"slices"
	"time"
)

// LeaseExpired is the LastError of a job whose lease ran out: it is due
// again, or dead when that was its last attempt (Store.ClaimJobs).
const LeaseExpired = "lease expired"

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
	// StateCancelled was cancelled: before it was delivered, or while it
	// was (CancelJobParams.Running).
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
	// Key is an optional business key, kept and returned with the job:
	// Store.FindJobs finds a topic's jobs by it, and a topic with unique
	// keys gives a keyed job the key's id (KeyID). No store shards by it.
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
	// RetryDelays is the job's own retry schedule, used instead of its
	// topic's backoff when set (see Backoff.Delays).
	RetryDelays []time.Duration `json:"retry_delays,omitempty"`
	// Priority orders jobs due together: claims take the lowest first
	// (the most urgent), run_at order within one priority. From
	// PriorityMin to PriorityMax; 0, the default, is in the middle.
	Priority int `json:"priority,omitempty"`
	// URL is the job's own webhook URL, used instead of its topic's
	// delivery.url; only a webhook topic with delivery.allow_job_url takes
	// it (checked at push and import, and again at each delivery).
	URL string `json:"url,omitempty"`
	// History is the job's last deliveries, oldest first, within
	// HistoryMax and HistoryMaxBytes (TrimHistory): Reserve starts one,
	// the end of the delivery (ack, retry, bury, lease expiry) ends it. A
	// put (Reset), a replace included, starts with none, as it starts
	// Attempt over; a requeue keeps it, and the attempts after it count
	// from 1 again.
	History []Attempt `json:"history,omitempty"`
	// ExpiresAt, when set, is when the job stops being delivered (store
	// precision, UTC): a job not acknowledged by then goes dead with
	// LastError JobExpired instead of being delivered again (Expired).
	// A put sets it; nothing else changes it.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Then is the job's next step, pushed once the job is done
	// (acknowledged), its delay counted from the finish; nil for none. A
	// put sets it; nothing else changes it (chains.go).
	Then *PushParams `json:"then,omitempty"`
	// Retention, when set, is how long the job is kept once done or
	// cancelled instead of the store's retention: GetJob finds it, and
	// listings and its topic's counts show it, until then. A put sets it
	// (the topic's Retention); nothing else changes it. The record of
	// finished jobs (ListFinished) keeps the store's.
	Retention time.Duration `json:"retention,omitempty"`
	// Changes are what happened to the job besides its deliveries, oldest
	// first, at most ChangesMax: a put makes it [created] (Reset), a
	// replace appends replaced to the replaced job's (Replaces), a requeue
	// appends requeued (Requeue). Trail tells them with History.
	Changes []Change `json:"changes,omitempty"`
}

// HistoryMax is how many attempts a job's History keeps: the oldest is
// dropped for a new one past it.
const HistoryMax = 50

// HistoryMaxBytes bounds the size of a job's History, the sum of its
// attempts' AttemptSize: the oldest attempts are dropped past it, so that
// deliveries failing with long errors (MaxErrorLen each) keep a job's
// record small. 16 KiB holds 50 attempts with errors of about 250 bytes,
// or 7 with the longest.
const HistoryMaxBytes = 16 << 10

// attemptOverhead is what AttemptSize counts for an attempt's fixed
// fields: about what a store keeps of them.
const attemptOverhead = 32

// AttemptSize is the size of a, as HistoryMaxBytes counts it: its error,
// instance and consumer, plus 32 bytes for the rest.
func AttemptSize(a *Attempt) int {
	return attemptOverhead + len(a.Error) + len(a.Instance) + len(a.Consumer)
}

// TrimHistory returns h without its oldest attempts past HistoryMax or
// HistoryMaxBytes; the newest attempt stays whatever its size.
func TrimHistory(h []Attempt) []Attempt {
	if len(h) > HistoryMax {
		h = h[len(h)-HistoryMax:]
	}
	size, k := 0, len(h)
	for k > 0 {
		size += AttemptSize(&h[k-1])
		if size > HistoryMaxBytes && k < len(h) {
			break
		}
		k--
	}
	return h[k:]
}

// Attempt is one delivery of a job, as its History keeps it.
type Attempt struct {
	// Attempt is the job's Attempt this delivery counted as.
	Attempt int `json:"attempt"`
	// StartedAt is when it was claimed (store precision, UTC).
	StartedAt time.Time `json:"started_at"`
	// EndedAt is when it ended; zero while in progress. A lease that ran
	// out ended at its expiry.
	EndedAt time.Time `json:"ended_at,omitzero"`
	// Via is how it was delivered: one of the Via constants, as the claim
	// said (ClaimJobsParams.Via).
	Via string `json:"via"`
	// Instance names the delayq instance that handed it out
	// (ClaimJobsParams.Instance); empty when unknown.
	Instance string `json:"instance,omitempty"`
	// Consumer is the network address of the consumer it was handed to,
	// for pull, WebSocket and gRPC deliveries (ClaimJobsParams.Consumer);
	// empty for deliveries the engine makes itself.
	Consumer string `json:"consumer,omitempty"`
	// Outcome is how it ended, one of the Outcome constants; empty while
	// in progress.
	Outcome string `json:"outcome"`
	// Error is the reason a retry or bury gave (cut as LastError is).
	Error string `json:"error,omitempty"`
}

// How an attempt was delivered (Attempt.Via): pulled over HTTP, or by a
// WebSocket or gRPC stream (subscriptions and gRPC claims alike), or
// pushed by the engine to a webhook or a NATS subject.
const (
	ViaPull      = "pull"
	ViaWebSocket = "websocket"
	ViaGRPC      = "grpc"
	ViaWebhook   = DeliveryWebhook
	ViaNATS      = DeliveryNATS
)

// How an attempt ended (Attempt.Outcome).
const (
	OutcomeAcked        = "acked"
	OutcomeRetried      = "retried"
	OutcomeBuried       = "buried"
	OutcomeLeaseExpired = "lease_expired"
	// OutcomeReleased ends a delivery that never reached its destination
	// (RetryJobParams.Unsent): its attempt was given back.
	OutcomeReleased = "released"
	// OutcomeCancelled ends a delivery whose job was cancelled while it
	// ran (CancelJobParams.Running).
	OutcomeCancelled = "cancelled"
)

// Running reports whether the attempt is in progress: not ended yet.
func (a *Attempt) Running() bool { return a.Outcome == "" }

// Priority range of a job: lower is more urgent, as with beanstalkd's
// priorities and Unix nice values; 0 is the default.
const (
	PriorityMin = -10
	PriorityMax = 10
)

// Clone returns a deep copy, so stores can hand out jobs that callers may
// change.
func (j *Job) Clone() *Job {
	c := *j
	if j.Body != nil {
		c.Body = append(json.RawMessage(nil), j.Body...)
	}
	c.RetryDelays = slices.Clone(j.RetryDelays)
	c.History = slices.Clone(j.History)
	c.Changes = slices.Clone(j.Changes)
	c.Then = j.Then.Clone()
	return &c
}

// Reset makes j the record PutJobs stores: run_at at store precision,
// Attempt 0, no LastError, lease or History, CreatedAt createdAt (the
// replaced job's, or now for a new one), UpdatedAt now, State scheduled,
// or ready when run_at has come, and Changes the put's change at now: the
// last of j's Changes (the engine gives one, kind created, saying how the
// push came), or a bare created one when j has none. A replace then calls
// Replaces.
func (j *Job) Reset(createdAt, now time.Time) {
	j.Attempt = 0
	j.History = nil
	c := Change{Kind: ChangeCreated}
	if n := len(j.Changes); n > 0 {
		c = j.Changes[n-1]
	}
	c.At = StoreTime(now)
	j.Changes = []Change{c}
	j.CreatedAt = createdAt
	j.LastError = ""
	j.Lease, j.LeaseExpiresAt = "", time.Time{}
	j.Schedule(j.RunAt, now)
}

// Schedule makes j wait for runAt (at store precision): State scheduled, or
// ready when runAt has come, with UpdatedAt now. A retry and a put schedule.
func (j *Job) Schedule(runAt, now time.Time) {
	j.RunAt = StoreTime(runAt)
	j.State = StateScheduled
	if !j.RunAt.After(now) {
		j.State = StateReady
	}
	j.UpdatedAt = now
}

// AsOf brings j to the state the contract shows at now, in place: a
// scheduled job whose run_at has passed is ready (since run_at), a reserved
// job whose lease ran out is expired (ExpireLease). Other states stay.
// Stores apply it when they read a job, so that what they report does not
// depend on whether their promotion got there first.
func (j *Job) AsOf(now time.Time) {
	switch j.State {
	case StateScheduled:
		if !j.RunAt.After(now) {
			j.State = StateReady
			j.UpdatedAt = j.RunAt
		}
	case StateReserved:
		if !j.LeaseExpiresAt.After(now) {
			j.ExpireLease()
		}
	}
}

// ExpireLease ends a reserved job's lease as run out: the job is ready
// again, or dead when it used its last attempt, since the expiry, with
// LastError LeaseExpired and no lease; its attempt ended lease_expired at
// the expiry.
func (j *Job) ExpireLease() {
	j.EndAttempt(OutcomeLeaseExpired, "", j.LeaseExpiresAt)
	j.State = StateReady
	if j.Attempt >= j.MaxAttempts {
		j.State = StateDead
	}
	j.UpdatedAt = j.LeaseExpiresAt
	j.Lease, j.LeaseExpiresAt = "", time.Time{}
	j.LastError = LeaseExpired
}

// Reserve hands j out for a delivery that claim p started: Attempt counts
// it, the lease token lease holds until now + TTR, and History gains the
// attempt, in progress (StartAttempt).
func (j *Job) Reserve(lease string, p *ClaimJobsParams, now time.Time) {
	j.Attempt++
	j.State = StateReserved
	j.Lease, j.LeaseExpiresAt = lease, now.Add(j.TTR)
	j.UpdatedAt = now
	j.StartAttempt(p, now)
}

// StartAttempt appends j's current Attempt to History, in progress since
// now, handed out as claim p says (its Via, Instance and Consumer), the
// oldest dropped past the bounds (TrimHistory).
func (j *Job) StartAttempt(p *ClaimJobsParams, now time.Time) {
	j.History = TrimHistory(append(j.History, Attempt{Attempt: j.Attempt, StartedAt: StoreTime(now), Via: p.Via,
		Instance: p.Instance, Consumer: p.Consumer}))
}

// EndAttempt ends the attempt in progress, the last of History, with
// outcome and reason (cut as LastError is) at at; it does nothing when
// none is in progress.
func (j *Job) EndAttempt(outcome, reason string, at time.Time) {
	if len(j.History) == 0 || !j.History[len(j.History)-1].Running() {
		return
	}
	a := &j.History[len(j.History)-1]
	a.EndedAt, a.Outcome, a.Error = StoreTime(at), outcome, CutError(reason)
	j.History = TrimHistory(j.History)
}

// Finish makes j done (acknowledged, which ends its attempt acked) or
// cancelled (which ends an attempt in progress cancelled), without lease.
func (j *Job) Finish(state State, now time.Time) {
	switch state {
	case StateDone:
		j.EndAttempt(OutcomeAcked, "", now)
	case StateCancelled:
		j.EndAttempt(OutcomeCancelled, "", now)
	}
	j.State = state
	j.UpdatedAt = now
	j.Lease, j.LeaseExpiresAt = "", time.Time{}
}

// Retry ends j's delivery as failed for reason and schedules it again at
// runAt, now when runAt is zero (Store.RetryJob).
func (j *Job) Retry(runAt time.Time, reason string, now time.Time) {
	if runAt.IsZero() {
		runAt = now
	}
	j.LastError = CutError(reason)
	j.EndAttempt(OutcomeRetried, reason, now)
	j.Lease, j.LeaseExpiresAt = "", time.Time{}
	j.Schedule(runAt, now)
}

// Release ends j's delivery as one that never reached its destination,
// for reason, and schedules it again at runAt (now when zero): the attempt
// the claim counted is given back, so that Attempt counts only deliveries
// made, and the attempt ends released in History.
func (j *Job) Release(runAt time.Time, reason string, now time.Time) {
	j.Retry(runAt, reason, now)
	if n := len(j.History); n > 0 && j.History[n-1].Outcome == OutcomeRetried && j.History[n-1].Attempt == j.Attempt {
		j.History[n-1].Outcome = OutcomeReleased
	}
	j.Attempt = max(j.Attempt-1, 0)
}

// RetryFor ends j's delivery as Store.RetryJob does for p: Release when
// p.Unsent, else Retry.
func (j *Job) RetryFor(p *RetryJobParams, now time.Time) {
	if p.Unsent {
		j.Release(p.RunAt, p.Error, now)
		return
	}
	j.Retry(p.RunAt, p.Error, now)
}

// Bury ends j's delivery as failed for good: dead since now, for reason.
func (j *Job) Bury(reason string, now time.Time) {
	j.LastError = CutError(reason)
	j.EndAttempt(OutcomeBuried, reason, now)
	j.State = StateDead
	j.UpdatedAt = now
	j.Lease, j.LeaseExpiresAt = "", time.Time{}
}

// Replaces makes j, reset by a put (Reset, which gave it its change), the
// job that replaces old: its change becomes a replaced one after old's
// Changes.
func (j *Job) Replaces(old *Job) {
	c := j.Changes[len(j.Changes)-1]
	c.Kind = ChangeReplaced
	j.Changes = AppendChange(old.Changes, c)
}

// Requeue makes a dead j ready now with a fresh attempt count; LastError
// and History stay, and Changes gains requeued (Store.RequeueJob).
func (j *Job) Requeue(now time.Time) {
	j.Attempt = 0
	j.Schedule(now, now)
	j.Changes = AppendChange(j.Changes, Change{At: StoreTime(now), Kind: ChangeRequeued})
}

// Settled is what a settling call reports of j once it settled it.
func (j *Job) Settled() SettleResult {
	return SettleResult{Topic: j.Topic, Attempt: j.Attempt, State: j.State}
}

// Import makes an exported job the record a store keeps of it
// (JobImporter.ImportJobs): Attempt, LastError and CreatedAt (now if unset)
// kept, no lease; a dead job dead since its UpdatedAt (now if unset or
// later), so that the dead list keeps the order of death; a reserved job,
// whose lease went with the old store, ready at once (run_at now at the
// latest); a scheduled or ready job by its run_at. History is kept (the
// engine checked it, CheckHistory), its attempt in progress, if any, ended
// lease_expired now: its lease went with the old store.
func (j *Job) Import(now time.Time) {
	j.History = slices.Clone(j.History)
	j.EndAttempt(OutcomeLeaseExpired, "", now)
	j.RunAt, j.CreatedAt = StoreTime(j.RunAt), j.CreatedAt.UTC()
	if !j.ExpiresAt.IsZero() {
		j.ExpiresAt = StoreTime(j.ExpiresAt)
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = now
	}
	j.LastError = CutError(j.LastError)
	j.Lease, j.LeaseExpiresAt = "", time.Time{}
	died := j.UpdatedAt.UTC()
	j.UpdatedAt = now
	switch j.State {
	case StateDead:
		if !died.IsZero() && !died.After(now) {
			j.UpdatedAt = died
		}
	case StateReserved:
		j.State = StateReady
		if j.RunAt.After(now) {
			j.RunAt = StoreTime(now)
		}
	default:
		j.Schedule(j.RunAt, now)
	}
}

// Redelivered reports whether a claimed job is out again because its
// previous delivery's lease ran out, rather than after a failure or for
// the first time.
func (j *Job) Redelivered() bool {
	return j.LastError == LeaseExpired && j.Attempt > 1
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
