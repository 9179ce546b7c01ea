package core

import (
	"context"
	"slices"
	"time"
)

// Store keeps jobs, the state of topics (counts, pause) and metadata
// records (Record: topic configurations and schedules) durably and
// promotes jobs when they are due. Every backend implements it and passes
// core/storetest.
//
// Jobs handed to a store are validated and complete: the engine fills id,
// run_at (UTC, ms precision), ttr and max_attempts. Jobs returned are copies
// the caller may change. Each change of state follows the Job method of
// its name (Reset for PutJobs, Reserve for ClaimJobs, AsOf for what any
// call reports, and so on). Times are compared with the store's clock. The
// settling calls (AckJob, RetryJob, BuryJob) return a SettleResult with the
// settled job's topic, attempt and new state, so that a decorator labels the
// outcome without remembering the claims it saw.
type Store interface {
	// PutJobs stores a batch of jobs, each on its own: the result has one
	// entry per job, in order, nil on success. A per-job error is a
	// *ConflictError (ErrConflict) carrying the existing job when the id
	// names a job that is not finished (create), or is reserved (replace).
	// A finished job (done, cancelled) with the same id is overwritten,
	// unless params.IfAbsent, with which any job of the id conflicts.
	// The returned error is an infrastructure failure, with no per-job
	// results; some jobs may have been stored. Jobs are applied in order,
	// so a later duplicate id in the same batch conflicts (or, with
	// Replace, wins).
	//
	// Stored jobs get State scheduled, Attempt 0, no LastError, CreatedAt
	// now (kept on replace); a job whose run_at has passed is ready at once.
	PutJobs(ctx context.Context, params *PutJobsParams) ([]PutResult, error)

	// GetJob returns the job with that id, with its current state: a
	// scheduled job whose run_at has passed is reported ready, a reserved
	// job whose lease expired is reported ready (dead if it had used all
	// its attempts). Lease is set while reserved; transports must not show
	// it. Finished jobs are found for the retention period. Errors:
	// ErrNotFound.
	GetJob(ctx context.Context, id string) (*Job, error)

	// CancelJob cancels the job params.ID when it is scheduled, ready or
	// dead, or with params.Running reserved (its lease current): it becomes
	// cancelled and is never delivered again. A reserved job's delivery
	// ends with it, its attempt ended cancelled (Job.Finish), and a later
	// settling call of its lease gets ErrLeaseLost. Errors: ErrNotFound
	// (unknown or already finished, so a second cancel gets ErrNotFound),
	// ErrConflict (a *ConflictError with the job) while reserved without
	// params.Running.
	CancelJob(ctx context.Context, params *CancelJobParams) error

	// ExpireJob ends a queued job whose expiry has come: a scheduled or
	// ready job (as of now) with ExpiresAt at or before now goes dead with
	// LastError JobExpired (Job.Bury, no attempt in progress), recorded as
	// any death (the dead list, ListFinished). Errors: ErrNotFound (unknown
	// or finished), ErrConflict (a *ConflictError with the job,
	// NotExpiredConflict) when it is reserved, dead or not expired.
	ExpireJob(ctx context.Context, id string) error

	// ClaimJobs takes up to params.Max due jobs of a topic, the most urgent
	// first (lowest Priority) and in run_at order within one priority, and
	// reserves each with a fresh lease for the job's TTR. It waits up to
	// params.Wait for the first due job (woken by arrival or due time,
	// never by a busy poll) and returns an empty slice, not an error, only
	// when the wait or ctx ran out. Each job returned has State reserved,
	// Attempt incremented, Lease and LeaseExpiresAt set. Errors:
	// ErrInvalidArgument when Max < 1, ErrClosed when the store closes.
	//
	// A reserved job whose lease expired is due again, with LastError
	// "lease expired": it is claimed with Attempt incremented, unless it
	// had used all its attempts, in which case it goes dead, at the latest
	// by the time a claim of its topic has waited past the expiry.
	//
	// With params.InFlightMax, a claim waiting because the topic has that
	// many jobs reserved is woken when one of its deliveries ends (ack,
	// retry, bury, expiry): at once on stores one process uses, within
	// InFlightRecheck on shared stores, whose claims racing on several
	// instances may together take more than the room each saw.
	ClaimJobs(ctx context.Context, params *ClaimJobsParams) ([]*Job, error)

	// AckJob marks a reserved job done and returns what it settled (state
	// done). Errors: ErrNotFound, ErrLeaseLost when the lease is not
	// current or expired.
	AckJob(ctx context.Context, params *AckJobParams) (SettleResult, error)

	// AckJobs acknowledges many deliveries at once, each as AckJob would,
	// in order, written together (one write, one round trip or one script
	// where the backend allows): the result has one entry per ack. An id
	// acknowledged twice in one call settles once; the later ack gets
	// ErrLeaseLost, as a second AckJob would. The returned error is an
	// infrastructure failure, with no results; some acks may have been
	// applied, and an ack applied again gets ErrLeaseLost.
	AckJobs(ctx context.Context, params *AckJobsParams) ([]AckResult, error)

	// RetryJob ends a delivery as failed and schedules the job again at
	// params.RunAt (zero means now) with LastError set, and returns what it
	// settled (state scheduled, or ready when RunAt has come); with
	// params.Unsent the delivery's attempt is given back (Job.RetryFor).
	// Errors: ErrNotFound, ErrLeaseLost.
	RetryJob(ctx context.Context, params *RetryJobParams) (SettleResult, error)

	// BuryJob ends a delivery as failed for good: the job goes dead with
	// LastError set. It returns what it settled (state dead). Errors:
	// ErrNotFound, ErrLeaseLost.
	BuryJob(ctx context.Context, params *BuryJobParams) (SettleResult, error)

	// TouchJob extends a lease to now + the job's TTR and returns the job
	// with the new LeaseExpiresAt; the lease token stays. Errors:
	// ErrNotFound, ErrLeaseLost.
	TouchJob(ctx context.Context, params *TouchJobParams) (*Job, error)

	// RequeueJob makes a dead job ready now (run_at now) with Attempt 0, a
	// fresh attempt count; LastError stays. Errors: ErrNotFound,
	// ErrConflict when the job is in any other state.
	RequeueJob(ctx context.Context, id string) error

	// ListDeadJobs returns up to params.Limit dead jobs of a topic, oldest
	// death first, those that died at or after params.Since when it is set.
	// Errors: ErrInvalidArgument when Limit < 1.
	ListDeadJobs(ctx context.Context, params *ListDeadJobsParams) ([]*Job, error)

	// ListFinished reads the store's record of finished jobs: an entry
	// (FinishedJob) for each time a job became done, cancelled or dead,
	// written in the same atomic write as the change, so that a crash
	// loses both or neither. It returns up to params.Limit entries after
	// the cursor params.After, oldest first. Cursors outlive restarts and
	// serve every instance of a shared store: a reader that goes on from
	// the Next of its last read meets each entry recorded after it once, in
	// the order recorded, which is one sequence, or one per shard on a
	// store with shards (a job's entries are all in one). A requeue or a
	// reused id keeps the entries of the finishes before it, and the job's
	// next finish adds one. Entries are kept for the retention period of
	// finished jobs from when they were recorded; docs/backends.md says
	// what the NATS store, whose record is its jobs' messages, keeps
	// otherwise. Errors: ErrInvalidArgument (CheckListFinished, or After
	// not a cursor of this store's record).
	ListFinished(ctx context.Context, params *ListFinishedParams) (FinishedPage, error)

	// FindJobs returns the jobs of params.Topic whose business key is
	// params.Key: every job GetJob finds (finished ones within retention
	// included), each as GetJob reports it, in id order, those after
	// params.After, at most params.Limit. A job is found under the topic and
	// key it has now: a replace or a reused id moves it. Errors:
	// ErrInvalidArgument when Limit < 1 or Key is empty.
	FindJobs(ctx context.Context, params *FindJobsParams) ([]*Job, error)

	// ListJobs returns a page of params.Topic's jobs in params.State, each
	// as GetJob reports it as of now: listing ready includes the scheduled
	// jobs whose run_at passed and the reserved jobs whose lease expired
	// with attempts left, listing dead those whose lease expired on their
	// last attempt, and reserved leaves both out. Finished jobs are listed
	// within retention. The page holds at most params.Limit jobs from the
	// position params.After (the Next of the previous page; empty for the
	// start), and Next is set when there may be more. The orders:
	//
	//   - scheduled and ready: by run_at, ties by id;
	//   - reserved: by lease expiry, ties by id;
	//   - dead: by time of death (UpdatedAt), oldest first, as ListDeadJobs;
	//   - done and cancelled: newest finished (UpdatedAt) first.
	//
	// The NATS store keeps no order by time: it lists every state in stream
	// order, the order in which the jobs got to where they are (put,
	// retry, claim, requeue, death, finish: the sequence of the job's last
	// message), done and cancelled newest first, reading the topic's
	// messages of the state from the cursor on, so that a page costs
	// reading the messages it passes over; it lists a scheduled job whose
	// schedule the server fires late (over Lead past run_at) as ready only
	// once it fired. Each job appears once in a walk by pages over jobs
	// that stay where they are; a job that changes state or position while
	// a walk goes on may be missed or seen twice. Errors:
	// ErrInvalidArgument when Limit < 1, State is not a state, or After is
	// not a cursor of this listing (CheckList).
	ListJobs(ctx context.Context, params *ListJobsParams) (JobPage, error)

	// GetTopicState returns what the store keeps of a topic beside its
	// jobs: its counts, its jobs in each state, and whether it is paused.
	// Done and Cancelled count the jobs that finished so within the
	// retention period and are still kept, those GetJob finds: each from
	// when it finished until its retention ends, and a finished job whose id
	// a put reused counts once, in its new state and topic. A store may
	// count a finished job a little past its retention, never less: the
	// memory store not at all, the Redis store up to a 64th of the
	// retention (its time buckets), the NATS store until the server expires
	// the job's marker with its record. A topic the store holds nothing of
	// has zero counts and is not paused; that is no error. A topic's
	// configuration is a record (KindTopic), which core merges with it.
	GetTopicState(ctx context.Context, name string) (TopicState, error)

	// ListTopicStates returns the state of every topic that is paused or
	// has jobs (finished ones within retention included), as
	// GetTopicState gives it, sorted by name. It may list a topic that has
	// neither, with zero counts.
	ListTopicStates(ctx context.Context) ([]TopicState, error)

	// TakeRate takes tokens from a topic's rate limit: a token bucket of
	// params.Rate (Bucket's arithmetic), one per topic and store, shared by
	// every instance of a shared store, created full. It grants what the
	// bucket holds, up to params.Want, or gives -Want back. Other changes of
	// params.Rate apply to the bucket as it is. Errors: ErrInvalidArgument
	// when Rate.Limit < 1.
	TakeRate(ctx context.Context, params *TakeRateParams) (TakeRateResult, error)

	// SetTopicPaused pauses (paused true) or resumes a topic's deliveries.
	// While a topic is paused, claims of it take nothing: a claim waits as
	// if no job were due, and a resume wakes it. Intake, cancel, replace
	// and the settling of jobs already reserved go on; expired leases come
	// back as ready (or dead) and counts stay right. A topic need not be
	// configured or have jobs to be paused; a paused topic is listed by
	// ListTopicStates and GetTopicState, with Paused set, until it is
	// resumed. The state is apart from the topic's configuration record,
	// whose changes keep it. Idempotent. On stores shared by several
	// instances, a claim that started before the pause returned may still
	// take jobs; the NATS store's other instances see the change within
	// milliseconds, the other stores' at once.
	SetTopicPaused(ctx context.Context, name string, paused bool) error

	// GetRecord returns the metadata record of that kind and name with its
	// revision. Errors: ErrNotFound, ErrInvalidArgument (CheckRecord).
	GetRecord(ctx context.Context, kind, name string) (*Record, error)

	// PutRecord stores a record if it has params.Revision now (0: if it
	// does not exist) and returns its new revision. However many callers
	// put with one revision at once, one of them succeeds. Errors:
	// ErrConflict (a *ConflictError, RecordConflict) when the record does
	// not have that revision, ErrInvalidArgument (CheckPutRecord).
	PutRecord(ctx context.Context, params *PutRecordParams) (uint64, error)

	// DeleteRecord drops a record if it has params.Revision now. Errors:
	// ErrNotFound when there is none, ErrConflict (RecordConflict) when it
	// has another revision, ErrInvalidArgument (CheckDeleteRecord).
	DeleteRecord(ctx context.Context, params *DeleteRecordParams) error

	// ListRecords returns every record of a kind, sorted by name, an empty
	// slice for none. Errors: ErrInvalidArgument (CheckRecordKind).
	ListRecords(ctx context.Context, kind string) ([]*Record, error)

	// Ping checks that the backend answers.
	Ping(ctx context.Context) error

	// Close releases the store's resources. Idempotent. Claims waiting in
	// ClaimJobs return ErrClosed, and so does every later call.
	Close() error
}

