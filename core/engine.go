package core

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Deliverer hands due jobs of push-delivered topics (webhook, nats) to their
// destination. The engine claims the jobs, calls Deliver, and acks or
// retries by the outcome.
type Deliverer interface {
	// ValidateTopic checks a topic's delivery fields before it is stored;
	// it returns a *FieldError for a bad URL, condition or subject.
	ValidateTopic(topic *Topic) error
	// Deliver hands p.Job over to the destination of p.Topic. Nil is
	// success; any error fails the attempt, which is retried by the
	// topic's backoff, except a *NoRetryError, after which the job goes
	// dead at once, and an error matching ErrNotSent (refused unsent),
	// after which the job is retried when the error's RetryAfter has
	// passed and never goes dead for it. Deliver must return when ctx is
	// done. Nil params, or a nil Topic or Job, are answered with
	// ErrInvalidArgument.
	Deliver(ctx context.Context, p *DeliverParams) error
}

// DeliverParams are the arguments of Deliverer.Deliver.
type DeliverParams struct {
	// Topic is the job's topic configuration, defaults filled.
	Topic *Topic
	// Job is the job to deliver, reserved by the engine's claim: Attempt,
	// Lease and LeaseExpiresAt are set.
	Job *Job
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	// Store keeps the jobs. Required.
	Store Store
	// Clock defaults to the real clock.
	Clock Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Limits bound input; zero fields take their defaults.
	Limits Limits
	// Deliverers by delivery type (DeliveryWebhook, DeliveryNATS). A topic
	// whose type has none cannot be configured.
	Deliverers map[string]Deliverer
	// TopicRefresh is how often topic configurations are re-read from the
	// store, so changes made through another instance take effect.
	// Defaults to 2s.
	TopicRefresh time.Duration
	// ExpirySweep is how often the engine looks through the ready jobs of
	// each topic for those whose expiry came, which no claim took, to end
	// them (Store.ExpireJob). Defaults to 30s.
	ExpirySweep time.Duration
	// Roles choose the background services Start runs; the zero value
	// runs them all.
	Roles Roles
	// Instance names this instance in the attempts its claims start
	// (Attempt.Instance), CleanName'd; empty for none.
	Instance string
}

// Roles choose which of its background services an engine runs, for a
// deployment whose instances share the work (cmd/delayq --roles): each
// service must run on at least one instance of a store.
type Roles struct {
	// SkipDeliveries leaves to other instances the dispatchers of
	// push-delivered topics (webhook, NATS and the like), the dead-letter
	// notices and the expiry sweep.
	SkipDeliveries bool
	// SkipSchedules leaves to other instances the firing of recurring
	// schedules.
	SkipSchedules bool
}

// Engine is the part of delayq that is the same for every backend and
// transport: the API's façade over the store (validation, ids, topic
// defaults, backoff, attempt limits) and, from Start to Stop, its
// background services, each a type of its own: the dispatchers of
// push-delivered topics (dispatchers.go), the topic refresh with the
// dead-letter notices (lifecycle.go, notice.go), the schedule loop
// (scheduler.go) and the expiry sweep (expiry.go).
type Engine struct {
	store      Store
	clock      Clock
	log        *slog.Logger
	limits     Limits
	deliverers map[string]Deliverer
	roles      Roles
	instance   string

	mu     sync.Mutex
	topics map[string]*Topic // configured topics, defaults filled
	// unconfigured is the default topic last made for a name not in
	// topics: the jobs of a batch and the claims of an unconfigured topic
	// share it instead of each allocating its own (topic).
	unconfigured atomic.Pointer[Topic]

	// The background services (lifecycle.go).
	dispatch  dispatchers
	refresh   topicRefresh
	schedules scheduler
	// schedulesMigrated is set once MigrateSchedules succeeded.
	schedulesMigrated atomic.Bool
	// topicsMigrated is set once MigrateTopics succeeded.
	topicsMigrated atomic.Bool
	// topicsMissing is set while a started engine has not read the
	// topics' configurations once (errTopicsMissing).
	topicsMissing atomic.Bool

	// leases are the deliveries in flight (deliveries.go).
	leases leases

	// draining is set by Drain; drainCtx is cancelled by it, which ends
	// the claims waiting in Claim.
	draining    atomic.Bool
	drainCtx    context.Context
	cancelDrain context.CancelFunc
	// claiming counts the claims under way (claimFor), so that
	// WaitSettled also waits for a claim that passed the draining check
	// and records its deliveries after the drain began.
	claiming atomic.Int64

	// notices follows dead jobs for their notices, in the refresh loop.
	notices notices
	// events follows the record of finished jobs for the topics' events,
	// in the refresh loop.
	events events
	// chains remembers that the record's cursor exists for jobs with a
	// next step (chains.go).
	chains chains
	// expiry ends the expired jobs that no claim took.
	expiry expirySweep
	// expiring holds the topics whose KindExpiring record this instance
	// wrote or found (noteExpiring).
	expiring sync.Map
}

