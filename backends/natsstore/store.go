package natsstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// Store defaults.
const (
	// PrefixDefault is the subject prefix unless Config.Prefix says
	// otherwise.
	PrefixDefault = "delayq"
	// LeadDefault is how long before run_at a schedule fires by default.
	// NATS fires schedules 0-250 ms late (up to ~360 ms at 10 000 due
	// jobs/s), so a job is fetched this early and held until its run_at.
	LeadDefault = 500 * time.Millisecond
	// RetentionDefault is how long finished jobs stay queryable by default.
	RetentionDefault = 72 * time.Hour
	// AckWaitDefault is how long a fetched wake-up stays with one store
	// instance before NATS hands it to another, should the instance die.
	// A fetcher holding wake-ups longer keeps them with in-progress acks
	// every AckWait/2.
	AckWaitDefault = 10 * time.Second
)

// Config configures a Store.
type Config struct {
	// Conn is the NATS connection. Required; Close does not close it.
	Conn *nats.Conn
	// Prefix is the first token of every subject and, upper-cased, of the
	// stream and bucket names: one token of [A-Za-z0-9_-].
	//
	// Defaults to PrefixDefault ("delayq").
	Prefix string
	// Replicas is the stream replication factor in a cluster.
	//
	// Defaults to 1.
	Replicas int
	// Lead is how long before run_at a job's schedule fires; the store
	// holds the job until its run_at. It must exceed the server's schedule
	// lateness.
	//
	// Defaults to LeadDefault (500ms).
	Lead time.Duration
	// Retention is how long finished jobs (done, cancelled) stay
	// queryable; they expire by a per-message TTL.
	//
	// Defaults to RetentionDefault (72h).
	Retention time.Duration
	// AckWait is how long a fetched wake-up stays with one store instance
	// before another gets it, should the instance die without releasing
	// it (a kill -9): the jobs its fetcher held are delivered again after
	// that long. A fetcher holding a wake-up longer sends an in-progress
	// ack every AckWait/2.
	//
	// Defaults to AckWaitDefault (10s).
	AckWait time.Duration
	// Clock is where the store takes time from: run_at, leases, retention,
	// the waits of claims. Schedules themselves run on the server's clock,
	// and so do the waits that pace the store's dealings with the server
	// (see "Clocks" in the package doc).
	//
	// Defaults to the real clock.
	Clock core.Clock
	// Logger receives the store's warnings.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c Config) WithDefaults() Config {
	c.Prefix = cmp.Or(c.Prefix, PrefixDefault)
	c.Replicas = cmp.Or(c.Replicas, 1)
	c.Lead = cmp.Or(c.Lead, LeadDefault)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.AckWait = cmp.Or(c.AckWait, AckWaitDefault)
	if c.Clock == nil {
		c.Clock = core.RealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks the configuration and names the bad field.
func (c Config) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("natsstore: Conn is required")
	case core.ValidateID(c.Prefix) != nil:
		return fmt.Errorf("natsstore: Prefix %q must be one token of [A-Za-z0-9_-]", c.Prefix)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("natsstore: Replicas %d must be between 1 and 5", c.Replicas)
	case c.Lead < 0 || c.Lead > 10*time.Second:
		return fmt.Errorf("natsstore: Lead %s must be between 0 and 10s", c.Lead)
	case c.Retention < time.Second:
		return fmt.Errorf("natsstore: Retention %s must be at least 1s", c.Retention)
	case c.AckWait < time.Second:
		return fmt.Errorf("natsstore: AckWait %s must be at least 1s", c.AckWait)
	}
	return nil
}

// Store is a core.Store over NATS JetStream. It is safe for concurrent use,
// and several instances (in one process or many) may share one prefix. Create
// it with New.
type Store struct {
	cfg    Config
	names  names
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	clock  core.Clock
	log    *slog.Logger

	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed by Close
	queues map[string]*topicQueue
	seen   sync.Map // topic name -> struct{}: "seen" record written
	wg     sync.WaitGroup
	house  *puller // fired sched and lease schedules

	prefetchSem chan struct{} // bounds reads ahead of due times
	bg          background    // purges after the answer
	reserved    recordCache   // records of the jobs this instance reserved
}

// maxCached bounds the records recordCache keeps, and maxCachedBody the
// body of one: a job past it is read again when acknowledged.
const (
	maxCached     = 100_000
	maxCachedBody = 16 << 10
)

// recordCache keeps the records of the jobs this instance's claims
// reserved, so that the acknowledgement (or retry, bury, touch) of a job
// claimed here writes without reading its record first: one read and its
// decoding less per job. An entry is a guess, taken out by the first
// mutation of its job: the write's compare-and-set catches a record that
// changed since, and a refusal on a guess (a lease lost) is checked
// against the stored record, so the answers are those of the record.
type recordCache struct {
	mu sync.Mutex
	m  map[string]cachedRecord
}

type cachedRecord struct {
	j   *core.Job
	seq uint64
}