// PutJobsParams are the arguments of Store.PutJobs.
type PutJobsParams struct {
	// Jobs to store, complete and valid.
	Jobs []*Job
	// Replace creates or replaces (reschedules) each job; otherwise an id
	// in use is a conflict.
	Replace bool
	// IfAbsent creates each job only while the store keeps no job of its
	// id in any state, finished ones (within retention) too: such an id
	// is a conflict (ExistsConflict, with the job as it is), where a create
	// would take a finished job over. A job made this way twice, a
	// schedule's slot fired again after a crash, is created once. Replace
	// is ignored with it.
	IfAbsent bool
	// Fair lists the topics of Jobs whose configuration is fair
	// (Topic.Fair), so that a store may keep their jobs by key from the
	// put on, for the round-robin of their claims (ClaimJobsParams.Fair),
	// rather than sort a backlog out at the first claim. A hint: a store
	// may ignore it, and claims are fair or not by their own parameters.
	Fair []string
}

// CancelJobParams are the arguments of Store.CancelJob and Engine.Cancel.
type CancelJobParams struct {
	ID string
	// Running cancels a reserved job too, ending its delivery; without it
	// a reserved job is a conflict.
	Running bool
}

// FindJobsParams are the arguments of Store.FindJobs and Engine.FindJobs
// (which also bounds Limit by FindLimitMax).
type FindJobsParams struct {
	Topic string
	// Key is the business key sought, not empty.
	Key string
	// After, when set, skips the jobs whose id is not greater: the last id
	// of the previous page.
	After string
	// Limit bounds the answer, at least 1.
	Limit int
}

