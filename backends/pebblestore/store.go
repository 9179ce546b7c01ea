package pebblestore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/delayq/delayq/core"
)

// Defaults of Config.
const (
	// RetentionDefault is how long finished jobs stay queryable.
	RetentionDefault = 72 * time.Hour
	// SyncIntervalDefault bounds what a power cut may lose of the writes
	// that do not wait for a sync (see the package doc, Durability).
	SyncIntervalDefault = time.Second
	// CacheBytesDefault is the size of Pebble's block cache.
	CacheBytesDefault = 32 << 20
)

// Config configures a Store.
type Config struct {
	// Dir is the directory of the Pebble database. Required; made if
	// missing. One Store at a time may open it.
	Dir string
	// Clock is where the store takes time from. Defaults to the real clock.
	Clock core.Clock
	// Retention is how long finished jobs (done, cancelled) stay
	// queryable and counted. Defaults to RetentionDefault (72h).
	Retention time.Duration
	// RetentionMaxJobs, when positive, bounds the finished jobs (done and
	// cancelled, of every topic) the store keeps: the prune deletes the
	// oldest first, in finish order, once there are more, even before
	// their Retention ended. Zero: no bound, Retention alone (see the
	// package doc, Retention).
	RetentionMaxJobs int64
	// SyncAlways makes every write wait for its fsync, acks and claims
	// too; otherwise those are synced in the background as soon as they
	// are written (see the package doc, Durability).
	SyncAlways bool
	// SyncInterval is the longest a write that did not wait for its sync
	// stays unsynced: the background sync runs at least this often.
	// Defaults to SyncIntervalDefault (1s).
	SyncInterval time.Duration
	// CacheBytes is the size of the block cache. Defaults to
	// CacheBytesDefault (32 MiB).
	CacheBytes int64
	// Logger receives Pebble's messages and the store's. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// DiskReserve is the size of the ballast file kept in Dir and deleted
	// when the disk fills, so that claims, acks and Pebble's own writes
	// still find room while puts are refused (see the package doc, A full
	// disk); at most a tenth of the file system. Zero: no reserve, and a
	// full disk may break the store until a restart. delayq serve keeps
	// DiskReserveDefault.
	DiskReserve int64
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Clock == nil {
		c.Clock = core.RealClock()
	}
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.SyncInterval = cmp.Or(c.SyncInterval, SyncIntervalDefault)
	c.CacheBytes = cmp.Or(c.CacheBytes, CacheBytesDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("pebblestore: Config.Dir is required")
	case c.Retention < 0:
		return errors.New("pebblestore: Config.Retention must not be negative")
	case c.RetentionMaxJobs < 0:
		return errors.New("pebblestore: Config.RetentionMaxJobs must not be negative")
	case c.SyncInterval < 0:
		return errors.New("pebblestore: Config.SyncInterval must not be negative")
	case c.CacheBytes < 0:
		return errors.New("pebblestore: Config.CacheBytes must not be negative")
	case c.DiskReserve < 0:
		return errors.New("pebblestore: Config.DiskReserve must not be negative")
	}
	return nil
}

// Store is the Pebble core.Store. Its methods are safe for concurrent use.
type Store struct {
	cfg       Config
	db        *pebble.DB
	clock     core.Clock
	retention time.Duration
	bucket    time.Duration // width of a finished-count bucket
	log       *slog.Logger
	// syncable are the write options of the writes that need not wait for
	// their fsync (claims, acks, retries, buries, touches, lease expiries).
	syncable *pebble.WriteOptions
	// attempt is where jobLite puts a job's History (under mu).
	attempt [1]core.Attempt
	// reserve is the disk's ballast, and whether the disk is full.
	reserve *diskReserve

	// ops is held (read) by every call while it runs, so that Close
	// closes the database only once none uses it.
	ops       sync.RWMutex
	mu        sync.Mutex
	closed    bool
	done      chan struct{}
	x         *index
	rates     core.Buckets // rate limits, in memory: a restart fills them
	revision  uint64       // the last record revision given; 0 until read
	topics    map[string]*topic
	topicList []*topic // by number, as slots name them
	// counts are the finished counts changed since the last write, by
	// key: the next write writes each once (0 deletes it), however many
	// jobs of a batch changed it, so that every change of a count reaches
	// the disk with the write of the jobs that made it.
	counts map[string]int64
	// finishSeq is the number of the last entry of the record of finished
	// jobs (finished.go).
	finishSeq uint64
	// newestFinished is the greatest id of the form core.NewID gives
	// that a finished job kept may have (retention.go).
	newestFinished string

	// unsynced wakes the background sync after a write that did not wait
	// for its own.
	unsynced chan struct{}
	// pacer paces the write-ahead log's fsyncs.
	pacer  *syncPacer
	notify core.Notifier

	background sync.WaitGroup
}

// topic holds one topic's pause and schedule.
type topic struct {
	name      string
	num       uint32
	paused    bool // claims take nothing (SetTopicPaused)
	scheduled heap // by run_at
	ready     heap // by run_at
	reserved  heap // by lease expiry
	dead      int64
	finished  map[int64]*[2]int64 // bucket -> done, cancelled
	keyLimits                     // per-key bound of claims (keys.go)
	// told is the earliest due time (Unix ms) the last empty take
	// answered: a change that makes one earlier notifies.
	told int64
}

