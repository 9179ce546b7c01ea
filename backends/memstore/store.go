package memstore

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq/core"
)

// RetentionDefault is how long finished jobs stay queryable unless
// Config.Retention says otherwise.
const RetentionDefault = 72 * time.Hour

// Config configures a Store.
type Config struct {
	// Clock is where the store takes time from: run_at, leases, retention.
	//
	// Defaults to the real clock.
	Clock core.Clock
	// Retention is how long finished jobs (done, cancelled) stay queryable
	// before they are dropped.
	//
	// Defaults to RetentionDefault (72h).
	Retention time.Duration
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c Config) WithDefaults() Config {
	if c.Clock == nil {
		c.Clock = core.RealClock()
	}
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	return c
}

// Store is an in-memory core.Store. It is safe for concurrent use; the zero
// value is not usable, call New.
type Store struct {
	clock     core.Clock
	retention time.Duration

	mu       sync.Mutex
	closed   bool
	seq      uint64 // orders entries that enter a queue at the same key
	jobs     map[string]*entry
	records  map[string]map[string]*core.Record // kind -> name -> record
	revision uint64                             // the last record revision given
	topics   map[string]*topic
	rates    core.Buckets
	// keyRates holds each topic's rate per key (keys.go), by name: it
	// outlives a topic dropped while it holds nothing, whose keys' recent
	// deliveries still count.
	keyRates map[string]*core.KeyRates
	finished list.List // *entry, done or cancelled, in order of finishing
	notify   core.Notifier
	log      finishedLog
}

var (
	_ core.Store        = (*Store)(nil)
	_ core.ClaimSource  = (*Store)(nil)
	_ core.BodyRewriter = (*Store)(nil)
)

// New returns an empty store.
func New(cfg Config) *Store {
	cfg = cfg.WithDefaults()
	return &Store{
		clock:     cfg.Clock,
		retention: cfg.Retention,
		jobs:      make(map[string]*entry),
		records:   make(map[string]map[string]*core.Record),
		topics:    make(map[string]*topic),
		keyRates:  make(map[string]*core.KeyRates),
	}
}

// entry is a stored job and where it sits. Its job's State says which
// structure of its topic holds it: scheduled, ready or reserved for the
// queues, dead for the topic's dead list, done or cancelled for the store's
// finished list.
type entry struct {
	job   *core.Job
	topic *topic
	key   int64         // queue key, Unix ns: run_at, or lease expiry while reserved
	seq   uint64        // queue tie-break: order of entering the queue
	index int           // position in its queue, -1 when in none
	elem  *list.Element // in the dead or finished list
	// parked says a ready entry is in its topic's parked queue of its key
	// rather than in ready (keys.go).
	parked bool
}

// topic holds one topic's jobs and pause.
type topic struct {
	name      string
	paused    bool                           // claims take nothing (SetTopicPaused)
	jobs      int                            // jobs of the topic in the store, finished ones included
	done      int                            // of which done, in the store's finished list
	cancelled int                            // of which cancelled, in the store's finished list
	scheduled queue                          // by run_at
	ready     queue                          // by run_at
	reserved  queue                          // by lease expiry
	dead      list.List                      // *entry, oldest death first
	keys      map[string]map[*entry]struct{} // entries by business key
	// Key concurrency (keys.go): held counts the reserved entries of each
	// business key; parked holds the ready entries a claim passed over
	// because their key had its limit reserved, a queue per key in claim
	// order (parkedN in all), which parkedUnder, the lowest limit they
	// were parked under, lets a claim with a higher one take back.
	held        map[string]int
	parked      map[string]*keyQueue
	parkedN     int
	parkedUnder int
	// Fair takes (keys.go): fair says the topic's ready entries are all
	// parked in their keys' queues, ring holding the *keyQueue of each key
	// with one to take, in turn; ringLimit is the key limit of the last
	// fair take, which says which keys are out of the ring at their limit.
	fair      bool
	ring      list.List
	ringLimit int
	// rates is the topic's rate per key (keys.go): its buckets, and the
	// keys whose parked entries wait for a token.
	rates *core.KeyRates
	// told is the earliest due time (queue key) the last empty take
	// answered: a change that makes one earlier notifies.
	told int64
}