// ListJobsParams are the arguments of Store.ListJobs and Engine.ListJobs
// (which also bounds Limit by ListLimitMax).
type ListJobsParams struct {
	Topic string
	// State is the state listed.
	State State
	// After, when set, is where the page starts: the Next of the previous
	// page, opaque to callers.
	After string
	// Limit bounds the page, at least 1.
	Limit int
}

// JobPage is a page of Store.ListJobs.
type JobPage struct {
	// Jobs in the listing's order; an empty slice, not nil, for none.
	Jobs []*Job
	// Next, when set, is the After of the next page: there may be more.
	Next string
}

// CheckList checks the arguments of Store.ListJobs as every store must
// (a store checks its own cursors): ErrInvalidArgument when params is nil,
// Limit < 1 or State is not a state.
func CheckList(params *ListJobsParams) error {
	switch {
	case params == nil:
		return Invalid("", "list jobs: no params")
	case params.Limit < 1:
		return Invalid("limit", "limit must be at least 1")
	case !slices.Contains(States, params.State):
		return Invalid("state", "state must be one of scheduled, ready, reserved, dead, done, cancelled")
	}
	return nil
}

// CheckRate checks the arguments of Store.TakeRate as every store must:
// ErrInvalidArgument when params is nil or its Rate does not limit.
func CheckRate(params *TakeRateParams) error {
	if params == nil || params.Rate.Limit < 1 || params.Rate.Period <= 0 || params.Rate.Burst < 1 {
		return Invalid("rate", "take rate: a rate with limit, period and burst is required")
	}
	return nil
}