// put keeps the record of a job reserved at seq. When the cache is full it
// first drops the entries whose lease ran out (their jobs' claimers
// stopped answering), and skips j if that frees nothing.
func (c *recordCache) put(j *core.Job, seq uint64, now time.Time) {
	if len(j.Body) > maxCachedBody {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedRecord)
	}
	if len(c.m) >= maxCached {
		for id, e := range c.m {
			if !e.j.LeaseExpiresAt.After(now) {
				delete(c.m, id)
			}
		}
		if len(c.m) >= maxCached {
			return
		}
	}
	c.m[j.ID] = cachedRecord{j: j, seq: seq}
}

// take removes and returns the record kept for id, nil if none.
func (c *recordCache) take(id string) (*core.Job, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok {
		return nil, 0
	}
	delete(c.m, id)
	return e.j, e.seq
}

// houseWorkers bounds the housekeeping messages handled at once.
const houseWorkers = 128

// maxBackground bounds the purges running after their mutation answered;
// past it a mutation purges before it answers, which slows the callers
// down to what the server keeps up with.
const maxBackground = 4096

// background tracks the purges of stale wake-ups that run after their
// mutation answered. The record is the truth and a stale wake-up is
// reconciled by whoever gets it, so a mutation need not wait for its purge
// (a round trip, or a quarter of a claim's); what reads wake-ups rather
// than records, counts and dead listings, waits for the purges running
// when it starts (awaitPurges), so that an instance reads its own writes.
type background struct {
	mu      sync.Mutex
	next    uint64
	running map[uint64]chan struct{} // closed when done
	last    map[string]chan struct{} // job id -> its latest purge's done
	ctx     context.Context          // cancelled when Close gives up waiting
	cancel  context.CancelFunc
	before  func(subject string) // tests: called by each purge before it purges
}

var _ core.Store = (*Store)(nil)

// New connects a store to JetStream, creating or updating its stream, topic
// bucket and housekeeping consumer (idempotent: every instance of a prefix
// may call it), and starts handling lease expiries. Errors: an invalid
// configuration, or ErrUnavailable when JetStream does not answer or refuses
// the stream.
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn, jetstream.WithPublishAsyncMaxPending(16384))
	if err != nil {
		return nil, fmt.Errorf("natsstore: %w: %w", core.ErrUnavailable, err)
	}
	s := &Store{
		cfg:    cfg,
		names:  newNames(cfg.Prefix),
		nc:     cfg.Conn,
		js:     js,
		clock:  cfg.Clock,
		log:    cfg.Logger,
		done:   make(chan struct{}),
		queues: make(map[string]*topicQueue),

		prefetchSem: make(chan struct{}, 64),
	}
	s.bg.running = make(map[uint64]chan struct{})
	s.bg.last = make(map[string]chan struct{})
	s.bg.ctx, s.bg.cancel = context.WithCancel(context.Background())
	s.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              s.names.stream,
		Description:       "delayq job records and wake-ups",
		Subjects:          s.names.streamSubjects(),
		Retention:         jetstream.WorkQueuePolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          cfg.Replicas,
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardOld,
		Duplicates:        time.Second,
		AllowDirect:       true,
		AllowMsgTTL:       true,
		AllowMsgSchedules: true,
	})
	if err != nil {
		return nil, fmt.Errorf("natsstore: create stream %s: %w: %w", s.names.stream, core.ErrUnavailable, err)
	}
	s.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      s.names.topics,
		Description: "delayq topic configurations",
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		History:     1,
	})
	if err != nil {
		return nil, fmt.Errorf("natsstore: create bucket %s: %w: %w", s.names.topics, core.ErrUnavailable, err)
	}
	var houseCfgs []jetstream.ConsumerConfig
	for _, k := range houseKinds {
		houseCfgs = append(houseCfgs, jetstream.ConsumerConfig{
			Durable:       s.names.houseConsumer(k),
			Description:   "delayq housekeeping: " + k + " wake-ups",
			FilterSubject: s.names.prefix + "." + k + ".>",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       cfg.AckWait,
			MaxAckPending: 10000,
			MaxDeliver:    -1,
		})
	}
	cons, err := createConsumers(ctx, s.stream, houseCfgs)
	if err != nil {
		return nil, fmt.Errorf("natsstore: create consumer: %w: %w", core.ErrUnavailable, err)
	}
	// Each handling waits on two round trips (read the record, publish the
	// wake-ups): 16 workers held the housekeeping to about 5 000 fired
	// schedules a second, its backlog growing at 10 000 due jobs/s.
	s.house = newPuller(s, cons, s.handleHouse, houseWorkers)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.house.run()
	}()
	return s, nil
}

func (s *Store) now() time.Time { return s.clock.Now().UTC() }