func (s *Store) now() time.Time { return s.clock.Now().UTC() }

// PutJobs implements core.Store. Each job is stored or refused on its own.
// Errors: ErrClosed.
func (s *Store) PutJobs(_ context.Context, params *core.PutJobsParams) ([]core.PutResult, error) {
	if params == nil {
		return nil, core.Invalid("", "memstore: put jobs: no params")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	now := s.now()
	s.prune(now)
	results := make([]core.PutResult, len(params.Jobs))
	touched := make(map[*topic]struct{})
	for i, j := range params.Jobs {
		results[i] = s.put(j, params.Replace && !params.IfAbsent, params.IfAbsent, now, touched)
	}
	for tp := range touched {
		s.changed(tp)
	}
	return results, nil
}

// put stores a job as PutJobs does, with replace or (absent) refusing any
// kept job of its id. The caller holds mu.
func (s *Store) put(j *core.Job, replace, absent bool, now time.Time, touched map[*topic]struct{}) core.PutResult {
	createdAt := now
	var res core.PutResult
	var old *core.Job
	if e, ok := s.jobs[j.ID]; ok {
		s.promote(e.topic, now)
		switch st := e.job.State; {
		case absent:
			return core.PutResult{Err: core.ExistsConflict(j.ID, e.job.Clone())}
		case st.Finished():
		case !replace:
			return core.PutResult{Err: core.ExistsConflict(j.ID, e.job.Clone())}
		case st == core.StateReserved:
			return core.PutResult{Err: core.ReservedConflict(j.ID, e.job.Clone())}
		default:
			res.Replaced = true
			createdAt, old = e.job.CreatedAt, e.job
		}
		s.unlink(e)
		s.remove(e)
		touched[e.topic] = struct{}{}
	}
	job := j.Clone()
	job.Reset(createdAt, now)
	if old != nil {
		job.Replaces(old)
	}
	e := s.add(job)
	s.enqueue(e, now)
	touched[e.topic] = struct{}{}
	return res
}

// add files job as a new, unlinked entry of its topic, found by its id and
// key.
func (s *Store) add(job *core.Job) *entry {
	tp := s.topicFor(job.Topic)
	e := &entry{job: job, topic: tp, index: -1}
	tp.jobs++
	s.jobs[job.ID] = e
	if job.Key != "" {
		if tp.keys == nil {
			tp.keys = make(map[string]map[*entry]struct{})
		}
		set := tp.keys[job.Key]
		if set == nil {
			set = make(map[*entry]struct{})
			tp.keys[job.Key] = set
		}
		set[e] = struct{}{}
	}
	return e
}

// remove forgets an unlinked entry: the opposite of add.
func (s *Store) remove(e *entry) {
	tp := e.topic
	tp.jobs--
	delete(s.jobs, e.job.ID)
	if set := tp.keys[e.job.Key]; set != nil {
		delete(set, e)
		if len(set) == 0 {
			delete(tp.keys, e.job.Key)
		}
	}
}

// GetJob implements core.Store. Errors: ErrNotFound, ErrClosed.
func (s *Store) GetJob(_ context.Context, id string) (*core.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, _, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	s.changed(e.topic)
	return e.job.Clone(), nil
}

// RewriteBody implements core.BodyRewriter. Errors: ErrNotFound,
// ErrConflict, ErrClosed.
func (s *Store) RewriteBody(_ context.Context, params *core.RewriteBodyParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, _, err := s.lookup(params.ID)
	if err != nil {
		return err
	}
	s.changed(e.topic) // of the promotion lookup made
	if !bytes.Equal(e.job.Body, params.Old) {
		return core.BodyChangedConflict(params.ID)
	}
	e.job.Body = bytes.Clone(params.Body)
	return nil
}

// CancelJob implements core.Store. Not idempotent: a second cancel gets
// ErrNotFound. Errors: ErrNotFound (unknown or finished),
// *core.ConflictError (ErrConflict) while reserved without
// params.Running, ErrClosed.
func (s *Store) CancelJob(_ context.Context, params *core.CancelJobParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := params.ID
	e, now, err := s.lookup(id)
	if err != nil {
		return err
	}
	defer s.changed(e.topic)
	reserved := e.job.State == core.StateReserved
	switch {
	case e.job.State.Finished():
		return fmt.Errorf("memstore: cancel %q: job is %s: %w", id, e.job.State, core.ErrNotFound)
	case reserved && !params.Running:
		return core.ReservedConflict(id, e.job.Clone())
	}
	s.unlink(e)
	s.finish(e, core.StateCancelled, now)
	if reserved {
		s.notify.Freed(e.topic.name)
	}
	return nil
}

// ClaimJobs implements core.Store: core.Claim over TakeJobs. Errors:
// ErrInvalidArgument when params.Max < 1, ErrClosed (also for a claim
// waiting when the store closes).
func (s *Store) ClaimJobs(ctx context.Context, params *core.ClaimJobsParams) ([]*core.Job, error) {
	return core.Claim(ctx, s, s.clock, params)
}

// TakeJobs implements core.ClaimSource. Errors: ErrClosed.
func (s *Store) TakeJobs(_ context.Context, params *core.ClaimJobsParams) (core.Taken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return core.Taken{}, core.ErrClosed
	}
	now := s.now()
	s.prune(now)
	tp := s.topicFor(params.Topic)
	defer s.maybeDrop(tp)
	s.promote(tp, now)
	room := 0
	if !tp.paused {
		room = params.Room(tp.reserved.Len())
	}
	if tp.rates.Set(params.KeyRate) {
		tp.unparkAll() // to be looked at under the new rate
	}
	var jobs []*core.Job
	if params.Fair {
		jobs = s.takeFair(tp, room, params, now)
	} else {
		jobs = s.take(tp, room, params, now)
	}
	if len(jobs) > 0 {
		return core.Taken{Jobs: jobs}, nil
	}
	t := core.Taken{Jobs: jobs, Full: !tp.paused && room == 0}
	if tp.told = tp.nextDue(); tp.told != math.MaxInt64 {
		t.Next = time.Unix(0, tp.told)
	}
	return t, nil
}