// NewEngine returns an engine; Start runs its dispatchers.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("core: EngineConfig.Store is required")
	}
	drainCtx, cancelDrain := context.WithCancel(context.Background())
	e := &Engine{
		drainCtx:    drainCtx,
		cancelDrain: cancelDrain,
		store:       cfg.Store,
		clock:       cmp.Or[Clock](cfg.Clock, RealClock()),
		log:         cmp.Or(cfg.Logger, slog.Default()),
		limits:      cfg.Limits.WithDefaults(),
		deliverers:  cfg.Deliverers,
		roles:       cfg.Roles,
		instance:    CleanName(cfg.Instance),
		topics:      map[string]*Topic{},
	}
	e.dispatch = dispatchers{e: e, changed: make(chan struct{}, 1)}
	e.schedules = scheduler{e: e, life: startStop{wake: make(chan struct{}, 1)}}
	e.refresh = topicRefresh{e: e, every: cmp.Or(cfg.TopicRefresh, 2*time.Second), life: startStop{wake: make(chan struct{}, 1)}}
	e.notices.e = e
	e.events.e = e
	e.expiry = expirySweep{e: e, every: cmp.Or(cfg.ExpirySweep, 30*time.Second)}
	return e, nil
}

// Limits returns the engine's input limits, defaults filled.
func (e *Engine) Limits() Limits { return e.limits }

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// Clock returns the engine's clock.
func (e *Engine) Clock() Clock { return e.clock }

// PushParams describe one job to create or replace, as a transport decoded
// it. Unset optional fields are zero (nil for Delay and RunAt). Its JSON
// form is how stores keep a job's next step (Job.Then).
type PushParams struct {
	Topic string `json:"topic"`
	// Body is a JSON value, delivered byte for byte. Empty means null.
	Body json.RawMessage `json:"body,omitempty"`
	// Delay and RunAt are exclusive; neither means now. A step's Delay
	// counts from its job's finish (Job.Then).
	Delay *time.Duration `json:"delay,omitempty"`
	RunAt *time.Time     `json:"run_at,omitempty"`
	// ID is the client's id; empty makes a new one.
	ID string `json:"id,omitempty"`
	// TTR and MaxAttempts default to the topic's.
	TTR         time.Duration `json:"ttr,omitempty"`
	MaxAttempts int           `json:"max_attempts,omitempty"`
	Key         string        `json:"key,omitempty"`
	TraceParent string        `json:"traceparent,omitempty"`
	// RetryDelays, when set, is the job's retry schedule instead of its
	// topic's backoff.
	RetryDelays []time.Duration `json:"retry_delays,omitempty"`
	// Priority orders the job among those due with it (Job.Priority).
	Priority int `json:"priority,omitempty"`
	// URL is the job's own webhook URL (Job.URL); empty for the topic's.
	URL string `json:"url,omitempty"`
	// ExpiresAt and ExpiresIn (from run_at) are exclusive; neither takes
	// the topic's ExpiresIn, and without one the job never expires
	// (Job.ExpiresAt).
	ExpiresAt *time.Time     `json:"expires_at,omitempty"`
	ExpiresIn *time.Duration `json:"expires_in,omitempty"`
	// Then is the job's next step, pushed once it is done (Job.Then).
	Then *PushParams `json:"then,omitempty"`
	// BodyChecked says that Body is known to be a JSON value in UTF-8, as
	// a RawMessage that transports/wire decoded from a request checked for
	// UTF-8 is, so that the engine does not scan it again.
	BodyChecked bool `json:"-"`
}

