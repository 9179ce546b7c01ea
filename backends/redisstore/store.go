package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/core"
)

// Store defaults.
const (
	// PrefixDefault is the key prefix unless Config.Prefix says otherwise.
	PrefixDefault = "delayq"
	// ShardsDefault is the shard count of a new prefix on a Redis Cluster
	// unless Config.Shards says otherwise: enough to spread jobs over its
	// masters' slots.
	ShardsDefault = 16
	// ShardsDefaultSingle is the shard count of a new prefix on one server
	// (standalone or Sentinel): there shards spread nothing, and each costs
	// Redis time in every claim and expiry round (a third more CPU per job
	// with 16 than with 1: go test -bench Burst with DELAYQ_BENCH_SHARDS).
	ShardsDefaultSingle = 1
	// ShardsMax is the largest shard count.
	ShardsMax = 1024
	// RetentionDefault is how long finished jobs stay queryable by default.
	RetentionDefault = 72 * time.Hour
	// WaitTimeoutDefault bounds the wait for replicas (Config.WaitReplicas)
	// unless Config.WaitTimeout says otherwise.
	WaitTimeoutDefault = time.Second
)

// Config configures a Store.
type Config struct {
	// Client is the Redis client: standalone, Sentinel (failover) or
	// Cluster. Required; Close does not close it.
	Client redis.UniversalClient
	// Prefix namespaces every key and the wake-up channel: 1-64 characters
	// of [A-Za-z0-9_.-]. Stores with the same prefix on one Redis share
	// their jobs, as delayq instances of one deployment do.
	//
	// Defaults to PrefixDefault ("delayq").
	Prefix string
	// Shards is how many shards jobs spread over, a power of two. Every
	// store of a prefix must use the same count: New refuses another.
	//
	// Defaults to the count recorded for the prefix, and for a new prefix
	// to ShardsDefaultSingle (1) with a plain client (one server) and to
	// ShardsDefault (16) with a Cluster client.
	Shards int
	// Retention is how long finished jobs (done, cancelled) stay
	// queryable; they expire by a key TTL.
	//
	// Defaults to RetentionDefault (72h).
	Retention time.Duration
	// Clock times the store's waits: a claim waiting for the next due job,
	// the expiry of leases. Due times, leases and every time a job records
	// are judged by the Redis server's clock (TIME, in the scripts), so
	// that instances whose clocks differ neither deliver early nor end a
	// lease another instance still holds; the waits convert through the
	// difference last seen between the two clocks. Key TTLs (retention)
	// run on the server's clock too.
	//
	// Defaults to the real clock.
	Clock core.Clock
	// TimeFromClock makes the scripts take now from Clock instead of the
	// server's clock: for tests that move a fake clock. Every store of a
	// prefix must then agree on the time.
	TimeFromClock bool
	// Logger receives the store's warnings.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// WaitReplicas, when positive, makes every write that answers a client
	// (put, import, claim, ack, retry, bury, touch, cancel, requeue) wait,
	// with Redis WAIT on the connection that ran its script, until that
	// many replicas have it: Redis replicates asynchronously, and a
	// failover loses what the promoted replica had not received. A write
	// fewer replicas confirm within WaitTimeout is done on the master but
	// fails with core.ErrNotReplicated (ErrUnavailable): it may be lost in a
	// failover, or not (a claim's jobs stay reserved until their leases run
	// out). Lease expiries and schedules do not wait: what a failover loses
	// of them is done again. Standalone or Sentinel clients only: New
	// refuses it with a Cluster client.
	WaitReplicas int
	// WaitTimeout bounds the wait of WaitReplicas.
	//
	// Defaults to WaitTimeoutDefault (1s).
	WaitTimeout time.Duration
	// JobForm is how new jobs are stored (lib.lua: load): "" keeps the
	// prefix's form, packed for a new prefix; JobFormPacked also switches
	// a prefix of hashes to packed jobs, which releases before packed jobs
	// cannot read (every instance must run this one or a later one first);
	// JobFormHash makes a new prefix of hashes, which earlier releases
	// read, and is refused for a packed prefix. Jobs already stored keep
	// their form until they are put again: every form is read.
	JobForm string
}