// Open opens (or creates) the store in cfg.Dir and rebuilds its index:
// it reads the state of every unfinished job, never a body.
func Open(cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cache := pebble.NewCache(cfg.CacheBytes)
	defer cache.Unref()
	pacer := newSyncPacer(time.Now)
	opts := &pebble.Options{
		Cache:              cache,
		MemTableSize:       64 << 20,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{cfg.Logger},
		// Jobs pushed one per request at a steady rate would otherwise
		// each have an fsync of their own, whose kernel time costs more
		// CPU than the rest of the push (a third of delayq's CPU at 1 000
		// pushes/s): a short wait before each fsync lets them share.
		WALMinSyncInterval: pacer.interval,
	}
	// Flushes, compactions and log rotations, logged at debug: the
	// moments a latency spike can be matched with. A stalled write or a
	// slow disk is worth a warning.
	events := pebble.MakeLoggingEventListener(pebbleLogger{cfg.Logger})
	events.WriteStallBegin = func(info pebble.WriteStallBeginInfo) {
		cfg.Logger.Warn("pebblestore: writes stalled", "reason", info.Reason)
	}
	events.DiskSlow = func(info pebble.DiskSlowInfo) {
		cfg.Logger.Warn("pebblestore: slow disk", "op", info.String())
	}
	opts.EventListener = &events
	// Most reads are of one key that may be absent (a job's last error, a
	// finished job of an id being put): bloom filters answer those without
	// reading the tables' blocks.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Jobs are the users' data: only the service's user reads them.
	// Pebble would make the directory world-readable.
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("pebblestore: %w", err)
	}
	reserve, err := openReserve(cfg.Dir, cfg.DiskReserve, cfg.Logger)
	if err != nil {
		return nil, err
	}
	opts.FS = vfs.OnDiskFull(vfs.Default, reserve.onDiskFull)
	opts.MemTableSize = reserve.memTableSize(opts.MemTableSize)
	if err := reserve.checkReplay(); err != nil {
		return nil, err
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if errors.Is(err, syscall.EWOULDBLOCK) || (err != nil && strings.Contains(err.Error(), "lock held")) {
		return nil, fmt.Errorf("pebblestore: open %s: another process holds it (one delayq per data directory): %w", cfg.Dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", cfg.Dir, err)
	}
	s := &Store{
		cfg:       cfg,
		db:        db,
		clock:     cfg.Clock,
		retention: cfg.Retention,
		bucket:    max(cfg.Retention/64, time.Millisecond),
		log:       cfg.Logger,
		syncable:  pebble.NoSync,
		reserve:   reserve,
		done:      make(chan struct{}),
		x:         newIndex(),
		topics:    make(map[string]*topic),
		counts:    make(map[string]int64),
		unsynced:  make(chan struct{}, 1),
		pacer:     pacer,
	}
	if cfg.SyncAlways {
		s.syncable = pebble.Sync
	}
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.loadFinishLog(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.loadNewestFinished(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.background.Add(3)
	go s.housekeep()
	go s.syncBehind()
	go s.watchDisk()
	return s, nil
}

func (s *Store) now() time.Time { return s.clock.Now().UTC() }

// topicFor returns the topic named name, made if needed. Topics are never
// dropped while the store is open, so that slots may name them by number.
func (s *Store) topicFor(name string) *topic {
	tp := s.topics[name]
	if tp == nil {
		tp = &topic{
			name:     name,
			num:      uint32(len(s.topicList)),
			ready:    heap{byPriority: true},
			finished: make(map[int64]*[2]int64),
			told:     math.MaxInt64,
		}
		s.topics[name] = tp
		s.topicList = append(s.topicList, tp)
	}
	return tp
}

// write applies b with opts while s.mu is held, so that the order of
// writes in the log is the order of the index's changes. It returns the
// function that waits for the write's sync, to be called after s.mu is
// released: concurrent callers share fsyncs (group commit).
func (s *Store) write(b *pebble.Batch, opts *pebble.WriteOptions) (wait func() error) {
	for k, n := range s.counts {
		if n == 0 {
			_ = b.Delete([]byte(k), nil)
		} else {
			_ = b.Set([]byte(k), binary.AppendVarint(nil, n), nil)
		}
	}
	clear(s.counts)
	if b.Empty() {
		_ = b.Close()
		return func() error { return nil }
	}
	if !opts.Sync {
		err := s.db.Apply(b, opts)
		_ = b.Close()
		select {
		case s.unsynced <- struct{}{}:
		default:
		}
		return func() error { return wrap(err) }
	}
	if err := s.db.ApplyNoSyncWait(b, opts); err != nil {
		_ = b.Close()
		return func() error { return wrap(err) }
	}
	s.pacer.waited()
	return func() error {
		err := b.SyncWait()
		_ = b.Close()
		return wrap(err)
	}
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pebble.ErrClosed) {
		return core.ErrClosed
	}
	if isDiskFull(err) {
		// The reserve is spent (or there is none): the write is lost.
		return fmt.Errorf("pebblestore: %w: %w", core.ErrStorageFull, err)
	}
	return fmt.Errorf("pebblestore: %w: %w", core.ErrUnavailable, err)
}

// jobLite returns slot i as a job without the parts kept only on disk
// (body, key, trace context, times, last error), for the rules of
// core.Job to apply to.
func (s *Store) jobLite(i uint32) core.Job {
	sl := &s.x.slots[i]
	j := core.Job{
		Topic:       s.topicList[sl.topic].name,
		RunAt:       time.UnixMilli(sl.runAt).UTC(),
		TTR:         time.Duration(sl.ttrMs) * time.Millisecond,
		MaxAttempts: int(sl.maxAtt),
		Attempt:     int(sl.attempt),
		State:       codeStates[sl.state],
		Priority:    int(sl.prio),
	}
	// History is s.attempt, so that the rules of core.Job start or end an
	// attempt without an allocation: only the attempt in progress of a
	// reserved job, which keepAttempt appends to the ended ones on disk
	// once it ended. The caller holds s.mu and keeps j no longer.
	j.History = s.attempt[:0:1]
	if j.State == core.StateReserved {
		d := s.x.leases[i]
		j.Lease = d.token.String()
		j.LeaseExpiresAt = time.UnixMilli(sl.due).UTC()
		s.attempt[0] = core.Attempt{Attempt: j.Attempt, StartedAt: time.UnixMilli(d.start).UTC(), Via: codeVias[d.via],
			Instance: d.instance, Consumer: d.consumer}
		j.History = s.attempt[:1:1]
	}
	return j
}

// setLite copies j's state back into slot i; the caller moves the slot
// between heaps.
func (s *Store) setLite(i uint32, j *core.Job) {
	sl := &s.x.slots[i]
	sl.runAt = j.RunAt.UnixMilli()
	sl.attempt = uint16(j.Attempt)
	sl.state = stateCodes[j.State]
	if j.State == core.StateReserved {
		d := delivery{}
		d.token, _ = parseLease(j.Lease)
		if n := len(j.History); n > 0 && j.History[n-1].Running() {
			a := &j.History[n-1]
			d.start, d.via, d.instance, d.consumer = a.StartedAt.UnixMilli(), viaCodes[a.Via], a.Instance, a.Consumer
		}
		s.x.leases[i] = d
	} else {
		delete(s.x.leases, i)
	}
}

// keepAttempt adds to b the attempt that j's change just ended, the last
// of j.History if it ended, appended to the h key of slot i (id): the
// newest within core's bounds kept (core.TrimHistory). It reads the h key
// only when the slot has one.
func (s *Store) keepAttempt(b *pebble.Batch, i uint32, id string, j *core.Job) {
	n := len(j.History)
	if n == 0 || j.History[n-1].Running() {
		return
	}
	h := j.History[n-1:]
	if s.x.slots[i].has(hasHistory) {
		raw, err := s.get(idKey(prefixHistory, id))
		var before []core.Attempt
		if err == nil {
			before, err = decodeHistory(raw)
		}
		if err != nil {
			// The attempts before are lost, the job's state is not.
			s.log.Warn("pebblestore: read of a job's history failed", "id", id, "err", err)
		}
		h = core.TrimHistory(append(before, j.History[n-1]))
	}
	_ = b.Set(idKey(prefixHistory, id), encodeHistory(h), nil)
	s.x.slots[i].set(hasHistory, true)
}

// enqueue puts slot i in its topic's scheduled or ready heap by its state.
func (s *Store) enqueue(tp *topic, i uint32) {
	sl := &s.x.slots[i]
	if codeStates[sl.state] == core.StateScheduled {
		tp.scheduled.push(s.x, i, sl.runAt)
	} else {
		tp.ready.push(s.x, i, sl.runAt)
	}
}

// unlink takes slot i out of the heap its state puts it in.
func (s *Store) unlink(tp *topic, i uint32) {
	switch codeStates[s.x.slots[i].state] {
	case core.StateScheduled:
		tp.scheduled.remove(s.x, i)
	case core.StateReady:
		if s.x.slots[i].has(parked) {
			s.unpark(tp, i)
		} else {
			tp.ready.remove(s.x, i)
		}
	case core.StateReserved:
		tp.reserved.remove(s.x, i)
		s.release(tp, i)
	case core.StateDead:
		tp.dead--
	}
}

// metaOfSlot returns the meta of slot i, stamped updated at now.
func (s *Store) metaOfSlot(i uint32, now time.Time) meta {
	sl := &s.x.slots[i]
	m := meta{
		topic:       s.topicList[sl.topic].name,
		state:       codeStates[sl.state],
		runAt:       sl.runAt,
		attempt:     int(sl.attempt),
		maxAttempts: int(sl.maxAtt),
		ttr:         time.Duration(sl.ttrMs) * time.Millisecond,
		updatedAt:   now.UnixNano(),
		priority:    int(sl.prio),
		retention:   s.x.retention[i],
	}
	if m.state == core.StateReserved {
		m.leaseExp = sl.due
		d := s.x.leases[i]
		m.lease, m.started, m.via, m.instance, m.consumer = d.token, d.start, d.via, d.instance, d.consumer
	}
	return m
}

// promote moves tp's scheduled jobs whose run_at has come to ready, and
// ends the leases that expired (core.Job.ExpireLease), writing those: the
// job is due again, or dead when it used its last attempt.
func (s *Store) promote(tp *topic, now time.Time) {
	n := now.UnixMilli()
	for tp.scheduled.Len() > 0 && s.x.slots[tp.scheduled.peek()].due <= n {
		i := tp.scheduled.pop(s.x)
		s.x.slots[i].state = stateCodes[core.StateReady]
		tp.ready.push(s.x, i, s.x.slots[i].runAt)
	}
	if tp.reserved.Len() == 0 || s.x.slots[tp.reserved.peek()].due > n {
		return
	}
	b := s.db.NewBatch()
	for tp.reserved.Len() > 0 && s.x.slots[tp.reserved.peek()].due <= n {
		i := tp.reserved.pop(s.x)
		s.release(tp, i)
		j := s.jobLite(i)
		j.ExpireLease()
		s.setLite(i, &j)
		m := s.metaOfSlot(i, j.UpdatedAt)
		id := s.x.id(i)
		_ = b.Set(idKey(prefixMeta, id), m.encode(), nil)
		_ = b.Set(idKey(prefixError, id), []byte(core.LeaseExpired), nil)
		s.x.slots[i].set(hasErr, true)
		s.keepAttempt(b, i, id, &j)
		if j.State == core.StateDead {
			tp.dead++
			_ = b.Set(deadKey(tp.name, j.UpdatedAt, id), nil, nil)
			s.logFinish(b, i, id, &j, now)
			continue
		}
		tp.ready.push(s.x, i, s.x.slots[i].runAt)
	}
	// Losing this write costs nothing: a restart reads the expired lease
	// as of its time again (core.Job.AsOf).
	if err := s.write(b, s.syncable)(); err != nil && !errors.Is(err, core.ErrClosed) {
		s.log.Warn("pebblestore: write of expired leases failed", "topic", tp.name, "err", err)
	}
}

// changed runs after tp changed: it notifies the claims of tp when jobs
// are ready to take, or the next due time is earlier than the last empty
// take answered.
func (s *Store) changed(tp *topic) {
	if (tp.ready.Len() > 0 || tp.ring.Len() > 0) && !tp.paused || s.nextDue(tp) < tp.told {
		tp.told = math.MinInt64 // until a take answers again
		s.notify.Notify(tp.name)
	}
}

// nextDue returns the earliest run_at of tp's scheduled jobs, lease
// expiry of its reserved ones or token of a key whose jobs wait for one
// (Unix ms, a token's rounded up), math.MaxInt64 for none.
func (s *Store) nextDue(tp *topic) int64 {
	next := int64(math.MaxInt64)
	for _, h := range []*heap{&tp.scheduled, &tp.reserved} {
		if h.Len() > 0 {
			next = min(next, s.x.slots[h.peek()].due)
		}
	}
	if at := tp.rates.Next(); !at.IsZero() {
		next = min(next, at.Add(time.Millisecond-1).UnixMilli())
	}
	return next
}

// PutJobs implements core.Store. The jobs are written in one batch, which
// is synced before PutJobs returns. Errors: ErrClosed, ErrStorageFull
// while the disk is full, ErrUnavailable.
func (s *Store) PutJobs(_ context.Context, params *core.PutJobsParams) ([]core.PutResult, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if params == nil {
		return nil, core.Invalid("", "pebblestore: put jobs: no params")
	}
	if err := s.reserve.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, core.ErrClosed
	}
	now := s.now()
	pb := &putBatch{Batch: s.db.NewBatch(), jobs: make(map[string]*core.Job, len(params.Jobs))}
	b := pb.Batch
	results := make([]core.PutResult, len(params.Jobs))
	touched := make(map[*topic]struct{})
	var err error
	for k, j := range params.Jobs {
		if results[k], err = s.put(pb, j, params.Replace && !params.IfAbsent, params.IfAbsent, now, touched); err != nil {
			break
		}
	}
	if err != nil {
		// An index changed for a batch that is not written: the index is
		// no longer the disk's. Only a failed read gets here; give up.
		_ = b.Close()
		s.mu.Unlock()
		return nil, err
	}
	if err := s.commitPut(b, now, touched); err != nil {
		return nil, err
	}
	return results, nil
}

// commitPut writes a batch of puts (synced), tells the topics it touched,
// releases mu, which the caller holds, and waits for the write.
func (s *Store) commitPut(b *pebble.Batch, now time.Time, touched map[*topic]struct{}) error {
	wait := s.write(b, pebble.Sync)
	for tp := range touched {
		s.changed(tp)
	}
	s.mu.Unlock()
	return wait()
}

// putBatch is the batch of a PutJobs with the jobs it holds, which a
// later job of the same id finds there rather than on disk.
type putBatch struct {
	*pebble.Batch
	jobs map[string]*core.Job
}

// read returns job id as of now from the batch, else from disk.
func (pb *putBatch) read(s *Store, id string, now time.Time) (*core.Job, error) {
	if j, ok := pb.jobs[id]; ok {
		j = j.Clone()
		j.AsOf(now)
		return j, nil
	}
	return s.read(id, false)
}

// put adds one job to the batch and to the index, with replace or
// (absent) refusing any kept job of its id, finished ones too.
func (s *Store) put(pb *putBatch, in *core.Job, replace, absent bool, now time.Time, touched map[*topic]struct{}) (core.PutResult, error) {
	b := pb.Batch
	createdAt := now
	var res core.PutResult
	var replaced *core.Job
	if i := s.x.lookup(in.ID); i != 0 {
		old := s.topicList[s.x.slots[i].topic]
		s.promote(old, now)
		prev, err := pb.read(s, in.ID, now)
		if err != nil {
			return res, err
		}
		switch {
		case !replace || absent:
			return core.PutResult{Err: core.ExistsConflict(in.ID, prev)}, nil
		case prev.State == core.StateReserved:
			return core.PutResult{Err: core.ReservedConflict(in.ID, prev)}, nil
		}
		res.Replaced = true
		createdAt, replaced = prev.CreatedAt, prev
		if prev.Key != "" {
			_ = b.Delete(keyIndexKey(prev.Topic, prev.Key, in.ID), nil)
		}
		if prev.State == core.StateDead {
			_ = b.Delete(deadKey(old.name, prev.UpdatedAt, in.ID), nil)
		}
		if s.x.slots[i].has(hasErr) {
			_ = b.Delete(idKey(prefixError, in.ID), nil)
		}
		if s.x.slots[i].has(hasHistory) {
			_ = b.Delete(idKey(prefixHistory, in.ID), nil)
		}
		s.unlink(old, i)
		s.x.remove(i)
		touched[old] = struct{}{}
	} else {
		if absent {
			// Finished jobs are not in the index: read from disk, as of
			// now (one past its retention is gone).
			prev, err := s.read(in.ID, true)
			if err == nil {
				return core.PutResult{Err: core.ExistsConflict(in.ID, prev)}, nil
			}
			if !errors.Is(err, core.ErrNotFound) {
				return res, err
			}
		}
		if err := s.forgetFinished(b, in.ID); err != nil {
			return res, err
		}
	}
	j := in.Clone()
	j.Reset(createdAt, now)
	if replaced != nil {
		j.Replaces(replaced)
	}
	r, err := recordOf(j)
	if err != nil {
		return res, err
	}
	tp := s.topicFor(j.Topic)
	i := s.x.add(j.ID)
	sl := &s.x.slots[i]
	sl.setFixed(tp, j.MaxAttempts, j.TTR, j.Priority)
	sl.set(hasKey, j.Key != "")
	sl.set(hasThen, j.Then != nil)
	sl.set(thenUnknown, false)
	s.x.setRetention(i, j.Retention)
	s.setLite(i, j)
	s.enqueue(tp, i)
	touched[tp] = struct{}{}
	pb.jobs[j.ID] = j
	writeJob(b, j, &r)
	return res, nil
}

// writeJob adds to b the keys of a job a put or an import stores: its
// meta, its record r (recordOf) and, when it has a business key, its k
// key.
func writeJob(b *pebble.Batch, j *core.Job, r *record) {
	m := metaOf(j)
	_ = b.Set(idKey(prefixMeta, j.ID), m.encode(), nil)
	_ = b.Set(idKey(prefixRecord, j.ID), r.encode(), nil)
	if j.Key != "" {
		_ = b.Set(keyIndexKey(j.Topic, j.Key, j.ID), nil, nil)
	}
}

// read returns the job id from disk, as of now; finished jobs only when
// finished is set (and within retention). Errors: ErrNotFound,
// ErrUnavailable.
func (s *Store) read(id string, finished bool) (*core.Job, error) {
	// One view of the job's keys: a put over a finished job deletes its x
	// key and writes its m key, and a replace rewrites m and r, between
	// two gets of the DB. Its time is taken first: a stall between the
	// snapshot and a later time could show a lease the snapshot has as run
	// out though an ack ended it meanwhile.
	now := s.now()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	raw, err := getFrom(snap, idKey(prefixMeta, id))
	if raw == nil && err == nil && finished {
		raw, err = getFrom(snap, idKey(prefixFinished, id))
	}
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("pebblestore: job %q: %w", id, core.ErrNotFound)
	}
	m, err := decodeMeta(raw)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: job %q: %w", id, err)
	}
	if m.state.Finished() && !now.Before(s.keptFrom(&m).Add(s.retention)) {
		return nil, fmt.Errorf("pebblestore: job %q: %w", id, core.ErrNotFound)
	}
	j, err := complete(snap, id, &m, true, true)
	if err != nil {
		return nil, err
	}
	j.AsOf(now)
	return j, nil
}