// PushBatchParams are the arguments of Engine.PushBatch.
type PushBatchParams struct {
	// Jobs to create (or replace), each validated and stored on its own. A
	// nil entry gets an ErrInvalidArgument result.
	Jobs []*PushParams
	// Replace creates or replaces (reschedules) each job, as Engine.Replace
	// does; otherwise an id in use is a conflict, as for Engine.Push.
	Replace bool
	// Via is how the push came (an Origin constant) and Token the name of
	// the API token that made it, empty without tokens: the jobs' Changes
	// keep them.
	Via, Token string
}

// PushResult is the outcome of one job of a batch.
type PushResult struct {
	// Job is the stored job, nil on error.
	Job *Job
	// Err is a *FieldError, a *ConflictError or an infrastructure error.
	Err error
	// Replaced is true when an unfinished job was replaced.
	Replaced bool
}

// Push creates a job. Errors: *FieldError (ErrInvalidArgument, ErrTooLarge),
// *ConflictError when the id names an unfinished job, ErrUnavailable.
func (e *Engine) Push(ctx context.Context, p *PushParams) (*Job, error) {
	if p == nil {
		return nil, noParams("push")
	}
	rs, err := e.PushBatch(ctx, &PushBatchParams{Jobs: []*PushParams{p}})
	if err != nil {
		return nil, err
	}
	return rs[0].Job, rs[0].Err
}

// Replace creates or reschedules the job with p.ID, reporting whether an
// existing job was replaced. Errors as Push; a reserved job is a conflict.
func (e *Engine) Replace(ctx context.Context, p *PushParams) (*Job, bool, error) {
	if p == nil {
		return nil, false, noParams("replace")
	}
	if p.ID == "" {
		return nil, false, Invalid("id", "id is required to replace a job")
	}
	rs, err := e.PushBatch(ctx, &PushBatchParams{Jobs: []*PushParams{p}, Replace: true})
	if err != nil {
		return nil, false, err
	}
	return rs[0].Job, rs[0].Replaced, rs[0].Err
}