// Forms of Config.JobForm.
const (
	// JobFormPacked stores each job as one MessagePack string.
	JobFormPacked = "packed"
	// JobFormHash stores each job as a hash of its fields.
	JobFormHash = "hash"
)

// WithDefaults returns the configuration with every unset field at its
// default, but for Shards, which New reads from Redis when unset.
func (c Config) WithDefaults() Config {
	c.Prefix = cmp.Or(c.Prefix, PrefixDefault)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.WaitTimeout = cmp.Or(c.WaitTimeout, WaitTimeoutDefault)
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
	case c.Client == nil:
		return errors.New("redisstore: Client is required")
	case !validPrefix(c.Prefix):
		return fmt.Errorf("redisstore: Prefix %q must be 1-64 characters of [A-Za-z0-9_.-]", c.Prefix)
	case c.Shards != 0 && (c.Shards < 1 || c.Shards > ShardsMax || c.Shards&(c.Shards-1) != 0):
		return fmt.Errorf("redisstore: Shards %d must be a power of two between 1 and %d", c.Shards, ShardsMax)
	case c.Retention < time.Second:
		return fmt.Errorf("redisstore: Retention %s must be at least 1s", c.Retention)
	case c.WaitReplicas < 0:
		return fmt.Errorf("redisstore: WaitReplicas %d must be at least 0", c.WaitReplicas)
	case c.WaitReplicas > 0 && c.WaitTimeout <= 0:
		return fmt.Errorf("redisstore: WaitTimeout %s must be positive", c.WaitTimeout)
	case c.WaitReplicas > 0 && !isPlain(c.Client):
		return errors.New("redisstore: WaitReplicas needs a standalone or Sentinel client: a Redis Cluster is not supported")
	case c.JobForm != "" && c.JobForm != JobFormPacked && c.JobForm != JobFormHash:
		return fmt.Errorf("redisstore: JobForm %q must be %q, %q or empty", c.JobForm, JobFormPacked, JobFormHash)
	}
	return nil
}

// isPlain reports whether c talks to one server (standalone, or the master
// of a Sentinel): a *redis.Client, whose connections can be pinned.
func isPlain(c redis.UniversalClient) bool {
	_, ok := c.(*redis.Client)
	return ok
}