// CheckFind checks the arguments of Store.FindJobs as every store must:
// ErrInvalidArgument when params is nil, Limit < 1 or Key is empty.
func CheckFind(params *FindJobsParams) error {
	switch {
	case params == nil:
		return Invalid("", "find jobs: no params")
	case params.Limit < 1:
		return Invalid("limit", "limit must be at least 1")
	case params.Key == "":
		return Invalid("key", "key must not be empty")
	}
	return nil
}

// FindPage answers FindJobs for a store whose key index may name jobs that
// moved or expired since it was read: ids, the index's ids after
// params.After in order, are read through read (a job per id, nil for one
// gone) a few more than the page needs at a time, until params.Limit jobs
// that still have params.Topic and params.Key are found.
func FindPage(ids []string, params *FindJobsParams, read func(ids []string) ([]*Job, error)) ([]*Job, error) {
	jobs := []*Job{}
	for len(ids) > 0 && len(jobs) < params.Limit {
		page := ids[:min(len(ids), params.Limit-len(jobs)+8)]
		ids = ids[len(page):]
		got, err := read(page)
		if err != nil {
			return nil, err
		}
		for _, j := range got {
			if j != nil && j.Topic == params.Topic && j.Key == params.Key && len(jobs) < params.Limit {
				jobs = append(jobs, j)
			}
		}
	}
	return jobs, nil
}