// PushBatch creates (or with p.Replace, creates or replaces) p.Jobs, each on
// its own, and returns one result per job in order: every failure of a job,
// the store's included, is in its result. The error is only for a nil p
// (ErrInvalidArgument), with no results. The caller bounds the batch by
// Limits.MaxBatch.
func (e *Engine) PushBatch(ctx context.Context, p *PushBatchParams) ([]PushResult, error) {
	if p == nil {
		return nil, noParams("push batch")
	}
	results := make([]PushResult, len(p.Jobs))
	if e.topicsMissing.Load() {
		for i := range results {
			results[i].Err = errTopicsMissing
		}
		return results, nil
	}
	// Jobs to create, and jobs to create or replace: those of p.Replace
	// and the keyed jobs of topics whose unique keys replace.
	var groups [2]struct {
		jobs []*Job
		idx  []int
	}
	now := e.clock.Now()
	urls := urlChecks{}
	for i, jp := range p.Jobs {
		job, byKey, err := e.newJob(jp, now, urls)
		if err == nil {
			job.Changes = pushChange(p)
		}
		if err == nil && job.Then != nil {
			err = e.makeCursor(ctx)
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		g := &groups[0]
		if p.Replace || byKey {
			g = &groups[1]
		}
		g.jobs = append(g.jobs, job)
		g.idx = append(g.idx, i)
	}
	for n, g := range groups {
		if len(g.jobs) == 0 {
			continue
		}
		err := e.noteExpiring(ctx, g.jobs)
		var put []PutResult
		if err == nil {
			pp := e.putParams(g.jobs)
			pp.Replace = n == 1
			put, err = e.store.PutJobs(ctx, pp)
		}
		for k, i := range g.idx {
			switch {
			case err != nil:
				results[i].Err = err
			case put[k].Err != nil:
				results[i].Err = put[k].Err
			default:
				results[i] = PushResult{Job: g.jobs[k], Replaced: put[k].Replaced}
			}
		}
	}
	return results, nil
}

// newJob validates p and builds the job to store, with a new id when p has
// none (the key's id on a topic with unique keys) and defaults from the
// topic's configuration. It resolves delay into run_at first (the topic's
// delay when p gives neither delay nor run_at), then checks the job as
// validateJob does (urls remembers the job URLs checked). byKey is true
// when the topic's unique keys make the push a replace.
func (e *Engine) newJob(p *PushParams, now time.Time, urls urlChecks) (job *Job, byKey bool, err error) {
	if p == nil {
		return nil, false, Invalid("", "no job")
	}
	topic := e.topic(p.Topic)
	runAt := now.Add(topic.Delay)
	switch {
	case p.Delay != nil && p.RunAt != nil:
		return nil, false, Invalid("delay", "delay and run_at are exclusive")
	case p.Delay != nil:
		if *p.Delay < 0 {
			return nil, false, Invalid("delay", "delay must not be negative")
		}
		if *p.Delay > e.limits.MaxDelay {
			return nil, false, Invalid("delay", "delay must be at most %s", e.limits.MaxDelay)
		}
		runAt = now.Add(*p.Delay)
	case p.RunAt != nil:
		runAt = *p.RunAt
	}
	expires, err := expiresAt(p, topic, runAt, now)
	if err != nil {
		return nil, false, err
	}
	job = &Job{
		ID:          p.ID,
		Topic:       p.Topic,
		Key:         p.Key,
		Body:        p.Body,
		RunAt:       runAt,
		TTR:         cmp.Or(p.TTR, topic.TTR),
		MaxAttempts: cmp.Or(p.MaxAttempts, topic.MaxAttempts),
		State:       StateScheduled,
		CreatedAt:   now.UTC(),
		UpdatedAt:   now.UTC(),
		TraceParent: p.TraceParent,
		RetryDelays: p.RetryDelays,
		Priority:    p.Priority,
		URL:         p.URL,
		ExpiresAt:   expires,
		Retention:   topic.Retention,
	}
	if err := keyedID(job, topic); err != nil {
		return nil, false, err
	}
	if job.ID == "" {
		job.ID = NewID()
	}
	if err := e.validateJob(job, p.BodyChecked, now, urls); err != nil {
		return nil, false, err
	}
	if p.Then != nil {
		if job.Then, err = e.checkThen(p.Then, now, urls); err != nil {
			return nil, false, err
		}
	}
	job.RunAt = StoreTime(job.RunAt)
	if !job.ExpiresAt.IsZero() {
		job.ExpiresAt = StoreTime(job.ExpiresAt)
	}
	if !job.RunAt.After(now) {
		job.State = StateReady
	}
	return job, job.Key != "" && topic.UniqueKeys == UniqueKeysReplace, nil
}

// keyedID gives a keyed job of a topic with unique keys its key's id, and
// refuses every other id of a derived form (IsDerivedID): a client that
// chose the id of another topic's key could otherwise block or, where keys
// replace, move that topic's job, one that chose a schedule slot's id
// would block the slot, and one that chose a notice's id the notice. The
// engine's own jobs get their derived ids after it (slotJob) or without it
// (notices), so every push of a client passes here.
func keyedID(job *Job, topic *Topic) error {
	if topic.UniqueKeys == "" || job.Key == "" {
		if IsDerivedID(job.ID) {
			return Invalid("id", "ids of the form k-, s-, n-, e- or c- and 32 hex digits are delayq's own (unique keys, schedule slots, dead-letter notices, events, chains), not for clients")
		}
		return nil
	}
	id := KeyID(job.Topic, job.Key)
	if job.ID != "" && job.ID != id {
		return Invalid("id", "topic %s has unique keys: a job with key %q has the id %s, not %s", job.Topic, job.Key, id, job.ID)
	}
	job.ID = id
	return nil
}

// UniqueKeys returns the unique_keys of topic name as the engine holds it
// (Topic.UniqueKeys, "" when its keys are not unique), so that an intake
// that derives job ids leaves a keyed job of such a topic its key's id.
func (e *Engine) UniqueKeys(name string) string { return e.topic(name).UniqueKeys }

// topic returns the cached configuration of a topic with defaults filled, or
// the defaults alone for an unconfigured topic. Callers share it: they read
// it and never change it.
func (e *Engine) topic(name string) *Topic {
	e.mu.Lock()
	t := e.topics[name]
	e.mu.Unlock()
	if t != nil {
		return t
	}
	if d := e.unconfigured.Load(); d != nil && d.Name == name {
		return d
	}
	d := Topic{Name: name}.WithDefaults()
	e.unconfigured.Store(&d)
	return &d
}

// putParams returns the PutJobsParams of jobs, with the fair topics among
// theirs (PutJobsParams.Fair).
func (e *Engine) putParams(jobs []*Job) *PutJobsParams {
	p := &PutJobsParams{Jobs: jobs}
	last := ""
	for _, j := range jobs {
		// A batch's jobs mostly share a topic: one lookup for a run of
		// them, not a lock (and a default topic made) per job.
		if j.Topic == last {
			continue
		}
		last = j.Topic
		if !slices.Contains(p.Fair, j.Topic) && e.topic(j.Topic).Fair {
			p.Fair = append(p.Fair, j.Topic)
		}
	}
	return p
}

// Get returns a job. Errors: ErrNotFound.
func (e *Engine) Get(ctx context.Context, id string) (*Job, error) {
	if ValidateID(id) != nil {
		return nil, ErrNotFound
	}
	return e.store.GetJob(ctx, id)
}

// Cancel cancels the job p.ID, as Store.CancelJob: with p.Running a
// reserved one too, whose delivery, when this engine's claim made it for
// a subscription, is told to its subscriber (SubscriptionParams.CancelledFunc)
// and gives its credit back; another instance's subscription learns it by
// its recheck (SubscriptionParams.Recheck). Errors: ErrNotFound, ErrConflict.
func (e *Engine) Cancel(ctx context.Context, p *CancelJobParams) error {
	if p == nil {
		return noParams("cancel")
	}
	if ValidateID(p.ID) != nil {
		return ErrNotFound
	}
	if err := e.store.CancelJob(ctx, &CancelJobParams{ID: p.ID, Running: p.Running}); err != nil {
		return err
	}
	if p.Running {
		e.leases.cancelled(p.ID, "")
	}
	return nil
}

// Claim limits.
const (
	// ClaimMaxLimit is the most jobs one claim returns.
	ClaimMaxLimit = 1000
	// ClaimWaitLimit is the longest a claim waits.
	ClaimWaitLimit = 60 * time.Second
)

// Claim takes up to p.Max due jobs of p.Topic, waiting up to p.Wait for the
// first. Errors: *FieldError for a bad topic, max or wait; ErrDraining once
// the engine drains (a claim waiting then returns what it has).
func (e *Engine) Claim(ctx context.Context, p *ClaimJobsParams) ([]*Job, error) {
	if p == nil {
		return nil, noParams("claim")
	}
	return e.claimFor(ctx, p, nil)
}

// claimFor claims as Claim does, for sub (nil for a pull consumer), and
// records the deliveries in the engine's record of those in flight.
func (e *Engine) claimFor(ctx context.Context, p *ClaimJobsParams, sub *Subscription) ([]*Job, error) {
	if err := ValidateTopicName(p.Topic); err != nil {
		return nil, err
	}
	if p.Max < 1 || p.Max > ClaimMaxLimit {
		return nil, Invalid("max", "max must be between 1 and %d", ClaimMaxLimit)
	}
	if p.Wait < 0 || p.Wait > ClaimWaitLimit {
		return nil, Invalid("wait", "wait must be between 0 and %s", ClaimWaitLimit)
	}
	// Counted before the check, and until its deliveries are recorded:
	// a claim the drain did not refuse is one WaitSettled sees.
	e.claiming.Add(1)
	defer e.claiming.Add(-1)
	if e.draining.Load() {
		return nil, ErrDraining
	}
	if e.topicsMissing.Load() {
		return nil, errTopicsMissing
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.drainCtx, cancel)()
	jobs, err := e.claim(ctx, &ClaimJobsParams{Topic: p.Topic, Max: p.Max, Wait: p.Wait, Via: p.Via, Consumer: CleanName(p.Consumer)})
	e.leases.add(jobs, e.clock.Now(), sub)
	return jobs, err
}

// Ack marks the delivery of p.ID under p.Lease done. Errors: ErrNotFound,
// ErrLeaseLost.
func (e *Engine) Ack(ctx context.Context, p *AckJobParams) error {
	if p == nil {
		return noParams("ack")
	}
	if err := validateLease(p.ID, p.Lease); err != nil {
		return err
	}
	_, err := e.store.AckJob(ctx, &AckJobParams{ID: p.ID, Lease: p.Lease})
	e.leases.ended(p.ID, p.Lease, err)
	return err
}

// AckBatch marks many deliveries done at once, each as Ack would, written
// together, and returns one error per ack in order, nil for an ack that
// settled: an ack with a malformed id or no lease fails alone, and a
// failure of the store is the error of every ack sent to it. The error is
// only for a nil p (ErrInvalidArgument), with no results. The caller
// bounds the batch by Limits.MaxBatch, as for PushBatch.
func (e *Engine) AckBatch(ctx context.Context, p *AckJobsParams) ([]error, error) {
	if p == nil {
		return nil, noParams("ack batch")
	}
	errs := make([]error, len(p.Acks))
	valid := make([]AckJobParams, 0, len(p.Acks))
	idx := make([]int, 0, len(p.Acks))
	for i, a := range p.Acks {
		if errs[i] = validateLease(a.ID, a.Lease); errs[i] == nil {
			valid = append(valid, a)
			idx = append(idx, i)
		}
	}
	if len(valid) == 0 {
		return errs, nil
	}
	res, err := e.store.AckJobs(ctx, &AckJobsParams{Acks: valid})
	for k, i := range idx {
		if err != nil {
			errs[i] = err
		} else {
			errs[i] = res[k].Err
		}
		e.leases.ended(p.Acks[i].ID, p.Acks[i].Lease, errs[i])
	}
	return errs, nil
}

// NackParams describe a failed delivery.
type NackParams struct {
	ID    string
	Lease string
	// Delay before the retry; nil takes the topic's backoff.
	Delay *time.Duration
	// Error says why the attempt failed.
	Error string
}

// Nack ends a delivery as failed: the job is retried after p.Delay (or the
// topic's backoff), or goes dead when its attempts are used up. Errors:
// *FieldError, ErrNotFound, ErrLeaseLost.
func (e *Engine) Nack(ctx context.Context, p *NackParams) error {
	if p == nil {
		return noParams("nack")
	}
	if err := validateLease(p.ID, p.Lease); err != nil {
		return err
	}
	if p.Delay != nil && (*p.Delay < 0 || *p.Delay > e.limits.MaxDelay) {
		return Invalid("delay", "delay must be between 0 and %s", e.limits.MaxDelay)
	}
	job, err := e.store.GetJob(ctx, p.ID)
	if err != nil {
		return err
	}
	if job.State != StateReserved || job.Lease != p.Lease {
		err = ErrLeaseLost
	} else {
		err = e.fail(ctx, job, p.Delay, p.Error)
	}
	e.leases.ended(p.ID, p.Lease, err)
	return err
}

// ReleaseParams are the arguments of Engine.Release.
type ReleaseParams struct {
	ID    string
	Lease string
	// Error says why the delivery was not made.
	Error string
}

// Release ends a delivery that never reached its consumer, such as a claim
// whose client left before the answer was written: the job is due again
// now with its attempt given back (RetryJobParams.Unsent), so that it goes
// dead only for deliveries made. Errors: *FieldError, ErrNotFound,
// ErrLeaseLost.
func (e *Engine) Release(ctx context.Context, p *ReleaseParams) error {
	if p == nil {
		return noParams("release")
	}
	if err := validateLease(p.ID, p.Lease); err != nil {
		return err
	}
	_, err := e.store.RetryJob(ctx, &RetryJobParams{ID: p.ID, Lease: p.Lease, RunAt: StoreTime(e.clock.Now()), Error: p.Error, Unsent: true})
	e.leases.ended(p.ID, p.Lease, err)
	return err
}

// backoff is the backoff of job: its topic's, with the job's own retry
// schedule when it has one.
func (e *Engine) backoff(job *Job) Backoff {
	b := e.topic(job.Topic).Backoff
	if len(job.RetryDelays) > 0 {
		b.Delays = job.RetryDelays
	}
	return b
}

// fail retries or buries a reserved job after a failed attempt.
func (e *Engine) fail(ctx context.Context, job *Job, delay *time.Duration, reason string) error {
	reason = CutError(reason)
	if job.Attempt >= job.MaxAttempts {
		_, err := e.store.BuryJob(ctx, &BuryJobParams{ID: job.ID, Lease: job.Lease, Error: reason})
		return err
	}
	var d time.Duration
	if delay != nil {
		d = *delay
	} else {
		d = e.backoff(job).Delay(job.Attempt)
	}
	runAt := StoreTime(e.clock.Now().Add(d))
	_, err := e.store.RetryJob(ctx, &RetryJobParams{ID: job.ID, Lease: job.Lease, RunAt: runAt, Error: reason})
	return err
}

// Touch extends the lease p.Lease of job p.ID by the job's TTR. Errors:
// ErrNotFound, ErrLeaseLost.
func (e *Engine) Touch(ctx context.Context, p *TouchJobParams) (*Job, error) {
	if p == nil {
		return nil, noParams("touch")
	}
	if err := validateLease(p.ID, p.Lease); err != nil {
		return nil, err
	}
	job, err := e.store.TouchJob(ctx, &TouchJobParams{ID: p.ID, Lease: p.Lease})
	if err != nil {
		e.leases.ended(p.ID, p.Lease, err)
		return nil, err
	}
	e.leases.touched(job)
	return job, nil
}

// Requeue makes a dead job ready with a fresh attempt count. Errors:
// ErrNotFound, ErrConflict when the job is not dead.
func (e *Engine) Requeue(ctx context.Context, id string) error {
	if ValidateID(id) != nil {
		return ErrNotFound
	}
	return e.store.RequeueJob(ctx, id)
}

// DeadLimitMax bounds a dead-job listing.
const DeadLimitMax = 1000

// ListDead lists up to p.Limit dead jobs of p.Topic, oldest death first,
// whose bodies take at most ListPageBytes (at least one job): the first
// page of ListJobs in StateDead. Errors: *FieldError for a bad topic or
// limit; the store's.
func (e *Engine) ListDead(ctx context.Context, p *ListDeadJobsParams) ([]*Job, error) {
	if p == nil {
		return nil, noParams("list dead")
	}
	if err := ValidateTopicName(p.Topic); err != nil {
		return nil, err
	}
	if p.Limit < 1 || p.Limit > DeadLimitMax {
		return nil, Invalid("limit", "limit must be between 1 and %d", DeadLimitMax)
	}
	page, err := e.ListJobs(ctx, &ListJobsParams{Topic: p.Topic, State: StateDead, Limit: p.Limit})
	return page.Jobs, err
}

// FindLimitMax bounds one page of FindJobs.
const FindLimitMax = 1000

// FindJobs lists the jobs of p.Topic with business key p.Key, in id order,
// a page of up to p.Limit after p.After. Errors: *FieldError for a bad
// topic, key, cursor or limit.
func (e *Engine) FindJobs(ctx context.Context, p *FindJobsParams) ([]*Job, error) {
	if p == nil {
		return nil, noParams("find jobs")
	}
	if err := ValidateTopicName(p.Topic); err != nil {
		return nil, err
	}
	if p.Key == "" {
		return nil, Invalid("key", "key is required")
	}
	if err := ValidateKey(p.Key); err != nil {
		return nil, err
	}
	if p.After != "" && ValidateID(p.After) != nil {
		return nil, Invalid("after", "after must be a job id")
	}
	if p.Limit < 1 || p.Limit > FindLimitMax {
		return nil, Invalid("limit", "limit must be between 1 and %d", FindLimitMax)
	}
	return e.store.FindJobs(ctx, &FindJobsParams{Topic: p.Topic, Key: p.Key, After: p.After, Limit: p.Limit})
}

// CancelByKeyResult is what Engine.CancelByKey did.
type CancelByKeyResult struct {
	// Cancelled are the ids of the jobs it cancelled, in id order.
	Cancelled []string
	// Reserved are the ids of the jobs it left because a consumer holds
	// them (CancelJob's conflict), in id order.
	Reserved []string
}

// CancelByKey cancels every unfinished job of topic with business key key
// (scheduled, ready or dead) and reports which it cancelled and which it
// left because they are reserved. A job pushed with the key while it runs
// may be left too. Errors: *FieldError for a bad topic or key; the
// store's, with what was cancelled so far.
func (e *Engine) CancelByKey(ctx context.Context, topic, key string) (CancelByKeyResult, error) {
	res := CancelByKeyResult{Cancelled: []string{}, Reserved: []string{}}
	p := &FindJobsParams{Topic: topic, Key: key, Limit: FindLimitMax}
	for {
		jobs, err := e.FindJobs(ctx, p)
		if err != nil {
			return res, err
		}
		for _, j := range jobs {
			if j.State.Finished() {
				continue
			}
			err := e.store.CancelJob(ctx, &CancelJobParams{ID: j.ID})
			switch {
			case err == nil:
				res.Cancelled = append(res.Cancelled, j.ID)
			case errors.Is(err, ErrConflict):
				res.Reserved = append(res.Reserved, j.ID)
			case errors.Is(err, ErrNotFound): // finished meanwhile
			default:
				return res, err
			}
		}
		if len(jobs) < p.Limit {
			return res, nil
		}
		p.After = jobs[len(jobs)-1].ID
	}
}

// PutTopic validates and stores a topic configuration; this instance applies
// it at once, others within TopicRefresh. A topic with Events makes the
// events' cursor first when the deployment has none, so that its jobs'
// finishes from then on are told. Errors: *FieldError, the store's.
func (e *Engine) PutTopic(ctx context.Context, t *Topic) error {
	if t == nil {
		return noParams("put topic")
	}
	if err := e.checkTopic(t); err != nil {
		return err
	}
	if t.Events.Topic != "" {
		// Before the topic: what finishes once it is stored is told.
		if err := e.events.start(ctx); err != nil {
			return err
		}
	}
	stored := *t
	stored.Configured = true
	if err := putTopic(ctx, e.store, &stored); err != nil {
		return err
	}
	e.cacheTopics(map[string]*Topic{t.Name: &stored}, false)
	return nil
}

// checkTopic validates t, its settings by the store (TopicChecker) and its
// delivery by its deliverer on this server. Errors: *FieldError.
func (e *Engine) checkTopic(t *Topic) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if t.ExpiresIn > e.limits.MaxDelay {
		return Invalid("expires_in", "expires_in must be at most %s", e.limits.MaxDelay)
	}
	if t.Delay > e.limits.MaxDelay {
		return Invalid("delay", "delay must be at most %s", e.limits.MaxDelay)
	}
	if err := CheckTopicOn(e.store, t); err != nil {
		return err
	}
	typ := cmp.Or(t.Delivery.Type, DeliveryConsumer)
	if typ == DeliveryConsumer {
		return nil
	}
	d := e.deliverers[typ]
	if d == nil {
		return Invalid("delivery.type", "delivery type %q is not available on this server", typ)
	}
	return d.ValidateTopic(t)
}