func validPrefix(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Store is a core.Store over Redis. It is safe for concurrent use, and
// several stores (in one process or many) may share one prefix on one Redis
// or Redis Cluster. Create it with New.
type Store struct {
	cfg   Config
	rdb   redis.UniversalClient
	keys  keys
	clock core.Clock
	log   *slog.Logger
	// loseAnswers is how many claim answers a test has dropped
	// (answerLost); 0 outside tests.
	loseAnswers atomic.Int32

	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed by Close
	topics map[string]*topicState
	seen   map[string]time.Time // topic -> when this store last marked it seen

	bg     context.Context // background work (expiry); cancelled by Close
	stopBG context.CancelFunc
	exp    *expirer
	leases *leaseBatcher
	// multiShard is set for a plain client, of a standalone server or a
	// Sentinel-managed master, which has no slots: there one claim, expire
	// or lease script serves several shards, since each request costs the
	// server far more than the commands in it (see doc.go, Scripts). A
	// Cluster needs one shard (slot) per script.
	multiShard bool
	// claimTurn counts the claims of a Cluster's store: each starts the
	// turn of shards that orders their jobs of equal priority and run_at
	// at the next shard (peek).
	claimTurn atomic.Uint64
	// narrowPeek holds the topics whose last claim on a Cluster took all
	// its jobs from the first shard of its turn, as a burst due at one
	// instant does: their next claim reads one job of each other shard,
	// which shows whether any comes first, instead of a share (peek).
	narrowPeek sync.Map // topic -> struct{}
	// functions is set when the server runs the library (scripts.go):
	// shard scripts are then called with FCALL, else with EVALSHA.
	functions bool
	// skew is the server's clock minus the store's (ms), as last seen in a
	// script's answer: waits for due times and lease expiries, which the
	// server states on its clock, convert through it.
	skew        atomic.Int64
	retentionMS string // Config.Retention in ms, as scripts get it
	// jobForm is the form of the jobs this store creates: JobFormPacked or
	// JobFormHash, by the prefix's layout.
	jobForm string
	// inlineBody is the longest body kept in a job's own key: of a hash,
	// the server's hash-max-listpack-value (the smallest of a Cluster's
	// masters), 64 unless configured otherwise, so that the hash keeps its
	// compact listpack encoding (a hash with one longer value becomes a
	// hash table of about twice the memory); of a packed job, at least
	// packedInlineBody. A longer body gets a key of its own. A body in the
	// job spares the server a key to write, read and expire per job. Either
	// way is correct: the limit only chooses the encoding.
	inlineBody int
	// woke are the parked jobs of a Cluster that this store moved back to
	// their queues, flat topic, key, id, for its next slots.lua call to
	// confirm (Store.unpark). Under slotsMu.
	slotsMu sync.Mutex
	woke    []any
	pubsub  *redis.PubSub
	notify  core.Notifier
	wg      sync.WaitGroup
}

var (
	_ core.Store        = (*Store)(nil)
	_ core.ClaimSource  = (*Store)(nil)
	_ core.BodyRewriter = (*Store)(nil)
)

// New opens a store: it checks that Redis answers and that the prefix's
// shard count matches (recording it for a new prefix), loads the scripts,
// moves the jobs of a prefix of an earlier layout into queues (migrate),
// subscribes to the prefix's wake-up channel and starts ending expired
// leases. Every
// instance of a deployment calls New with the same Prefix and Shards.
// Errors: an invalid configuration, a shard count other than the one
// recorded, or ErrUnavailable when Redis does not answer.
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Shards == 0 {
		n, err := defaultShards(ctx, cfg)
		if err != nil {
			return nil, err
		}
		cfg.Shards = n
	}
	s := &Store{
		cfg:    cfg,
		rdb:    cfg.Client,
		keys:   newKeys(cfg.Prefix, cfg.Shards),
		clock:  cfg.Clock,
		log:    cfg.Logger,
		done:   make(chan struct{}),
		topics: make(map[string]*topicState),
		seen:   make(map[string]time.Time),

		retentionMS: strconv.FormatInt(cfg.Retention.Milliseconds(), 10),
	}
	// Only a plain client talks to one server: a ClusterClient (or a Ring)
	// spreads keys over several.
	s.multiShard = isPlain(cfg.Client)
	if err := s.checkShards(ctx); err != nil {
		return nil, err
	}
	if err := s.loadCode(ctx); err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	if err := s.indexKeys(ctx); err != nil {
		return nil, err
	}
	s.inlineBody = listpackValueMax(ctx, s.rdb)
	if s.jobForm == JobFormPacked {
		s.inlineBody = max(s.inlineBody, packedInlineBody)
	}
	if !cfg.TimeFromClock {
		// The first waits, before any script answered, convert through it.
		t, err := s.rdb.Time(ctx).Result()
		if err != nil {
			return nil, unavailable("read the server's time", err)
		}
		s.skew.Store(t.UnixMilli() - s.clock.Now().UnixMilli())
	}
	// Subscribe before the first claim or expiry reads the shards, so that
	// no wake-up published after that read is missed.
	s.pubsub = s.rdb.Subscribe(ctx, s.keys.channel)
	if _, err := s.pubsub.Receive(ctx); err != nil {
		_ = s.pubsub.Close()
		return nil, unavailable("subscribe", err)
	}
	s.bg, s.stopBG = context.WithCancel(context.WithoutCancel(ctx))
	s.exp = newExpirer(s)
	s.leases = newLeaseBatcher(s)
	msgs := s.pubsub.ChannelWithSubscriptions(redis.WithChannelSize(4096))
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.leases.run()
	}()
	go func() {
		defer s.wg.Done()
		s.listen(msgs)
	}()
	go func() {
		defer s.wg.Done()
		s.exp.run()
	}()
	return s, nil
}