func (s *Store) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// unavailable wraps an infrastructure error.
func unavailable(op string, err error) error {
	if errors.Is(err, core.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("natsstore: %s: %w: %w", op, core.ErrUnavailable, err)
}

// errCAS is a compare-and-set publish that lost: the record changed.
var errCAS = errors.New("natsstore: record changed")

// createConsumers creates or updates durable consumers. On a work-queue
// stream the server refuses a consumer whose filter overlaps another's, so
// where an earlier version's consumer still covers what a new one filters on
// (one consumer split in two), the old one must be updated first: a refused
// consumer is tried again after the others, up to one pass per consumer.
func createConsumers(ctx context.Context, stream jetstream.Stream, cfgs []jetstream.ConsumerConfig) ([]jetstream.Consumer, error) {
	out := make([]jetstream.Consumer, len(cfgs))
	var err error
	for range cfgs {
		err = nil
		for i, c := range cfgs {
			if out[i] != nil {
				continue
			}
			cons, e := stream.CreateOrUpdateConsumer(ctx, c)
			if e != nil {
				err = e
				continue
			}
			out[i] = cons
		}
		if err == nil {
			return out, nil
		}
	}
	return nil, err
}

// isWrongSeq reports whether err is JetStream's wrong-last-sequence answer.
func isWrongSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// load reads a job's record: the job and its stream sequence, or nil and 0
// when there is none.
func (s *Store) load(ctx context.Context, id string) (*core.Job, uint64, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.names.job(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, unavailable("read job", err)
	}
	j, err := decodeRecord(m.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("natsstore: job %q: bad record: %w", id, err)
	}
	return j, m.Sequence, nil
}

// recordMsg builds the compare-and-set publish of a job's record, valid only
// while the record's last sequence is expect (0: no record).
func (s *Store) recordMsg(j *core.Job, expect uint64) (*nats.Msg, error) {
	data, err := encodeRecord(j)
	if err != nil {
		return nil, fmt.Errorf("natsstore: encode job %q: %w", j.ID, err)
	}
	m := &nats.Msg{Subject: s.names.job(j.ID), Header: nats.Header{}, Data: data}
	m.Header.Set(hdrExpectLastSubjSeq, fmt.Sprint(expect))
	if j.State.Finished() {
		m.Header.Set(hdrTTL, s.cfg.Retention.String())
	}
	return m, nil
}

// save writes a job's record if its last sequence is still expect and
// returns the new sequence. Errors: errCAS, ErrUnavailable.
func (s *Store) save(ctx context.Context, j *core.Job, expect uint64) (uint64, error) {
	m, err := s.recordMsg(j, expect)
	if err != nil {
		return 0, err
	}
	ack, err := s.js.PublishMsg(ctx, m)
	if isWrongSeq(err) {
		return 0, errCAS
	}
	if err != nil {
		return 0, unavailable("write job", err)
	}
	return ack.Sequence, nil
}

// publish stores a wake-up and returns its sequence.
func (s *Store) publish(ctx context.Context, m *nats.Msg) (uint64, error) {
	ack, err := s.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, unavailable("publish wake-up", err)
	}
	return ack.Sequence, nil
}

// wakesFor returns the wake-ups that a job in its recorded state needs, in
// the order to publish them.
//
//   - scheduled or ready: a schedule on the sched subject firing Lead before
//     run_at into the lead subject; when run_at is that close, a schedule on
//     the soon subject firing at run_at into the ready subject, then its
//     plain twin on the near subject for the topic's fetcher; when run_at
//     has passed, the ready message itself;
//   - reserved: a schedule on the lease subject firing at the lease expiry
//     into the expire subject;
//   - dead: a marker on the dead subject;
//   - done or cancelled: a marker on the done or cancelled subject, for
//     counts, with a TTL of what is left of the job's retention, so that
//     it expires with the record; none when less than a second is left
//     (the least TTL NATS takes).
func (s *Store) wakesFor(j *core.Job, now time.Time, st stamp) []*nats.Msg {
	n := s.names
	switch j.State {
	case core.StateScheduled, core.StateReady:
		ready := n.wake(kindReady, j.Topic, j.ID)
		if at := j.RunAt.Add(-s.cfg.Lead); at.After(now) {
			return []*nats.Msg{scheduleMsg(n.wake(kindSched, j.Topic, j.ID), n.wake(kindLead, j.Topic, j.ID), at, j.RunAt, st)}
		}
		if j.RunAt.After(now) {
			return []*nats.Msg{
				scheduleMsg(n.wake(kindSoon, j.Topic, j.ID), ready, j.RunAt.Add(soonGrace), j.RunAt, st),
				wakeMsg(n.wake(kindNear, j.Topic, j.ID), j.RunAt, st),
			}
		}
		return []*nats.Msg{wakeMsg(ready, j.RunAt, st)}
	case core.StateReserved:
		expire := n.wake(kindExpire, j.Topic, j.ID)
		if j.LeaseExpiresAt.After(now) {
			return []*nats.Msg{scheduleMsg(n.wake(kindLease, j.Topic, j.ID), expire, j.LeaseExpiresAt, j.LeaseExpiresAt, st)}
		}
		return []*nats.Msg{wakeMsg(expire, j.LeaseExpiresAt, st)}
	case core.StateDead:
		return []*nats.Msg{wakeMsg(n.wake(kindDead, j.Topic, j.ID), j.UpdatedAt, st)}
	case core.StateDone, core.StateCancelled:
		if m := s.finishedMarker(j, now, st); m != nil {
			return []*nats.Msg{m}
		}
	}
	return nil
}