// complete reads from r the parts of a job that only the disk has; its
// last error only when withError is set and its ended attempts only when
// withHist is (the index knows when there are none).
func complete(r pebble.Reader, id string, m *meta, withError, withHist bool) (*core.Job, error) {
	raw, err := getFrom(r, idKey(prefixRecord, id))
	if err != nil {
		return nil, err
	}
	return completeRecord(r, id, raw, m, withError, withHist)
}

// completeRecord is complete with the job's record, raw, already read (nil
// when there is none).
func completeRecord(r pebble.Reader, id string, raw []byte, m *meta, withError, withHist bool) (*core.Job, error) {
	if raw == nil {
		return nil, fmt.Errorf("pebblestore: job %q: record missing: %w", id, errCorrupt)
	}
	rec, err := decodeRecord(raw)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: job %q: %w", id, err)
	}
	var e []byte
	if withError {
		if e, err = getFrom(r, idKey(prefixError, id)); err != nil {
			return nil, err
		}
	}
	var h []byte
	if withHist {
		if h, err = getFrom(r, idKey(prefixHistory, id)); err != nil {
			return nil, err
		}
	}
	j, err := job(id, m, &rec, string(e))
	if err != nil {
		return nil, err
	}
	return j, withHistory(j, m, h)
}

// get returns a copy of key's value, nil when there is none.
func (s *Store) get(key []byte) ([]byte, error) { return getFrom(s.db, key) }