// GetTopic returns a topic with its counts. Errors: ErrNotFound.
func (e *Engine) GetTopic(ctx context.Context, name string) (*Topic, error) {
	if ValidateTopicName(name) != nil {
		return nil, ErrNotFound
	}
	return readTopic(ctx, e.store, name)
}

// ListTopics returns every topic that is configured, paused or has jobs,
// with counts, sorted by name.
func (e *Engine) ListTopics(ctx context.Context) ([]*Topic, error) {
	return listTopics(ctx, e.store)
}

// DeleteTopic drops a topic's configuration. Errors: ErrNotFound.
func (e *Engine) DeleteTopic(ctx context.Context, name string) error {
	if ValidateTopicName(name) != nil {
		return ErrNotFound
	}
	if err := deleteTopic(ctx, e.store, name); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.topics, name)
	e.mu.Unlock()
	e.refresh.readNow()
	return nil
}

// SetTopicPaused pauses or resumes the deliveries of a topic
// (Store.SetTopicPaused): claims, WebSocket subscriptions and push
// deliveries of every instance take nothing while it is paused. Errors:
// *FieldError for an invalid topic name.
func (e *Engine) SetTopicPaused(ctx context.Context, name string, paused bool) error {
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	return e.store.SetTopicPaused(ctx, name, paused)
}

// Ready reports whether the store answers; ErrDraining once the engine
// drains, and errTopicsMissing until a started engine has read the
// topics' configurations, so that a load balancer sends it no work then.
func (e *Engine) Ready(ctx context.Context) error {
	if e.draining.Load() {
		return ErrDraining
	}
	if e.topicsMissing.Load() {
		return errTopicsMissing
	}
	return e.store.Ping(ctx)
}

// noParams is the error of an engine call given nil params: a
// programming error of the caller, reported as ErrInvalidArgument rather
// than as a panic, as the stores answer nil PutJobs, ClaimJobs and
// ListDeadJobs params.
func noParams(call string) error {
	return Invalid("", "engine: %s: no params", call)
}

func validateLease(id, lease string) error {
	if ValidateID(id) != nil {
		return ErrNotFound
	}
	if lease == "" {
		return Invalid("lease", "lease is required")
	}
	return nil
}

// String describes the engine for logs.
func (e *Engine) String() string { return fmt.Sprintf("engine(%T)", e.store) }