// ClaimNotifier implements core.ClaimSource.
func (s *Store) ClaimNotifier() *core.Notifier { return &s.notify }

// take reserves up to max ready jobs of tp for claim p (its Via, Instance
// and Consumer), at most p.KeyConcurrency of a key reserved at once when it
// is set, and each within its key's p.KeyRate: a job whose key has that
// many, or no token, is parked instead, costing no later take anything.
func (s *Store) take(tp *topic, max int, p *core.ClaimJobsParams, now time.Time) []*core.Job {
	keyLimit := p.KeyConcurrency
	jobs := []*core.Job{}
	if tp.fair || tp.parkedUnder > 0 && (keyLimit == 0 || keyLimit > tp.parkedUnder) {
		tp.unparkAll()
	}
	tp.refill(now)
	for len(jobs) < max && tp.ready.Len() > 0 {
		e := tp.ready.pop()
		if tp.atLimit(e.job.Key, keyLimit) {
			tp.park(e, keyLimit)
			continue
		}
		if !tp.token(e, now) {
			continue
		}
		jobs = append(jobs, s.reserve(tp, e, p, now))
	}
	return jobs
}

// reserve reserves ready entry e of tp, out of every queue, for claim p
// (its Via, Instance and Consumer), and returns a copy of its job.
func (s *Store) reserve(tp *topic, e *entry, p *core.ClaimJobsParams, now time.Time) *core.Job {
	tp.hold(e)
	e.job.Reserve(rand.Text(), p, now)
	s.push(&tp.reserved, e, e.job.LeaseExpiresAt)
	return e.job.Clone()
}