// getFrom returns a copy of key's value in r, nil when there is none.
func getFrom(r pebble.Reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(err)
	}
	out := append(make([]byte, 0, len(v)), v...)
	_ = closer.Close()
	return out, nil
}

// GetJob implements core.Store. Errors: ErrNotFound, ErrClosed,
// ErrUnavailable.
func (s *Store) GetJob(_ context.Context, id string) (*core.Job, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	return s.read(id, true)
}

// FindJobs implements core.Store: it reads the topic's k keys of the key
// after params.After, and each job as GetJob does. Errors:
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) FindJobs(_ context.Context, params *core.FindJobsParams) ([]*core.Job, error) {
	if err := core.CheckFind(params); err != nil {
		return nil, err
	}
	s.ops.RLock()
	defer s.ops.RUnlock()
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	prefix := keyPrefix(params.Topic, params.Key)
	lower := prefix
	if params.After != "" {
		// The least key above the one of After.
		lower = append(keyIndexKey(params.Topic, params.Key, params.After), 0)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, wrap(err)
	}
	jobs := []*core.Job{}
	for ok := it.First(); ok && len(jobs) < params.Limit; ok = it.Next() {
		id := string(it.Key()[len(prefix):])
		j, err := s.read(id, true)
		switch {
		case isNotFound(err):
			// Finished past retention, not yet pruned.
		case err != nil:
			_ = it.Close()
			return nil, err
		case j.Topic == params.Topic && j.Key == params.Key:
			// (Else a put moved it between the two reads.)
			jobs = append(jobs, j)
		}
	}
	return jobs, wrap(it.Close())
}