// defaultShards is the shard count recorded for the prefix, or the
// default of the client's kind for a new prefix.
func defaultShards(ctx context.Context, cfg Config) (int, error) {
	got, err := cfg.Client.HGet(ctx, newKeys(cfg.Prefix, 1).meta, "shards").Result()
	switch {
	case errors.Is(err, redis.Nil):
		if _, single := cfg.Client.(*redis.Client); single {
			return ShardsDefaultSingle, nil
		}
		return ShardsDefault, nil
	case err != nil:
		return 0, unavailable("read shards", err)
	}
	n, err := strconv.Atoi(got)
	if err != nil || n < 1 || n > ShardsMax || n&(n-1) != 0 {
		return 0, fmt.Errorf("redisstore: prefix %q records %q shards, not a power of two between 1 and %d", cfg.Prefix, got, ShardsMax)
	}
	return n, nil
}

// checkShards records the prefix's shard count, or checks it against the
// one recorded.
func (s *Store) checkShards(ctx context.Context) error {
	n := strconv.Itoa(s.cfg.Shards)
	if err := s.rdb.HSetNX(ctx, s.keys.meta, "shards", n).Err(); err != nil {
		return unavailable("check shards", err)
	}
	got, err := s.rdb.HGet(ctx, s.keys.meta, "shards").Result()
	if err != nil {
		return unavailable("check shards", err)
	}
	if got != n {
		return fmt.Errorf("redisstore: Shards %d, but prefix %q was created with %s shards", s.cfg.Shards, s.cfg.Prefix, got)
	}
	return nil
}

// listpackValueDefault is Redis's default hash-max-listpack-value.
const listpackValueDefault = 64

// listpackValueMax reads the servers' hash-max-listpack-value, the smallest
// of a Cluster's masters; listpackValueDefault when CONFIG GET is refused
// (some managed services rename it).
func listpackValueMax(ctx context.Context, rdb redis.UniversalClient) int {
	limit := math.MaxInt
	read := func(ctx context.Context, c redis.Cmdable) error {
		v, err := c.ConfigGet(ctx, "hash-max-listpack-value").Result()
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(v["hash-max-listpack-value"])
		if err != nil {
			return err
		}
		limit = min(limit, n)
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return read(ctx, m)
		})
	} else {
		err = read(ctx, rdb)
	}
	if err != nil || limit == math.MaxInt {
		return listpackValueDefault
	}
	return limit
}

// packedInlineBody is the longest body a packed job holds whatever the
// server's hash-max-listpack-value, which concerns hashes only. A body
// within the job costs no key of its own to write, read and expire, and a
// claim and an ack each write it again with the job: 512 bytes keeps that
// copy small beside the calls it saves (docs/benchmarks.md, "Redis: the
// drain").
const packedInlineBody = 512

// Key layouts of this version, in the prefix's meta hash: jobs wait in
// per-topic queues, and are created as hashes (layoutQueues) or packed
// (layoutPacked). A prefix without one was written by an earlier version
// (one schedule of every topic, per-topic ready sets), or is new. Earlier
// releases know only layoutQueues: they refuse a packed prefix at start.
const (
	layoutQueues = "queues"
	layoutPacked = "packed"
)

// migratePage is how many scheduled jobs one migrate script moves.
const migratePage = 1000