// AckJob implements core.Store. A second ack of the same lease gets
// ErrLeaseLost. Errors: ErrNotFound, ErrLeaseLost, ErrClosed.
func (s *Store) AckJob(_ context.Context, params *core.AckJobParams) (core.SettleResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ack(params)
}

// AckJobs implements core.Store: the acks under one hold of the lock.
// Errors: ErrClosed.
func (s *Store) AckJobs(_ context.Context, params *core.AckJobsParams) ([]core.AckResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	res := make([]core.AckResult, len(params.Acks))
	for i := range params.Acks {
		res[i].Settled, res[i].Err = s.ack(&params.Acks[i])
	}
	return res, nil
}

// ack settles one ack, under s.mu.
func (s *Store) ack(params *core.AckJobParams) (core.SettleResult, error) {
	e, now, err := s.leased(params.ID, params.Lease)
	if err != nil {
		return core.SettleResult{}, err
	}
	s.unlink(e)
	s.finish(e, core.StateDone, now)
	s.changed(e.topic)
	s.notify.Freed(e.topic.name)
	return e.job.Settled(), nil
}

// RetryJob implements core.Store. A zero params.RunAt means now. Errors:
// ErrNotFound, ErrLeaseLost, ErrClosed.
func (s *Store) RetryJob(_ context.Context, params *core.RetryJobParams) (core.SettleResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, now, err := s.leased(params.ID, params.Lease)
	if err != nil {
		return core.SettleResult{}, err
	}
	s.unlink(e)
	e.job.RetryFor(params, now)
	s.enqueue(e, now)
	s.changed(e.topic)
	s.notify.Freed(e.topic.name)
	return e.job.Settled(), nil
}

// BuryJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost, ErrClosed.
func (s *Store) BuryJob(_ context.Context, params *core.BuryJobParams) (core.SettleResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, now, err := s.leased(params.ID, params.Lease)
	if err != nil {
		return core.SettleResult{}, err
	}
	s.unlink(e)
	e.job.Bury(params.Error, now)
	s.kill(e)
	s.recordFinish(e.job, now)
	s.changed(e.topic)
	s.notify.Freed(e.topic.name)
	return e.job.Settled(), nil
}

// TouchJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost,
// ErrClosed.
func (s *Store) TouchJob(_ context.Context, params *core.TouchJobParams) (*core.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, now, err := s.leased(params.ID, params.Lease)
	if err != nil {
		return nil, err
	}
	e.job.LeaseExpiresAt = now.Add(e.job.TTR)
	e.topic.reserved.fix(e, e.job.LeaseExpiresAt)
	s.changed(e.topic)
	return e.job.Clone(), nil
}

// ExpireJob implements core.Store. Errors: ErrNotFound, ErrConflict,
// ErrClosed.
func (s *Store) ExpireJob(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, now, err := s.lookup(id)
	if err != nil {
		return err
	}
	defer s.changed(e.topic)
	switch {
	case e.job.State.Finished():
		return fmt.Errorf("memstore: expire %q: job is %s: %w", id, e.job.State, core.ErrNotFound)
	case !e.job.CanExpire(now):
		return core.NotExpiredConflict(id, e.job.Clone())
	}
	s.unlink(e)
	e.job.Bury(core.JobExpired, now)
	s.kill(e)
	s.recordFinish(e.job, now)
	return nil
}

// RequeueJob implements core.Store: the dead job's run_at becomes now.
// Errors: ErrNotFound, *core.ConflictError (ErrConflict) when not dead,
// ErrClosed.
func (s *Store) RequeueJob(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, now, err := s.lookup(id)
	if err != nil {
		return err
	}
	defer s.changed(e.topic)
	if e.job.State != core.StateDead {
		return core.NotDeadConflict(id, e.job.Clone(), e.job.State)
	}
	s.unlink(e)
	e.job.Requeue(now)
	s.enqueue(e, now)
	return nil
}