// prefixEnd returns the least key above every key that starts with prefix,
// which does not end in 0xff.
func prefixEnd(prefix []byte) []byte {
	end := slices.Clone(prefix)
	end[len(end)-1]++
	return end
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// CancelJob implements core.Store; the cancel is synced before it returns.
// Errors: ErrNotFound (unknown or finished), *core.ConflictError
// (ErrConflict) while reserved without params.Running, ErrClosed,
// ErrUnavailable.
func (s *Store) CancelJob(_ context.Context, params *core.CancelJobParams) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	id := params.ID
	missing := func() error { return fmt.Errorf("pebblestore: cancel %q: %w", id, core.ErrNotFound) }
	return s.change(id, missing, func(b *pebble.Batch, tp *topic, i uint32, cur *core.Job, now time.Time) error {
		switch cur.State {
		case core.StateReserved:
			if !params.Running {
				return core.ReservedConflict(id, cur)
			}
			s.notify.Freed(tp.name)
		case core.StateDead:
			_ = b.Delete(deadKey(tp.name, cur.UpdatedAt, id), nil)
		}
		s.finish(b, tp, i, core.StateCancelled, now)
		return nil
	})
}

// ExpireJob implements core.Store; the change is synced before it
// returns. Errors: ErrNotFound (unknown or finished), *core.ConflictError
// (ErrConflict) when reserved, dead or not expired, ErrClosed,
// ErrUnavailable.
func (s *Store) ExpireJob(_ context.Context, id string) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	missing := func() error { return fmt.Errorf("pebblestore: expire %q: %w", id, core.ErrNotFound) }
	return s.change(id, missing, func(b *pebble.Batch, tp *topic, i uint32, cur *core.Job, now time.Time) error {
		if !cur.CanExpire(now) {
			return core.NotExpiredConflict(id, cur)
		}
		s.unlink(tp, i)
		j := s.jobLite(i)
		j.Bury(core.JobExpired, now)
		s.setLite(i, &j)
		tp.dead++
		m := s.metaOfSlot(i, now)
		_ = b.Set(idKey(prefixMeta, id), m.encode(), nil)
		s.setError(b, i, id, j.LastError)
		_ = b.Set(deadKey(tp.name, now, id), nil, nil)
		s.logFinish(b, i, id, &j, now)
		return nil
	})
}

// change runs an administrative change of the unfinished job id under
// s.mu: f checks the job as of now (read from disk) and adds its writes to
// b, which are synced before change returns; missing answers for an id the
// index does not hold.
func (s *Store) change(id string, missing func() error, f func(b *pebble.Batch, tp *topic, i uint32, cur *core.Job, now time.Time) error) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	i := s.x.lookup(id)
	if i == 0 {
		s.mu.Unlock()
		return missing()
	}
	now := s.now()
	tp := s.topicList[s.x.slots[i].topic]
	s.promote(tp, now)
	cur, err := s.read(id, false)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	b := s.db.NewBatch()
	if err := f(b, tp, i, cur, now); err != nil {
		_ = b.Close()
		s.mu.Unlock()
		return err
	}
	wait := s.write(b, pebble.Sync)
	s.changed(tp)
	s.mu.Unlock()
	return wait()
}

// finish makes slot i done or cancelled: it leaves the index, its state
// moves to the finished keys, and its topic counts it.
func (s *Store) finish(b *pebble.Batch, tp *topic, i uint32, state core.State, now time.Time) core.SettleResult {
	s.unlink(tp, i)
	j := s.jobLite(i)
	j.Finish(state, now)
	s.setLite(i, &j)
	m := s.metaOfSlot(i, now)
	id := s.x.id(i)
	if n := len(j.History); n > 0 && !j.History[n-1].Running() && !s.x.slots[i].has(hasHistory) {
		// Its only attempt: kept in x, which the finish writes anyway.
		m.ended = encodeHistory(j.History[n-1:])
	} else {
		s.keepAttempt(b, i, id, &j)
	}
	_ = b.Delete(idKey(prefixMeta, id), nil)
	_ = b.Set(idKey(prefixFinished, id), m.encode(), nil)
	if id > s.newestFinished && generatedID(id) {
		s.newestFinished = strings.Clone(id)
	}
	kept := s.keptFrom(&m)
	_ = b.Set(expiryKey(kept, id), nil, nil)
	_ = b.Set(finishedKey(tp.name, state, m.updatedAt, id), nil, nil)
	s.logFinish(b, i, id, &j, now)
	s.countFinished(tp, state, kept, 1)
	s.x.remove(i)
	return j.Settled()
}