// PutResult is the outcome of one job of PutJobs.
type PutResult struct {
	// Err is nil on success, else a *ConflictError.
	Err error
	// Replaced is true when an existing unfinished job was replaced.
	Replaced bool
}

// ClaimJobsParams are the arguments of Store.ClaimJobs and Engine.Claim
// (which also bounds Max by ClaimMaxLimit and Wait by ClaimWaitLimit).
type ClaimJobsParams struct {
	// Topic to claim from.
	Topic string
	// Max is the most jobs returned, at least 1.
	Max int
	// Wait is how long to wait for the first due job; 0 answers at once.
	Wait time.Duration
	// InFlightMax, when set, bounds the topic's reserved jobs, counted
	// over every instance: the claim takes at most InFlightMax minus those
	// reserved now (Room), and none while there are that many, waiting as
	// it would for a due job until a delivery ends (Topic.MaxInFlight).
	InFlightMax int
	// KeyConcurrency, when set, bounds the reserved jobs of each business
	// key of the topic, counted over the whole store (Topic.KeyConcurrency):
	// a due job whose key has that many reserved is passed over, and goes
	// out, in its turn, once one of them ends. Jobs without a key are not
	// bounded. A store that cannot honour it refuses the topic
	// (TopicChecker).
	KeyConcurrency int
	// Fair, when set, takes due jobs round-robin across business keys
	// (Topic.Fair): one job of each key with a due job in turn, the keys
	// in a rotating ring, each key's jobs in claim order (priority, run_at,
	// creation). Priority orders jobs within a key, not across keys: the
	// ring serves keys in turn whatever their jobs' priorities. Jobs
	// without a key form one group of the ring. With KeyConcurrency, a key
	// at its bound is out of the ring until one of its slots comes back. A
	// store that cannot honour it refuses the topic (TopicChecker).
	Fair bool
	// KeyRate, when its Limit is set, is the rate of each business key of
	// the topic (Topic.Rate with PerKey): a due job whose key's token
	// bucket is empty is passed over, and goes out, in its turn, once the
	// bucket holds a token again; jobs without a key share one bucket. A
	// job needs a token and, with KeyConcurrency, a slot; fair takes pass
	// over a key without a token until it has one. The local stores keep
	// the buckets in memory, so a restart refills them; Redis keeps them in
	// the backend, shared by its instances. Its Limit, Period and Burst
	// are filled (Rate.WithDefaults). A store that cannot honour it refuses
	// the topic (TopicChecker).
	KeyRate Rate
	// Via is how the jobs will be delivered (a Via constant), kept in the
	// attempt each claim starts (Job.Reserve). Every transport sets it.
	Via string
	// Instance names the instance that claims (EngineConfig.Instance) and
	// Consumer is the address of the consumer the jobs go to, empty for
	// the engine's own deliveries: both kept in the attempt each claim
	// starts, as Via is. The engine sets Instance and cleans Consumer
	// (CleanName).
	Instance, Consumer string
}