// migrate moves the waiting jobs of a prefix of the earlier layout into
// their topics' queues and records the layout, and takes the prefix's job
// form (Config.JobForm). It moves jobs once per prefix; the instances of
// the earlier version must be stopped first (CHANGELOG).
func (s *Store) migrate(ctx context.Context) error {
	got, err := s.rdb.HGet(ctx, s.keys.meta, "layout").Result()
	form := s.cfg.JobForm
	switch {
	case err == nil && got == layoutPacked:
		if form == JobFormHash {
			return fmt.Errorf("redisstore: prefix %q packs its jobs, and cannot go back to hashes; move its jobs to a new prefix with export and import", s.cfg.Prefix)
		}
		s.jobForm = JobFormPacked
		return nil
	case err == nil && got == layoutQueues:
		s.jobForm = JobFormHash
		if form != JobFormPacked {
			return nil
		}
		if err := s.rdb.HSet(ctx, s.keys.meta, "layout", layoutPacked).Err(); err != nil {
			return unavailable("switch to packed jobs", err)
		}
		s.jobForm = JobFormPacked
		s.log.Info("redisstore: the prefix's new jobs are packed from now on; releases before packed jobs refuse it", "prefix", s.cfg.Prefix)
		return nil
	case err == nil:
		return fmt.Errorf("redisstore: prefix %q has key layout %q, which this version does not know", s.cfg.Prefix, got)
	case !errors.Is(err, redis.Nil):
		return unavailable("read layout", err)
	}
	topics, err := s.knownTopics(ctx)
	if err != nil {
		return unavailable("migrate", err)
	}
	args := []any{migratePage}
	for _, t := range topics {
		args = append(args, t)
	}
	var moved int64
	for n := range s.cfg.Shards {
		for {
			k, err := s.run(ctx, []call{s.shardCall(scriptMigrate, n, args...)})[0].Int64()
			if err != nil {
				return unavailable("migrate", err)
			}
			if k == 0 {
				break
			}
			moved += k
		}
	}
	s.jobForm, got = JobFormPacked, layoutPacked
	if form == JobFormHash {
		s.jobForm, got = JobFormHash, layoutQueues
	}
	if err := s.rdb.HSet(ctx, s.keys.meta, "layout", got).Err(); err != nil {
		return unavailable("migrate", err)
	}
	if moved > 0 {
		s.log.Info("redisstore: moved waiting jobs into per-topic queues", "prefix", s.cfg.Prefix, "jobs", moved)
	}
	return nil
}

// indexKeys files the unfinished jobs of a prefix from before the index of
// business keys under their keys, once: it reads them as an export does
// and records "keys" in the prefix's meta hash, which a new prefix gets at
// once. Jobs that finished before are not filed (they expire with their
// retention). Instances of the earlier version must be stopped first: a
// job they put or finish afterwards is not filed, or stays filed as
// unfinished until it is put again.
func (s *Store) indexKeys(ctx context.Context) error {
	done, err := s.rdb.HExists(ctx, s.keys.meta, "keys").Result()
	if err != nil {
		return unavailable("read key index mark", err)
	}
	if done {
		return nil
	}
	byShard := make(map[int][]any)
	filed := int64(0)
	flush := func(n int) error {
		k, err := s.run(ctx, []call{s.shardCall(scriptIndex, n, byShard[n]...)})[0].Int64()
		filed += k
		byShard[n] = byShard[n][:0]
		return err
	}
	err = s.ExportJobs(ctx, func(j *core.Job) error {
		if j.Key == "" {
			return nil
		}
		n := s.keys.shardOf(j.ID)
		byShard[n] = append(byShard[n], j.ID)
		if len(byShard[n]) >= exportPage {
			return flush(n)
		}
		return nil
	})
	for n := range byShard {
		if err == nil && len(byShard[n]) > 0 {
			err = flush(n)
		}
	}
	if err != nil {
		return unavailable("index business keys", err)
	}
	if err := s.rdb.HSet(ctx, s.keys.meta, "keys", "1").Err(); err != nil {
		return unavailable("index business keys", err)
	}
	if filed > 0 {
		s.log.Info("redisstore: indexed the business keys of jobs put by an earlier version", "prefix", s.cfg.Prefix, "jobs", filed)
	}
	return nil
}