// ClaimJobs implements core.Store: core.Claim over TakeJobs. Errors:
// ErrInvalidArgument when params.Max < 1, ErrClosed (also for a claim
// waiting when the store closes), ErrUnavailable.
func (s *Store) ClaimJobs(ctx context.Context, params *core.ClaimJobsParams) ([]*core.Job, error) {
	return core.Claim(ctx, s, s.clock, params)
}

// TakeJobs implements core.ClaimSource. Errors: ErrClosed,
// ErrUnavailable.
func (s *Store) TakeJobs(_ context.Context, params *core.ClaimJobsParams) (core.Taken, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.Taken{}, core.ErrClosed
	}
	now := s.now()
	tp := s.topicFor(params.Topic)
	s.promote(tp, now)
	room := 0
	if !tp.paused {
		room = params.Room(tp.reserved.Len())
	}
	if tp.rates.Set(params.KeyRate) {
		s.unparkAll(tp) // to be looked at under the new rate
	}
	s.refill(tp, now) // even with no room: the refill times passed are not the next
	var (
		taken []claimed
		wait  func() error
		err   error
	)
	if min(room, tp.ready.Len()+tp.parkedN) > 0 {
		taken, wait, err = s.take(tp, room, params, now)
	}
	if len(taken) == 0 {
		t := core.Taken{Jobs: []*core.Job{}, Full: !tp.paused && room == 0}
		if tp.told = s.nextDue(tp); tp.told != math.MaxInt64 {
			t.Next = time.UnixMilli(tp.told)
		}
		s.mu.Unlock()
		if wait != nil {
			err = cmp.Or(wait(), err)
		}
		if err != nil {
			return core.Taken{}, err
		}
		return t, nil
	}
	s.mu.Unlock()
	if err := wait(); err != nil {
		return core.Taken{}, err
	}
	jobs, err := s.completeAll(taken)
	return core.Taken{Jobs: jobs}, err
}

// ClaimNotifier implements core.ClaimSource.
func (s *Store) ClaimNotifier() *core.Notifier { return &s.notify }

// take reserves up to max ready jobs of tp for claim p (core.Job.Reserve)
// and writes the reservations; the returned function waits for the write.
// With p.KeyConcurrency, a job whose key has that many reserved is parked
// instead, and so is one whose key has no token of p.KeyRate; with
// p.Fair, the jobs are taken one of each key in turn (keys.go). A failed
// read of a key ends the take with what it took and the error.
func (s *Store) take(tp *topic, max int, p *core.ClaimJobsParams, now time.Time) ([]claimed, func() error, error) {
	keyLimit, fair := p.KeyConcurrency, p.Fair
	err := s.limitKeys(tp, keyLimit, fair)
	if err == nil && fair {
		err = s.ringAll(tp, keyLimit)
	}
	taken := make([]claimed, 0, min(max, tp.ready.Len()+tp.parkedN))
	b := s.db.NewBatch()
	for err == nil && len(taken) < max {
		var i uint32
		if fair {
			var ok bool
			if i, ok = s.nextFair(tp, keyLimit, now); !ok {
				break
			}
		} else {
			if tp.ready.Len() == 0 {
				break
			}
			i = tp.ready.pop(s.x)
			var ok bool
			if ok, err = s.hold(tp, i, keyLimit, now); !ok {
				continue
			}
		}
		j := s.jobLite(i)
		j.Reserve(newLease().String(), p, now)
		s.setLite(i, &j)
		tp.reserved.push(s.x, i, j.LeaseExpiresAt.UnixMilli())
		m := s.metaOfSlot(i, now)
		id := strings.Clone(s.x.id(i))
		_ = b.Set(idKey(prefixMeta, id), m.encode(), nil)
		sl := &s.x.slots[i]
		taken = append(taken, claimed{id: id, meta: m, hasErr: sl.has(hasErr), hasHistory: sl.has(hasHistory)})
	}
	return taken, s.write(b, s.syncable), err
}

// claimed is a job take reserved, to complete from the disk.
type claimed struct {
	id         string
	meta       meta
	hasErr     bool
	hasHistory bool
}

// completeAll reads the disk's parts of claimed jobs. A reserved job's
// record and error do not change while its lease holds. The records are
// read in id order through one iterator: jobs put together have ids in
// order and records side by side, which the iterator reaches by stepping
// from one to the next, where a Get of each would search from the top.
func (s *Store) completeAll(taken []claimed) ([]*core.Job, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRecord}, UpperBound: []byte{prefixRecord + 1}})
	if err != nil {
		return nil, wrap(err)
	}
	defer it.Close()
	order := make([]int, len(taken))
	for k := range order {
		order[k] = k
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(taken[a].id, taken[b].id) })
	jobs := make([]*core.Job, len(taken))
	for _, k := range order {
		c := &taken[k]
		key := idKey(prefixRecord, c.id)
		var raw []byte
		if it.SeekGE(key) && bytes.Equal(it.Key(), key) {
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, wrap(err)
			}
			raw = bytes.Clone(v)
		} else if err := it.Error(); err != nil {
			return nil, wrap(err)
		}
		j, err := completeRecord(s.db, c.id, raw, &c.meta, c.hasErr, c.hasHistory)
		if err != nil {
			return nil, err
		}
		jobs[k] = j
	}
	return jobs, nil
}

// leased returns the slot of a reserved job whose lease is lease and has
// not expired by now. Errors: ErrNotFound, ErrLeaseLost.
func (s *Store) leased(id, token string, now time.Time) (uint32, *topic, error) {
	i := s.x.lookup(id)
	if i == 0 {
		if _, err := s.read(id, true); err != nil {
			return 0, nil, err
		}
		return 0, nil, fmt.Errorf("pebblestore: job %q: %w", id, core.ErrLeaseLost)
	}
	tp := s.topicList[s.x.slots[i].topic]
	s.promote(tp, now)
	l, ok := parseLease(token)
	if !ok || s.x.state(i) != core.StateReserved || s.x.leases[i].token != l {
		return 0, nil, fmt.Errorf("pebblestore: job %q: %w", id, core.ErrLeaseLost)
	}
	return i, tp, nil
}