// ListDeadJobs implements core.Store. A topic without dead jobs, known or
// not, gives an empty slice. Errors: ErrInvalidArgument when params.Limit <
// 1, ErrClosed.
func (s *Store) ListDeadJobs(_ context.Context, params *core.ListDeadJobsParams) ([]*core.Job, error) {
	if params == nil || params.Limit < 1 {
		return nil, core.Invalid("limit", "limit must be at least 1")
	}
	return s.listTopic(params.Topic, func(tp *topic) []*core.Job {
		jobs := []*core.Job{}
		for el := tp.dead.Front(); el != nil && len(jobs) < params.Limit; el = el.Next() {
			if j := el.Value.(*entry).job; !j.UpdatedAt.Before(params.Since) {
				jobs = append(jobs, j.Clone())
			}
		}
		return jobs
	})
}

// FindJobs implements core.Store. Errors: ErrInvalidArgument, ErrClosed.
func (s *Store) FindJobs(_ context.Context, params *core.FindJobsParams) ([]*core.Job, error) {
	if err := core.CheckFind(params); err != nil {
		return nil, err
	}
	return s.listTopic(params.Topic, func(tp *topic) []*core.Job {
		jobs := []*core.Job{}
		for e := range tp.keys[params.Key] {
			if e.job.ID > params.After {
				jobs = append(jobs, e.job)
			}
		}
		slices.SortFunc(jobs, func(a, b *core.Job) int { return strings.Compare(a.ID, b.ID) })
		jobs = jobs[:min(len(jobs), params.Limit)]
		for i, j := range jobs {
			jobs[i] = j.Clone()
		}
		return jobs
	})
}

// listTopic returns what list collects of topic name's jobs, as of now,
// under the lock: an empty slice for a topic the store does not know.
func (s *Store) listTopic(name string, list func(tp *topic) []*core.Job) ([]*core.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	now := s.now()
	s.prune(now)
	tp := s.topics[name]
	if tp == nil {
		return []*core.Job{}, nil
	}
	s.promote(tp, now)
	defer s.changed(tp)
	return list(tp), nil
}

// TakeRate implements core.Store. Errors: ErrInvalidArgument, ErrClosed.
func (s *Store) TakeRate(_ context.Context, params *core.TakeRateParams) (core.TakeRateResult, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return core.TakeRateResult{}, core.ErrClosed
	}
	return s.rates.Take(params, s.now())
}

// GetTopicState implements core.Store. Errors: ErrClosed.
func (s *Store) GetTopicState(_ context.Context, name string) (core.TopicState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return core.TopicState{}, core.ErrClosed
	}
	now := s.now()
	s.prune(now)
	tp := s.topics[name]
	if tp == nil {
		return core.TopicState{Name: name}, nil
	}
	s.promote(tp, now)
	s.changed(tp)
	return tp.state(), nil
}

// ListTopicStates implements core.Store. Errors: ErrClosed.
func (s *Store) ListTopicStates(_ context.Context) ([]core.TopicState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	now := s.now()
	s.prune(now)
	states := []core.TopicState{}
	for _, tp := range s.topics {
		if !tp.visible() {
			continue
		}
		s.promote(tp, now)
		s.changed(tp)
		states = append(states, tp.state())
	}
	slices.SortFunc(states, func(a, b core.TopicState) int { return strings.Compare(a.Name, b.Name) })
	return states, nil
}

// SetTopicPaused implements core.Store. Errors: ErrClosed.
func (s *Store) SetTopicPaused(_ context.Context, name string, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return core.ErrClosed
	}
	tp := s.topicFor(name)
	tp.paused = paused
	now := s.now()
	s.promote(tp, now)
	s.changed(tp)
	return nil
}

// Ping implements core.Store. Errors: ErrClosed.
func (s *Store) Ping(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return core.ErrClosed
	}
	return nil
}

// Close implements core.Store: claims waiting return ErrClosed, and every
// later call too. Jobs are dropped. Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.notify.Close()
	return nil
}