// knownTopics lists, sorted, the topics of the topic registry: every
// topic that holds jobs.
func (s *Store) knownTopics(ctx context.Context) ([]string, error) {
	topics, err := s.rdb.ZRange(ctx, s.keys.seen, 0, -1).Result()
	slices.Sort(topics)
	return topics, err
}

// listen handles the wake-up channel: a queue that got a job due earlier
// than its head wakes this store's claims of the topic; an earlier lease
// expiry of a shard re-arms the expirer. A (re)subscription means messages
// may have been lost (Redis restarted, the connection dropped), so
// everything is looked at again.
func (s *Store) listen(msgs <-chan any) {
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				s.log.Info("redisstore: wake-up channel subscribed again; rescanning shards", "prefix", s.cfg.Prefix)
				s.wakeAll()
				s.exp.all()
			}
		case *redis.Message:
			s.handleWake(m.Payload)
		}
	}
}

// handleWake applies one wake-up message: "q <shard> <ms> <topic>" (the
// topic's queue in the shard has a job due at ms, earlier than what it
// held) or "s <shard> <ms>" (a lease of the shard expires at ms, earlier
// than the others) or "p 0 0 <topic>" (the topic was resumed). Others are
// ignored.
func (s *Store) handleWake(p string) {
	kind, rest, ok := strings.Cut(p, " ")
	if !ok {
		return
	}
	num, rest, ok := strings.Cut(rest, " ")
	if !ok {
		return
	}
	shard, err := strconv.Atoi(num)
	if err != nil || shard < 0 || shard >= s.cfg.Shards {
		return
	}
	ms, topic, _ := strings.Cut(rest, " ")
	at, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return
	}
	switch kind {
	case "q":
		if topic != "" {
			s.queued(topic, shard, at)
		}
	case "s":
		s.exp.lower(shard, at)
	case "p":
		if topic != "" {
			s.resumed(topic)
		}
	}
}

// Ping implements core.Store. Errors: ErrClosed, ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// Close implements core.Store: claims waiting return ErrClosed, and every
// later call too. Jobs stay in Redis; the client stays open. Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.notify.Close()
	s.stopBG()
	err := s.pubsub.Close()
	s.wg.Wait()
	if err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// serverNow estimates the Redis server's time (Unix ms) from the store's
// clock and the skew last seen.
func (s *Store) serverNow() int64 { return s.clock.Now().UnixMilli() + s.skew.Load() }

// serverTime is serverNow as a time, to report stored jobs as of it.
func (s *Store) serverTime() time.Time { return msTime(s.serverNow()) }

// sawServerNow records the server's time a script answered, as a string of
// Unix ms, and returns it (or the estimate, for a malformed answer). With
// TimeFromClock the skew stays 0: the answer is the clock's time when the
// script was called, and a fake clock moved since would skew the estimate
// by the move.
func (s *Store) sawServerNow(v any) int64 {
	now := asInt(v)
	if now < 0 {
		return s.serverNow()
	}
	if !s.cfg.TimeFromClock {
		s.skew.Store(now - s.clock.Now().UnixMilli())
	}
	return now
}

// localAt converts a time of the server's clock (Unix ms) into the store's.
func (s *Store) localAt(ms int64) time.Time { return time.UnixMilli(ms - s.skew.Load()) }

// unavailable wraps an infrastructure failure.
func unavailable(what string, err error) error {
	return fmt.Errorf("redisstore: %s: %w: %w", what, core.ErrUnavailable, err)
}