// finishedMarker returns the marker of a done or cancelled job, nil when
// less than a second of its retention is left. A marker published as the
// job finishes gets the record's TTL, Retention; one published again later
// (publishWakes) what is left of it, counted from the job's updated_at.
func (s *Store) finishedMarker(j *core.Job, now time.Time, st stamp) *nats.Msg {
	kind := kindDone
	if j.State == core.StateCancelled {
		kind = kindCancelled
	}
	ttl := min(s.cfg.Retention, j.UpdatedAt.Add(s.cfg.Retention).Sub(now))
	if ttl < time.Second {
		return nil
	}
	m := wakeMsg(s.names.marker(kind, j.Topic, j.ID), j.UpdatedAt, st)
	m.Header.Set(hdrTTL, ttl.String())
	return m
}

// publishAll stores wake-ups in order and returns their sequences. Several
// are pipelined and awaited together: one connection's publishes to one
// stream are stored in the order sent, and a caller that writes a record
// after them awaits them all first. On an error the sequences of those
// stored come with it.
func (s *Store) publishAll(ctx context.Context, msgs []*nats.Msg) ([]uint64, error) {
	if len(msgs) == 1 {
		seq, err := s.publish(ctx, msgs[0])
		if err != nil {
			return nil, err
		}
		return []uint64{seq}, nil
	}
	fs := make([]jetstream.PubAckFuture, 0, len(msgs))
	var err error
	for _, m := range msgs {
		f, e := s.js.PublishMsgAsync(m)
		if e != nil {
			err = unavailable("publish wake-up", e)
			break
		}
		fs = append(fs, f)
	}
	seqs := make([]uint64, 0, len(fs))
	for _, f := range fs {
		ack, e := await(ctx, f)
		if e != nil {
			if err == nil {
				err = unavailable("publish wake-up", e)
			}
			continue
		}
		seqs = append(seqs, ack.Sequence)
	}
	return seqs, err
}

// purge removes a job's wake-ups stored before sequence below. Every
// wake-up of a later state is stored after the record it replaces was read,
// so after that record's sequence: a purge below the sequence of this
// mutation's own wake-up (or of its record, for a finished job) removes only
// stale wake-ups.
//
// subject is the job's wakes filter, or one of its wake-up subjects.
func (s *Store) purge(ctx context.Context, subject string, below uint64) error {
	err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(below))
	if err != nil {
		return unavailable("purge wake-ups", err)
	}
	return nil
}

// write is the mutation protocol: store the wake-up of the new state, then
// compare-and-set the record against the sequence read, then purge the
// wake-ups that no longer apply, in the background (see background). A
// crash between the steps leaves a stale wake-up at worst, never a job
// without one. It returns errCAS when the record changed since it was
// read.
func (s *Store) write(ctx context.Context, j *core.Job, expect uint64, now time.Time) error {
	if j.State.Finished() {
		return s.writeFinished(ctx, j, expect, now)
	}
	seqs, err := s.publishAll(ctx, s.wakesFor(j, now, pendingAfter(expect)))
	if err != nil {
		return err
	}
	seq, err := s.save(ctx, j, expect)
	if errors.Is(err, errCAS) {
		s.undo(ctx, seqs, j.ID)
	}
	if err != nil {
		return err
	}
	below := seq
	if len(seqs) > 0 {
		below = slices.Min(seqs)
	}
	s.purgeLater(s.names.wakes(j.Topic, j.ID), j.ID, below)
	return nil
}

// writeFinished is write for a job that finishes (done, cancelled): its
// marker and its record are published together and awaited together, so
// that an acknowledgement or a cancel costs one round trip, as the record
// alone did before markers. One connection's publishes are stored in the
// order sent, so the marker is stored before the record all the same; a
// compare-and-set that loses deletes it. (A crash between the two leaves a
// marker that counts until it expires: the wake-up purges leave markers
// alone, see kindDone.) A marker refused while the record is written (a
// stream without the marker subjects, made by an earlier version) is
// published again after it, or the job would not count as finished.
func (s *Store) writeFinished(ctx context.Context, j *core.Job, expect uint64, now time.Time) error {
	rec, err := s.recordMsg(j, expect)
	if err != nil {
		return err
	}
	var marker jetstream.PubAckFuture
	if msgs := s.wakesFor(j, now, pendingAfter(expect)); len(msgs) > 0 {
		if marker, err = s.js.PublishMsgAsync(msgs[0]); err != nil {
			return unavailable("publish wake-up", err)
		}
	}
	recF, recErr := s.js.PublishMsgAsync(rec)
	var (
		markSeqs []uint64
		markErr  error
	)
	if marker != nil {
		ack, err := await(ctx, marker)
		if err != nil {
			markErr = unavailable("publish wake-up", err)
		} else {
			markSeqs = []uint64{ack.Sequence}
		}
	}
	if recErr != nil {
		s.deleteSeqs(ctx, markSeqs, j.ID)
		return unavailable("write job", recErr)
	}
	ack, err := await(ctx, recF)
	if isWrongSeq(err) {
		s.undo(ctx, markSeqs, j.ID)
		return errCAS
	}
	if err != nil {
		return unavailable("write job", err)
	}
	if markErr != nil {
		s.log.Warn("natsstore: publish the marker of a finished job", "id", j.ID, "err", markErr)
		if err := s.publishWakes(ctx, j, ack.Sequence); err != nil {
			s.log.Warn("natsstore: publish wake-ups", "id", j.ID, "err", err)
		}
	}
	s.purgeLater(s.names.wakes(j.Topic, j.ID), j.ID, ack.Sequence)
	return nil
}