// lookup returns the entry of id with its topic promoted, and now.
func (s *Store) lookup(id string) (*entry, time.Time, error) {
	if s.closed {
		return nil, time.Time{}, core.ErrClosed
	}
	now := s.now()
	s.prune(now)
	e, ok := s.jobs[id]
	if !ok {
		return nil, now, fmt.Errorf("memstore: job %q: %w", id, core.ErrNotFound)
	}
	s.promote(e.topic, now)
	return e, now, nil
}

// leased returns the entry of id if lease is its current, unexpired lease.
func (s *Store) leased(id, lease string) (*entry, time.Time, error) {
	e, now, err := s.lookup(id)
	if err != nil {
		return nil, now, err
	}
	if e.job.State != core.StateReserved || lease == "" || e.job.Lease != lease {
		s.changed(e.topic)
		return nil, now, fmt.Errorf("memstore: job %q: %w", id, core.ErrLeaseLost)
	}
	return e, now, nil
}

// topicFor returns the topic named name, made if needed.
func (s *Store) topicFor(name string) *topic {
	tp := s.topics[name]
	if tp == nil {
		tp = &topic{
			name:      name,
			scheduled: queue{},
			ready:     queue{byPriority: true},
			reserved:  queue{},
			told:      math.MaxInt64,
			rates:     s.keyRates[name],
		}
		if tp.rates == nil {
			tp.rates = &core.KeyRates{}
			s.keyRates[name] = tp.rates
		}
		s.topics[name] = tp
	}
	return tp
}

// enqueue puts an unlinked entry in its topic's scheduled or ready queue by
// its run_at.
func (s *Store) enqueue(e *entry, now time.Time) {
	if e.job.RunAt.After(now) {
		e.job.State = core.StateScheduled
		s.push(&e.topic.scheduled, e, e.job.RunAt)
		return
	}
	e.job.State = core.StateReady
	s.push(&e.topic.ready, e, e.job.RunAt)
}

func (s *Store) push(q *queue, e *entry, at time.Time) {
	s.seq++
	e.seq = s.seq
	q.add(e, at)
}

// unlink takes an entry out of the structure its state puts it in.
func (s *Store) unlink(e *entry) {
	switch e.job.State {
	case core.StateScheduled:
		e.topic.scheduled.remove(e)
	case core.StateReady:
		if e.parked {
			e.topic.unpark(e)
		} else {
			e.topic.ready.remove(e)
		}
	case core.StateReserved:
		e.topic.reserved.remove(e)
		e.topic.release(e)
	case core.StateDead:
		e.topic.dead.Remove(e.elem)
		e.elem = nil
	case core.StateDone, core.StateCancelled:
		s.finished.Remove(e.elem)
		e.elem = nil
		e.topic.countFinished(e.job.State, -1)
	}
}

// finish makes an unlinked entry done or cancelled, filed in the finished
// list by when it stops being kept (keptUntil): from the back, where a job
// with the retention of those finished before it goes at once.
func (s *Store) finish(e *entry, state core.State, now time.Time) {
	e.job.Finish(state, now)
	until := s.keptUntil(e.job)
	mark := s.finished.Back()
	for mark != nil && s.keptUntil(mark.Value.(*entry).job).After(until) {
		mark = mark.Prev()
	}
	if mark == nil {
		e.elem = s.finished.PushFront(e)
	} else {
		e.elem = s.finished.InsertAfter(e, mark)
	}
	e.topic.countFinished(state, 1)
	s.recordFinish(e.job, now)
}

// kill files an unlinked entry that went dead (at its UpdatedAt) in its
// topic's dead list, which it keeps in order of death.
func (s *Store) kill(e *entry) {
	at := e.job.UpdatedAt
	dead := &e.topic.dead
	mark := dead.Back()
	for mark != nil && mark.Value.(*entry).job.UpdatedAt.After(at) {
		mark = mark.Prev()
	}
	if mark == nil {
		e.elem = dead.PushFront(e)
	} else {
		e.elem = dead.InsertAfter(e, mark)
	}
}