// settle runs a settling call on the leased job id: f changes it and adds
// its writes to b, under s.mu.
func (s *Store) settle(id, lease string, f settler) (core.SettleResult, error) {
	res, err := s.settleAll([]core.AckJobParams{{ID: id, Lease: lease}}, f)
	if err != nil {
		return core.SettleResult{}, err
	}
	return res[0].Settled, res[0].Err
}

// settler changes the leased job in slot i of tp and adds its writes to b.
type settler func(b *pebble.Batch, tp *topic, i uint32, now time.Time) core.SettleResult

// settleAll runs f on each leased job of items, in order, under one hold
// of s.mu and in one write; an item whose lease does not hold gets its
// error. Errors: ErrClosed, ErrUnavailable.
func (s *Store) settleAll(items []core.AckJobParams, f settler) ([]core.AckResult, error) {
	res := make([]core.AckResult, len(items))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, core.ErrClosed
	}
	now := s.now()
	b := s.db.NewBatch()
	touched := make(map[*topic]struct{}, 1)
	// An id settled in this call may have left the index, its change not
	// yet on disk for leased to read: a second item of it has lost its
	// lease, as it would in a later call.
	settled := make(map[string]struct{}, len(items))
	for k := range items {
		it := &items[k]
		if _, ok := settled[it.ID]; ok {
			res[k].Err = fmt.Errorf("pebblestore: job %q: %w", it.ID, core.ErrLeaseLost)
			continue
		}
		i, tp, err := s.leased(it.ID, it.Lease, now)
		if err != nil {
			res[k].Err = err
			continue
		}
		res[k].Settled = f(b, tp, i, now)
		settled[it.ID] = struct{}{}
		touched[tp] = struct{}{}
	}
	wait := s.write(b, s.syncable)
	for tp := range touched {
		s.changed(tp)
		s.notify.Freed(tp.name)
	}
	s.mu.Unlock()
	if err := wait(); err != nil {
		return nil, err
	}
	return res, nil
}

// AckJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost,
// ErrClosed, ErrUnavailable.
func (s *Store) AckJob(_ context.Context, params *core.AckJobParams) (core.SettleResult, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if params == nil {
		return core.SettleResult{}, core.Invalid("", "pebblestore: ack: no params")
	}
	return s.settle(params.ID, params.Lease, s.ack)
}

// AckJobs implements core.Store: the acks under one hold of the lock, in
// one write. Errors: ErrClosed, ErrUnavailable.
func (s *Store) AckJobs(_ context.Context, params *core.AckJobsParams) ([]core.AckResult, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if params == nil {
		return nil, core.Invalid("", "pebblestore: ack: no params")
	}
	return s.settleAll(params.Acks, s.ack)
}

// ack finishes a leased job as done.
func (s *Store) ack(b *pebble.Batch, tp *topic, i uint32, now time.Time) core.SettleResult {
	return s.finish(b, tp, i, core.StateDone, now)
}

// RetryJob implements core.Store. A zero params.RunAt means now. Errors:
// ErrNotFound, ErrLeaseLost, ErrClosed, ErrUnavailable.
func (s *Store) RetryJob(_ context.Context, params *core.RetryJobParams) (core.SettleResult, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if params == nil {
		return core.SettleResult{}, core.Invalid("", "pebblestore: retry: no params")
	}
	return s.settle(params.ID, params.Lease, func(b *pebble.Batch, tp *topic, i uint32, now time.Time) core.SettleResult {
		s.unlink(tp, i)
		j := s.jobLite(i)
		j.RetryFor(params, now)
		s.setLite(i, &j)
		s.enqueue(tp, i)
		id := s.x.id(i)
		m := s.metaOfSlot(i, now)
		_ = b.Set(idKey(prefixMeta, id), m.encode(), nil)
		s.keepAttempt(b, i, id, &j)
		s.setError(b, i, id, j.LastError)
		return j.Settled()
	})
}

// BuryJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost,
// ErrClosed, ErrUnavailable.
func (s *Store) BuryJob(_ context.Context, params *core.BuryJobParams) (core.SettleResult, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if params == nil {
		return core.SettleResult{}, core.Invalid("", "pebblestore: bury: no params")
	}
	return s.settle(params.ID, params.Lease, func(b *pebble.Batch, tp *topic, i uint32, now time.Time) core.SettleResult {
		s.unlink(tp, i)
		j := s.jobLite(i)
		j.Bury(params.Error, now)
		s.setLite(i, &j)
		tp.dead++
		id := s.x.id(i)
		m := s.metaOfSlot(i, now)
		_ = b.Set(idKey(prefixMeta, id), m.encode(), nil)
		s.keepAttempt(b, i, id, &j)
		s.setError(b, i, id, j.LastError)
		_ = b.Set(deadKey(tp.name, now, id), nil, nil)
		s.logFinish(b, i, id, &j, now)
		return j.Settled()
	})
}

// setError writes the last error of slot i, id.
func (s *Store) setError(b *pebble.Batch, i uint32, id, lastError string) {
	s.x.slots[i].set(hasErr, lastError != "")
	if lastError == "" {
		_ = b.Delete(idKey(prefixError, id), nil)
		return
	}
	_ = b.Set(idKey(prefixError, id), []byte(lastError), nil)
}

// TouchJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost,
// ErrClosed, ErrUnavailable.
func (s *Store) TouchJob(_ context.Context, params *core.TouchJobParams) (*core.Job, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if params == nil {
		return nil, core.Invalid("", "pebblestore: touch: no params")
	}
	var (
		m            meta
		errs, hasHst bool
	)
	_, err := s.settle(params.ID, params.Lease, func(b *pebble.Batch, tp *topic, i uint32, now time.Time) core.SettleResult {
		sl := &s.x.slots[i]
		errs, hasHst = sl.has(hasErr), sl.has(hasHistory)
		tp.reserved.fix(s.x, i, now.Add(time.Duration(sl.ttrMs)*time.Millisecond).UnixMilli())
		m = s.metaOfSlot(i, now)
		_ = b.Set(idKey(prefixMeta, params.ID), m.encode(), nil)
		return core.SettleResult{}
	})
	if err != nil {
		return nil, err
	}
	return complete(s.db, params.ID, &m, errs, hasHst)
}