// dropMarker purges the marker of old, the finished record that put is
// about to overwrite (nil or unfinished: nothing), so that the job counts
// once, in its new state; write's purges leave markers alone (see
// kindDone). It runs before the write, a purge of one literal subject,
// only when an id is reused: done after, in the background, it could
// remove the marker of the new job finishing at once. Should the write
// then lose its compare-and-set, the winner is another put, which drops the
// marker as well.
func (s *Store) dropMarker(ctx context.Context, old *core.Job) error {
	if old == nil || !old.State.Finished() {
		return nil
	}
	kind := kindDone
	if old.State == core.StateCancelled {
		kind = kindCancelled
	}
	return s.purge(ctx, s.names.marker(kind, old.Topic, old.ID), 0)
}

// purgeLater purges a job's wake-ups on subject (see purge) stored before
// sequence below, in the background; failures are logged (the stale
// wake-ups left are reconciled by whoever gets them). Past maxBackground it
// purges at once.
//
// The purges of one job run one after another, in the order asked: each
// then removes one message, normally. nats-server 2.15 recounts the pending
// messages of every consumer of the stream after a purge that removes more
// than one: an acknowledgement's purge overtaking its claim's (and removing
// the soon schedule with the lease) took 28% of the process's CPU at 1 000
// due jobs/s.
func (s *Store) purgeLater(subject, id string, below uint64) {
	purge := func(ctx context.Context, prev chan struct{}) {
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
			}
		}
		if s.bg.before != nil {
			s.bg.before(subject)
		}
		if err := s.purge(ctx, subject, below); err != nil {
			s.log.Warn("natsstore: purge stale wake-ups", "id", id, "err", err)
		}
	}
	done := make(chan struct{})
	s.bg.mu.Lock()
	prev := s.bg.last[id]
	s.bg.last[id] = done
	finish := func() {
		s.bg.mu.Lock()
		if s.bg.last[id] == done {
			delete(s.bg.last, id)
		}
		s.bg.mu.Unlock()
		close(done)
	}
	if len(s.bg.running) >= maxBackground {
		s.bg.mu.Unlock()
		defer finish()
		ctx, cancel := context.WithTimeout(s.bg.ctx, 10*time.Second)
		defer cancel()
		purge(ctx, prev)
		return
	}
	k := s.bg.next
	s.bg.next++
	s.bg.running[k] = done
	s.bg.mu.Unlock()
	go func() {
		defer func() {
			s.bg.mu.Lock()
			delete(s.bg.running, k)
			s.bg.mu.Unlock()
			finish()
		}()
		ctx, cancel := context.WithTimeout(s.bg.ctx, 10*time.Second)
		defer cancel()
		purge(ctx, prev)
	}()
}