// promote moves tp's scheduled jobs whose run_at has come to ready, and
// handles the leases that expired: the job is due again, or dead when it
// used its last attempt.
func (s *Store) promote(tp *topic, now time.Time) {
	n := now.UnixNano()
	for tp.scheduled.Len() > 0 && tp.scheduled.peek().key <= n {
		e := tp.scheduled.pop()
		e.job.State = core.StateReady
		e.job.UpdatedAt = e.job.RunAt
		s.push(&tp.ready, e, e.job.RunAt)
	}
	for tp.reserved.Len() > 0 && tp.reserved.peek().key <= n {
		e := tp.reserved.pop()
		tp.release(e)
		e.job.ExpireLease()
		if e.job.State == core.StateDead {
			s.kill(e)
			s.recordFinish(e.job, now)
			continue
		}
		s.push(&tp.ready, e, e.job.RunAt)
	}
}

// changed runs after tp changed: it notifies the claims of tp when jobs
// are ready to take, or the next due time is earlier than the last empty
// take answered, and drops tp once it holds nothing.
func (s *Store) changed(tp *topic) {
	if (tp.ready.Len() > 0 || tp.ring.Len() > 0) && !tp.paused || tp.nextDue() < tp.told {
		tp.told = math.MinInt64 // until a take answers again
		s.notify.Notify(tp.name)
	}
	s.maybeDrop(tp)
}

// nextDue returns the earliest run_at of tp's scheduled jobs, lease
// expiry of its reserved ones or token of a key whose jobs wait for one
// (Unix ns), math.MaxInt64 for none.
func (tp *topic) nextDue() int64 {
	next := int64(math.MaxInt64)
	for _, q := range []*queue{&tp.scheduled, &tp.reserved} {
		if q.Len() > 0 {
			next = min(next, q.peek().key)
		}
	}
	if at := tp.rates.Next(); !at.IsZero() {
		next = min(next, at.UnixNano())
	}
	return next
}

// keptUntil is when finished job j stops being kept: its own Retention
// after it finished, or the store's.
func (s *Store) keptUntil(j *core.Job) time.Time {
	return j.UpdatedAt.Add(cmp.Or(j.Retention, s.retention))
}

// prune drops finished jobs past their retention, and entries of the
// record of finished jobs past the store's.
func (s *Store) prune(now time.Time) {
	s.pruneFinished(now)
	for el := s.finished.Front(); el != nil; el = s.finished.Front() {
		e := el.Value.(*entry)
		if now.Before(s.keptUntil(e.job)) {
			return
		}
		s.finished.Remove(el)
		e.elem = nil
		e.topic.countFinished(e.job.State, -1)
		s.remove(e)
		s.maybeDrop(e.topic)
	}
}

// maybeDrop forgets a topic that has no jobs or pause; what its waiting
// claims watch is the notifier's, by name.
func (s *Store) maybeDrop(tp *topic) {
	if !tp.visible() && s.topics[tp.name] == tp {
		delete(s.topics, tp.name)
	}
}

func (tp *topic) visible() bool { return tp.jobs > 0 || tp.paused }

// state returns tp's pause and counts.
func (tp *topic) state() core.TopicState {
	return core.TopicState{Name: tp.name, Paused: tp.paused, Counts: core.Counts{
		Scheduled: int64(tp.scheduled.Len()),
		Ready:     int64(tp.ready.Len() + tp.parkedN),
		Reserved:  int64(tp.reserved.Len()),
		Dead:      int64(tp.dead.Len()),
		Done:      int64(tp.done),
		Cancelled: int64(tp.cancelled),
	}}
}

// countFinished moves tp's count of finished jobs in state (done or
// cancelled) by n. The counts follow the finished list: a job counts from
// when it finishes until prune drops it or a put reuses its id.
func (tp *topic) countFinished(state core.State, n int) {
	switch state {
	case core.StateDone:
		tp.done += n
	case core.StateCancelled:
		tp.cancelled += n
	}
}