// RequeueJob implements core.Store: the dead job is ready now with a fresh
// attempt count; synced before it returns. Errors: ErrNotFound,
// *core.ConflictError (ErrConflict) when not dead, ErrClosed,
// ErrUnavailable.
func (s *Store) RequeueJob(_ context.Context, id string) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	notDead := func(j *core.Job) error {
		return core.NotDeadConflict(id, j, j.State)
	}
	missing := func() error { // unknown, or finished: a conflict with what it is
		j, err := s.read(id, true)
		if err != nil {
			return err
		}
		return notDead(j)
	}
	return s.change(id, missing, func(b *pebble.Batch, tp *topic, i uint32, cur *core.Job, now time.Time) error {
		if cur.State != core.StateDead {
			return notDead(cur)
		}
		_ = b.Delete(deadKey(tp.name, cur.UpdatedAt, id), nil)
		tp.dead--
		j := s.jobLite(i)
		j.Requeue(now)
		s.setLite(i, &j)
		s.enqueue(tp, i)
		m := s.metaOfSlot(i, now)
		_ = b.Set(idKey(prefixMeta, id), m.encode(), nil)
		// The record, rewritten for its Changes: a requeue is rare.
		cur.Changes = core.AppendChange(cur.Changes, j.Changes[len(j.Changes)-1])
		r, err := recordOf(cur)
		if err != nil {
			return err
		}
		_ = b.Set(idKey(prefixRecord, id), r.encode(), nil)
		return nil
	})
}

// ListDeadJobs implements core.Store, reading the dead index of the topic
// in order of death. Errors: ErrInvalidArgument when params.Limit < 1,
// ErrClosed, ErrUnavailable.
func (s *Store) ListDeadJobs(_ context.Context, params *core.ListDeadJobsParams) ([]*core.Job, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if params == nil || params.Limit < 1 {
		return nil, core.Invalid("limit", "limit must be at least 1")
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	prefix := deadPrefix(params.Topic)
	lower := prefix
	if !params.Since.IsZero() {
		lower = deadKey(params.Topic, params.Since, "")
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, wrap(err)
	}
	defer it.Close()
	jobs := []*core.Job{}
	for ok := it.First(); ok && len(jobs) < params.Limit; ok = it.Next() {
		id := string(it.Key()[len(prefix)+8:])
		j, err := s.read(id, false)
		if errors.Is(err, core.ErrNotFound) {
			continue // requeued or cancelled since the iterator began
		}
		if err != nil {
			return nil, err
		}
		if j.State == core.StateDead {
			jobs = append(jobs, j)
		}
	}
	return jobs, wrap(it.Error())
}

// GetTopicState implements core.Store. Errors: ErrClosed.
func (s *Store) GetTopicState(_ context.Context, name string) (core.TopicState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return core.TopicState{}, core.ErrClosed
	}
	tp := s.topics[name]
	if tp == nil {
		return core.TopicState{Name: name}, nil
	}
	return s.state(tp, s.now()), nil
}

// TakeRate implements core.Store, in memory (core.Buckets). Errors:
// ErrInvalidArgument, ErrClosed.
func (s *Store) TakeRate(_ context.Context, params *core.TakeRateParams) (core.TakeRateResult, error) {
	if s.isClosed() {
		return core.TakeRateResult{}, core.ErrClosed
	}
	return s.rates.Take(params, s.now())
}

// SetTopicPaused implements core.Store. Errors: ErrClosed,
// ErrUnavailable.
func (s *Store) SetTopicPaused(_ context.Context, name string, paused bool) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	b := s.db.NewBatch()
	if paused {
		_ = b.Set(idKey(prefixPaused, name), nil, nil)
	} else {
		_ = b.Delete(idKey(prefixPaused, name), nil)
	}
	tp := s.topicFor(name)
	tp.paused = paused
	s.changed(tp)
	wait := s.write(b, pebble.Sync)
	s.mu.Unlock()
	return wait()
}

// ListTopicStates implements core.Store. Errors: ErrClosed.
func (s *Store) ListTopicStates(context.Context) ([]core.TopicState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	now := s.now()
	states := []core.TopicState{}
	for _, tp := range s.topicList {
		if st := s.state(tp, now); st.Paused || st.Counts != (core.Counts{}) {
			states = append(states, st)
		}
	}
	slices.SortFunc(states, func(a, b core.TopicState) int { return strings.Compare(a.Name, b.Name) })
	return states, nil
}

// state returns tp's pause and counts.
func (s *Store) state(tp *topic, now time.Time) core.TopicState {
	s.promote(tp, now)
	done, cancelled := s.finishedCounts(tp, now)
	return core.TopicState{Name: tp.name, Paused: tp.paused, Counts: core.Counts{
		Scheduled: int64(tp.scheduled.Len()),
		Ready:     int64(tp.ready.Len() + tp.parkedN),
		Reserved:  int64(tp.reserved.Len()),
		Done:      done,
		Dead:      tp.dead,
		Cancelled: cancelled,
	}}
}

// Ping implements core.Store. Errors: ErrClosed, ErrStorageFull while
// the disk is full (the store still serves all but puts).
func (s *Store) Ping(context.Context) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	return s.reserve.Err()
}

// Close implements core.Store: waiting claims end, the log is synced and
// the database closed. Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.notify.Close()
	s.mu.Unlock()
	s.background.Wait()
	s.ops.Lock() // every call in flight has returned
	defer s.ops.Unlock()
	size := binary.AppendUvarint(nil, uint64(s.x.used))
	size = binary.AppendUvarint(size, uint64(len(s.x.arena)-s.x.garbage))
	err := s.db.Set([]byte(sizeKey), size, pebble.Sync)
	return errors.Join(err, s.db.Close())
}

// syncBehind runs until Close: it syncs the log as soon as a write did not
// wait for its own sync, one sync at a time, so that such writes reach the
// disk within about one fsync of their answer while none waits for it; and
// at least every SyncInterval. Pebble keeps a write without sync in a
// buffer of the process until a sync or a full block, so without this a
// kill -9 could lose the claims of the last seconds.
func (s *Store) syncBehind() {
	defer s.background.Done()
	tick := s.clock.NewTicker(s.cfg.SyncInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.unsynced:
		case <-tick.Chan():
		}
		if err := s.db.LogData(nil, pebble.Sync); err != nil && !errors.Is(err, pebble.ErrClosed) {
			s.log.Warn("pebblestore: background sync failed", "err", err)
		}
	}
}

// pebbleLogger passes Pebble's messages to slog: its routine information
// at debug, its errors as warnings.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Warn("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}