// awaitPurges waits until the background purges running when it is called have
// finished. Errors: ctx's.
func (s *Store) awaitPurges(ctx context.Context) error {
	s.bg.mu.Lock()
	running := make([]chan struct{}, 0, len(s.bg.running))
	for _, done := range s.bg.running {
		running = append(running, done)
	}
	s.bg.mu.Unlock()
	for _, done := range running {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// undo cleans up after a compare-and-set that lost: it deletes the wake-ups
// the loser published (seqs), which only those messages can be, then
// publishes the wake-ups the winner's record needs, since the loser's may
// have replaced them on the same subjects. Failures are logged: the
// caller's retry reads the record again anyway.
func (s *Store) undo(ctx context.Context, seqs []uint64, id string) {
	s.deleteSeqs(ctx, seqs, id)
	j, cur, err := s.load(ctx, id)
	if err != nil || j == nil {
		return
	}
	if err := s.publishWakes(ctx, j, cur); err != nil {
		s.log.Warn("natsstore: publish wake-ups", "id", id, "err", err)
	}
}

// publishWakes publishes the wake-ups that j, read at record sequence cur,
// needs, for a caller that found them missing or replaced. A write after
// cur, between that read and the publish (the winner of a claim
// acknowledging the job it just claimed, say), purged below its own
// wake-ups or record, so not these: they would bring back a state already
// replaced, such as a lease counted as reserved until it fires. So publishWakes
// reads the record again and, while it has changed, deletes what it
// published on subjects the new state does not use (only those messages
// have their sequences) and publishes the new state's wake-ups, which
// replace the rest.
func (s *Store) publishWakes(ctx context.Context, j *core.Job, cur uint64) error {
	for range maxTries {
		msgs := s.wakesFor(j, s.now(), matching(cur))
		seqs, err := s.publishAll(ctx, msgs)
		if err != nil {
			return err
		}
		next, seq, err := s.load(ctx, j.ID)
		if err != nil || seq == cur {
			return err
		}
		var keep []*nats.Msg
		if next != nil {
			keep = s.wakesFor(next, s.now(), matching(seq))
		}
		for i, m := range msgs {
			if !slices.ContainsFunc(keep, func(k *nats.Msg) bool { return k.Subject == m.Subject }) {
				s.deleteSeqs(ctx, seqs[i:i+1], j.ID)
			}
		}
		if next == nil {
			return nil
		}
		j, cur = next, seq
	}
	return nil
}

// deleteSeqs deletes stale wake-ups of a job by sequence; failures are
// logged.
func (s *Store) deleteSeqs(ctx context.Context, seqs []uint64, id string) {
	for _, seq := range seqs {
		if err := s.stream.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !isNotFoundAPI(err) {
			s.log.Warn("natsstore: delete stale wake-up", "id", id, "err", err)
		}
	}
}

// errCodeSequenceNotFound is nats-server's "sequence not found" (code
// 10043), the answer to deleting a message already removed; nats.go names
// no constant for it.
const errCodeSequenceNotFound jetstream.ErrorCode = 10043

// isNotFoundAPI reports whether err is JetStream's "no message found" or
// "sequence not found".
func isNotFoundAPI(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.Code == 404 || apiErr.ErrorCode == jetstream.JSErrCodeMessageNotFound ||
		apiErr.ErrorCode == errCodeSequenceNotFound)
}

// view returns a copy of j as the contract shows it at now (Job.AsOf).
func view(j *core.Job, now time.Time) *core.Job {
	v := j.Clone()
	v.AsOf(now)
	return v
}

// PutJobs implements core.Store. Jobs are stored concurrently, each with a
// wake-up first and a compare-and-set record second. Errors: ErrClosed,
// ErrUnavailable (some jobs may have been stored).
func (s *Store) PutJobs(ctx context.Context, params *core.PutJobsParams) ([]core.PutResult, error) {
	if params == nil {
		return nil, core.Invalid("", "natsstore: put jobs: no params")
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	for _, j := range params.Jobs {
		if err := s.markSeen(ctx, j.Topic); err != nil {
			return nil, err
		}
	}
	results := make([]core.PutResult, len(params.Jobs))
	if params.Replace {
		err := s.each(ctx, len(params.Jobs), func(i int) error {
			var err error
			results[i], err = s.put(ctx, params.Jobs[i], true, nil)
			return err
		})
		return results, err
	}
	// Create: publish every wake-up, then every record with "no record
	// yet" expected, pipelined; the few that collide take the slow path.
	now := s.now()
	jobs := make([]*core.Job, len(params.Jobs))
	wakes := make([][]jetstream.PubAckFuture, len(jobs))
	for i, in := range params.Jobs {
		jobs[i] = newJob(in, now, now)
		for _, m := range s.wakesFor(jobs[i], now, pendingAfter(0)) {
			f, err := s.js.PublishMsgAsync(m)
			if err != nil {
				return nil, unavailable("publish wake-up", err)
			}
			wakes[i] = append(wakes[i], f)
		}
	}
	wakeSeqs := make([][]uint64, len(jobs))
	for i, fs := range wakes {
		for _, f := range fs {
			ack, err := await(ctx, f)
			if err != nil {
				return nil, unavailable("publish wake-up", err)
			}
			wakeSeqs[i] = append(wakeSeqs[i], ack.Sequence)
		}
	}
	recs := make([]jetstream.PubAckFuture, len(jobs))
	for i, j := range jobs {
		m, err := s.recordMsg(j, 0)
		if err != nil {
			return nil, err
		}
		if recs[i], err = s.js.PublishMsgAsync(m); err != nil {
			return nil, unavailable("write job", err)
		}
	}
	var slow []int
	for i, f := range recs {
		_, err := await(ctx, f)
		switch {
		case isWrongSeq(err):
			slow = append(slow, i)
		case err != nil:
			return nil, unavailable("write job", err)
		}
	}
	for _, i := range slow {
		var err error
		if results[i], err = s.put(ctx, params.Jobs[i], false, wakeSeqs[i]); err != nil {
			return results, err
		}
	}
	return results, nil
}

// await waits for an async publish.
func await(ctx context.Context, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	select {
	case ack := <-f.Ok():
		return ack, nil
	case err := <-f.Err():
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// newJob returns the record of a job being stored (Job.Reset).
func newJob(in *core.Job, createdAt, now time.Time) *core.Job {
	j := in.Clone()
	j.Reset(createdAt, now)
	return j
}

// put stores one job by reading its record first. stale, when set, are the
// sequences of wake-ups published for it by a create that collided: they
// are deleted unless still needed.
func (s *Store) put(ctx context.Context, in *core.Job, replace bool, stale []uint64) (core.PutResult, error) {
	for {
		old, seq, err := s.load(ctx, in.ID)
		if err != nil {
			return core.PutResult{}, err
		}
		now := s.now()
		createdAt := now
		var res core.PutResult
		if old != nil {
			cur := view(old, now)
			switch {
			case cur.State.Finished():
			case !replace:
				return core.PutResult{Err: s.collided(ctx, old, seq, cur, stale, "job %q already exists", in.ID)}, nil
			case cur.State == core.StateReserved:
				return core.PutResult{Err: s.collided(ctx, old, seq, cur, stale, "job %q is reserved", in.ID)}, nil
			default:
				res.Replaced = true
				createdAt = old.CreatedAt
			}
		}
		if err := s.dropMarker(ctx, old); err != nil {
			return core.PutResult{}, err
		}
		err = s.write(ctx, newJob(in, createdAt, now), seq, now)
		if errors.Is(err, errCAS) {
			continue
		}
		return res, err
	}
}

// collided builds the conflict of a job that exists, after undoing the
// wake-ups that a collided create published for it: they are deleted, and
// the existing job's own wake-ups, which they may have replaced, are
// published again.
func (s *Store) collided(ctx context.Context, old *core.Job, seq uint64, cur *core.Job, stale []uint64, format string, args ...any) error {
	if stale != nil {
		s.deleteSeqs(ctx, stale, old.ID)
		if _, err := s.publishAll(ctx, s.wakesFor(old, s.now(), matching(seq))); err != nil {
			s.log.Warn("natsstore: publish wake-ups", "id", old.ID, "err", err)
		}
	}
	return &core.ConflictError{Job: cur, Message: "natsstore: " + fmt.Sprintf(format, args...)}
}

// each runs f(0..n-1) on up to 64 goroutines and returns the first error.
func (s *Store) each(ctx context.Context, n int, f func(i int) error) error {
	if n == 1 {
		return f(0)
	}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		sem   = make(chan struct{}, 64)
	)
	for i := range n {
		if ctx.Err() != nil {
			once.Do(func() { first = ctx.Err() })
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(i); err != nil {
				once.Do(func() { first = err })
			}
		}()
	}
	wg.Wait()
	return first
}

// GetJob implements core.Store. Errors: ErrNotFound, ErrClosed,
// ErrUnavailable.
func (s *Store) GetJob(ctx context.Context, id string) (*core.Job, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	j, _, err := s.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, fmt.Errorf("natsstore: job %q: %w", id, core.ErrNotFound)
	}
	return view(j, s.now()), nil
}

// CancelJob implements core.Store. Errors: ErrNotFound (unknown or
// finished), *core.ConflictError (ErrConflict) while reserved, ErrClosed,
// ErrUnavailable.
func (s *Store) CancelJob(ctx context.Context, id string) error {
	return s.mutate(ctx, id, func(j *core.Job, now time.Time) error {
		switch j.State {
		case core.StateDone, core.StateCancelled:
			return fmt.Errorf("natsstore: cancel %q: job is %s: %w", id, j.State, core.ErrNotFound)
		case core.StateReserved:
			return &core.ConflictError{Job: j.Clone(), Message: fmt.Sprintf("natsstore: job %q is reserved", id)}
		}
		j.Finish(core.StateCancelled, now)
		return nil
	})
}

// mutate applies f to the current view of a job and writes the result,
// retrying when the record changed meanwhile. f returns an error to refuse.
func (s *Store) mutate(ctx context.Context, id string, f func(j *core.Job, now time.Time) error) error {
	_, err := s.mutateJob(ctx, id, f)
	return err
}

func (s *Store) mutateJob(ctx context.Context, id string, f func(j *core.Job, now time.Time) error) (*core.Job, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	cached, cachedSeq := s.reserved.take(id)
	for {
		old, seq, fromCache := cached, cachedSeq, cached != nil
		cached = nil
		if !fromCache {
			var err error
			if old, seq, err = s.load(ctx, id); err != nil {
				return nil, err
			}
		}
		if old == nil {
			return nil, fmt.Errorf("natsstore: job %q: %w", id, core.ErrNotFound)
		}
		now := s.now()
		j := view(old, now)
		if err := f(j, now); err != nil {
			if fromCache {
				continue // refused on a guess: ask the stored record
			}
			return nil, err
		}
		err := s.write(ctx, j, seq, now)
		if errors.Is(err, errCAS) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return j, nil
	}
}

// leased checks that lease is j's current, unexpired lease.
func leased(j *core.Job, lease string) error {
	if j.State != core.StateReserved || lease == "" || j.Lease != lease {
		return fmt.Errorf("natsstore: job %q: %w", j.ID, core.ErrLeaseLost)
	}
	return nil
}

// AckJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost,
// ErrClosed, ErrUnavailable.
func (s *Store) AckJob(ctx context.Context, params *core.AckJobParams) (core.SettleResult, error) {
	return settled(s.mutateJob(ctx, params.ID, func(j *core.Job, now time.Time) error {
		if err := leased(j, params.Lease); err != nil {
			return err
		}
		j.Finish(core.StateDone, now)
		return nil
	}))
}

// AckJobs implements core.Store. Each job's record changes by a
// compare-and-set of its own, so the acks cannot share one write: they run
// concurrently (ackConcurrency at a time), which shares the round trips,
// and the acks of one id run in order, so that the second finds it done.
// Errors: ErrClosed, ErrUnavailable.
func (s *Store) AckJobs(ctx context.Context, params *core.AckJobsParams) ([]core.AckResult, error) {
	res := make([]core.AckResult, len(params.Acks))
	byID := make(map[string][]int, len(params.Acks))
	var ids []string
	for k, a := range params.Acks {
		if byID[a.ID] == nil {
			ids = append(ids, a.ID)
		}
		byID[a.ID] = append(byID[a.ID], k)
	}
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, ackConcurrency)
		mu   sync.Mutex
		fail error
	)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, k := range byID[id] {
				r := &res[k]
				r.Settled, r.Err = s.AckJob(ctx, &params.Acks[k])
				if r.Err != nil && !errors.Is(r.Err, core.ErrNotFound) && !errors.Is(r.Err, core.ErrLeaseLost) {
					mu.Lock()
					fail = cmp.Or(fail, r.Err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if fail != nil {
		return nil, fail
	}
	return res, nil
}

// ackConcurrency bounds the acks of one AckJobs call in flight at once.
const ackConcurrency = 32

// RetryJob implements core.Store. A zero params.RunAt means now. Errors:
// ErrNotFound, ErrLeaseLost, ErrClosed, ErrUnavailable.
func (s *Store) RetryJob(ctx context.Context, params *core.RetryJobParams) (core.SettleResult, error) {
	return settled(s.mutateJob(ctx, params.ID, func(j *core.Job, now time.Time) error {
		if err := leased(j, params.Lease); err != nil {
			return err
		}
		j.Retry(params.RunAt, params.Error, now)
		return nil
	}))
}

// BuryJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost,
// ErrClosed, ErrUnavailable.
func (s *Store) BuryJob(ctx context.Context, params *core.BuryJobParams) (core.SettleResult, error) {
	return settled(s.mutateJob(ctx, params.ID, func(j *core.Job, now time.Time) error {
		if err := leased(j, params.Lease); err != nil {
			return err
		}
		j.Bury(params.Error, now)
		return nil
	}))
}

// settled is what a settling call returns of the job it wrote.
func settled(j *core.Job, err error) (core.SettleResult, error) {
	if err != nil {
		return core.SettleResult{}, err
	}
	return j.Settled(), nil
}

// TouchJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost,
// ErrClosed, ErrUnavailable.
func (s *Store) TouchJob(ctx context.Context, params *core.TouchJobParams) (*core.Job, error) {
	return s.mutateJob(ctx, params.ID, func(j *core.Job, now time.Time) error {
		if err := leased(j, params.Lease); err != nil {
			return err
		}
		j.LeaseExpiresAt = now.Add(j.TTR)
		return nil
	})
}

// RequeueJob implements core.Store: the dead job's run_at becomes now.
// Errors: ErrNotFound, *core.ConflictError (ErrConflict) when not dead,
// ErrClosed, ErrUnavailable.
func (s *Store) RequeueJob(ctx context.Context, id string) error {
	return s.mutate(ctx, id, func(j *core.Job, now time.Time) error {
		if j.State != core.StateDead {
			return &core.ConflictError{Job: j.Clone(), Message: fmt.Sprintf("natsstore: job %q is %s, not dead", id, j.State)}
		}
		j.Requeue(now)
		return nil
	})
}

// Ping implements core.Store: it asks JetStream for the job stream.
// Errors: ErrClosed, ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	if _, err := s.stream.Info(ctx); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// Close implements core.Store: fetchers stop and release the wake-ups they
// hold (nak, so another instance gets them at once), claims waiting return
// ErrClosed, and every later call too. The connection stays open.
// Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	queues := make([]*topicQueue, 0, len(s.queues))
	for _, q := range s.queues {
		queues = append(queues, q)
	}
	s.mu.Unlock()
	for _, q := range queues {
		q.stop()
	}
	s.house.stop()
	// Background purges get drainWait to finish; the stale wake-ups of
	// those cut short are reconciled by whoever gets them.
	ctx, cancel := context.WithTimeout(context.Background(), drainWait)
	_ = s.awaitPurges(ctx)
	cancel()
	s.bg.cancel()
	_ = s.awaitPurges(context.Background())
	s.wg.Wait()
	return nil
}

// newLease returns a random lease token.
func newLease() string { return rand.Text() }

// encodeRecord encodes a job's record: the length of its JSON fields as a
// uvarint, the JSON of every field but the body, then the body byte for
// byte (encoding/json would compact it).
func encodeRecord(j *core.Job) ([]byte, error) {
	c := *j
	c.Body = nil
	meta, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, binary.MaxVarintLen64+len(meta)+len(j.Body))
	b = binary.AppendUvarint(b, uint64(len(meta)))
	b = append(b, meta...)
	return append(b, j.Body...), nil
}

// decodeRecord decodes what encodeRecord encoded.
func decodeRecord(data []byte) (*core.Job, error) {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)-k) {
		return nil, errors.New("bad length")
	}
	var j core.Job
	if err := json.Unmarshal(data[k:k+int(n)], &j); err != nil {
		return nil, err
	}
	if body := data[k+int(n):]; len(body) > 0 {
		j.Body = append(json.RawMessage(nil), body...)
	}
	return &j, nil
}