// InFlightRecheck is how often a claim of a shared store (Redis, NATS)
// held back by ClaimJobsParams.InFlightMax looks again: a delivery that
// ends on another instance tells it nothing.
const InFlightRecheck = 100 * time.Millisecond

// Room returns how many jobs a claim may take with reserved jobs of its
// topic reserved: Max, or less under InFlightMax; never below 0.
func (p *ClaimJobsParams) Room(reserved int) int {
	if p.InFlightMax <= 0 {
		return p.Max
	}
	return max(min(p.Max, p.InFlightMax-reserved), 0)
}

// AckJobParams are the arguments of Store.AckJob and Engine.Ack.
type AckJobParams struct {
	ID    string
	Lease string
}

// AckJobsParams are the arguments of Store.AckJobs and Engine.AckBatch.
type AckJobsParams struct {
	// Acks in the order of the results.
	Acks []AckJobParams
}

// AckResult is the outcome of one ack of Store.AckJobs.
type AckResult struct {
	// Settled is what the ack settled; the zero value when Err is set.
	Settled SettleResult
	// Err is the ack's own error: ErrNotFound, ErrLeaseLost.
	Err error
}

// RetryJobParams are the arguments of Store.RetryJob.
type RetryJobParams struct {
	ID    string
	Lease string
	// RunAt is when to deliver again.
	RunAt time.Time
	// Error is why the attempt failed.
	Error string
	// Unsent says the delivery never reached its destination (refused
	// before it was sent, or a claim whose answer was never written): the
	// lease ends without spending an attempt, Attempt goes back down by
	// one and the attempt ends OutcomeReleased in History (Job.Release).
	Unsent bool
}

// BuryJobParams are the arguments of Store.BuryJob.
type BuryJobParams struct {
	ID    string
	Lease string
	// Error is why the job gave up.
	Error string
}

// SettleResult is what a settling call (Store.AckJob, RetryJob or BuryJob)
// reports of the job it settled: what a decorator needs to label the end of
// an attempt, so that it keeps no state of its own. It is the zero value
// when the call fails.
//
// It is a few fields rather than the whole job because every store has
// them at hand when it settles, at no cost: memstore and natsstore hold the
// job, and redisstore's lease script has already read the topic and attempt
// to check the lease, while the whole job would cost it the body's read and
// transfer on every ack, a hot path.
type SettleResult struct {
	// Topic is the job's topic.
	Topic string
	// Attempt is the attempt that ended (the job's Attempt, unchanged by
	// the call).
	Attempt int
	// State is the job's state after the call: done (ack), scheduled or
	// ready (retry, by its new run_at), dead (bury).
	State State
}

// TouchJobParams are the arguments of Store.TouchJob and Engine.Touch.
type TouchJobParams struct {
	ID    string
	Lease string
}

// ListDeadJobsParams are the arguments of Store.ListDeadJobs and
// Engine.ListDead (which also bounds Limit by DeadLimitMax).
type ListDeadJobsParams struct {
	Topic string
	// Limit bounds the answer, at least 1.
	Limit int
	// Since, when set, leaves out the jobs that died before it (their
	// UpdatedAt), so that a reader can follow the deaths as they come.
	Since time.Time
}

// TopicChecker is a capability of a store that cannot honour every
// setting of a topic: CheckTopic refuses a configuration it would not
// apply (a *FieldError naming the field and the backend), so that the
// topic is refused when it is set rather than ignored when jobs are
// claimed. A store without it honours every setting.
type TopicChecker interface {
	CheckTopic(t *Topic) error
}

// CheckTopicOn asks store, or the store a decorator of it wraps, to check
// t (TopicChecker); nil when it has no such check.
func CheckTopicOn(store Store, t *Topic) error {
	if c, ok := capability[TopicChecker](store); ok {
		return c.CheckTopic(t)
	}
	return nil
}
