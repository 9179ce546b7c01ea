package natsstore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/internal/diskreserve"
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
	// AckWaitDefault is how long a fetched due message stays with one
	// store instance before NATS hands it to another, should the instance
	// die. A fetcher holding one longer keeps it with in-progress acks
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
	// AckWait is how long a fetched due message stays with one store
	// instance before another gets it, should the instance die without
	// releasing it (a kill -9): the jobs its fetcher held are delivered
	// again after that long. A fetcher holding a message longer sends an
	// in-progress ack every AckWait/2.
	//
	// Defaults to AckWaitDefault (10s).
	AckWait time.Duration
	// Clock is where the store takes time from: run_at, leases, retention,
	// the waits of claims. Schedules themselves run on the server's clock
	// (see "Clocks" in the package doc).
	//
	// Defaults to the real clock.
	Clock core.Clock
	// Upgrade moves the jobs of the first stream layout, when the prefix
	// has them, into this one at New, and deletes the first layout's
	// stream. Without it New refuses such a prefix (ErrLegacyLayout). No
	// instance of the earlier version may run meanwhile.
	Upgrade bool
	// Logger receives the store's warnings.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// DiskDir is the directory of the JetStream server's files when that
	// server runs in this process (EmbeddedConfig.DataDir, `delayq serve
	// --backend jetstream`): the store keeps DiskReserve there and watches
	// its disk. Empty: no reserve; a separate server's disk is its
	// operator's (see "A full disk" in the package doc).
	DiskDir string
	// DiskReserve is the size of the ballast file kept in DiskDir, at most
	// a tenth of the file system, released when the free space falls under
	// half of it, so that nats-server never meets a full disk: new jobs are
	// then refused (core.ErrStorageFull) while claims, acks and the
	// server's own writes go on in the space released. Zero: none, and a
	// full disk may stop the store until a restart. It requires DiskDir.
	DiskReserve int64

	// diskUsage reads DiskDir's free space in place of the file system
	// (tests); nil: statfs.
	diskUsage diskreserve.UsageFunc
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
	case c.DiskReserve < 0:
		return fmt.Errorf("natsstore: DiskReserve %d must not be negative", c.DiskReserve)
	case c.DiskReserve > 0 && c.DiskDir == "":
		return errors.New("natsstore: DiskReserve needs DiskDir, the directory of the server's files")
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
	// awaitClaim is await where a claim waits for its lease publishes;
	// tests replace it to lose an answer.
	awaitClaim func(context.Context, jetstream.PubAckFuture) (*jetstream.PubAck, error)

	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed by Close
	queues map[string]*topicQueue
	seen   sync.Map // topic name -> struct{}: "seen" record written
	wg     sync.WaitGroup
	leases leaseCache           // the lease messages of the jobs this instance reserved
	pauses pauses               // the paused topics
	disk   *diskreserve.Reserve // nil without Config.DiskReserve
	notify core.Notifier        // what core.Claim's waiting claims watch
}

var (
	_ core.Store        = (*Store)(nil)
	_ core.ClaimSource  = (*Store)(nil)
	_ core.BodyRewriter = (*Store)(nil)
)

// New connects a store to JetStream, creating or updating its stream and
// topic bucket (idempotent: every instance of a prefix may call it).
// Errors: an invalid configuration; ErrLegacyLayout when the prefix holds
// jobs in the first layout and Config.Upgrade is not set; ErrUnavailable when JetStream does not answer
// or refuses the stream.
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
		awaitClaim: await,
		cfg:        cfg,
		names:      newNames(cfg.Prefix),
		nc:         cfg.Conn,
		js:         js,
		clock:      cfg.Clock,
		log:        cfg.Logger,
		done:       make(chan struct{}),
		queues:     make(map[string]*topicQueue),
	}
	// The reserve first: a start on a nearly full disk starts full.
	if cfg.DiskReserve > 0 {
		if s.disk, err = diskreserve.Open(diskreserve.Config{
			Dir: cfg.DiskDir, Size: cfg.DiskReserve, Owner: "natsstore", Logger: cfg.Logger, UsageFunc: cfg.diskUsage,
		}); err != nil {
			return nil, err
		}
		if size := s.disk.Size(); size < diskReserveMin {
			cfg.Logger.Warn("natsstore: disk reserve under 16 MiB: its low mark may not hold a compaction of nats-server (up to 2 MiB) and the writes in flight, and nats-server may meet a full disk",
				"dir", cfg.DiskDir, "reserve", size)
		}
	}
	legacy, err := checkLayout(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	s.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              s.names.stream,
		Description:       "delayq jobs, one message each",
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
		Metadata:          map[string]string{metaFormat: FormatVersion},
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
	if legacy {
		if err := s.upgrade(context.WithoutCancel(ctx)); err != nil { // as long as the move takes
			return nil, err
		}
	}
	if err := s.indexKeys(ctx); err != nil {
		return nil, err
	}
	if err := s.watchPauses(ctx); err != nil {
		return nil, err
	}
	if s.disk != nil {
		s.wg.Add(1)
		go s.watchDisk()
	}
	return s, nil
}

// ErrNewerFormat is New's error for a stream that a later version of
// delayq wrote in a format this one does not know: it refuses it rather
// than rewrite the stream's format and misread its jobs.
var ErrNewerFormat = errors.New("natsstore: the stream's format is newer than this version of delayq knows")

// checkFormat refuses the stream when its format version (metaFormat) is
// a later one than FormatVersion. A missing stream, or one without the
// version, is this format's.
func checkFormat(ctx context.Context, js jetstream.JetStream, stream string) error {
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return unavailable("read the stream's format", err)
	}
	got := st.CachedInfo().Config.Metadata[metaFormat]
	have, _ := strconv.Atoi(got)
	if want, _ := strconv.Atoi(FormatVersion); have > want {
		return fmt.Errorf("%w: stream %s has format %s, this version writes %s: run the release that wrote it, or restore the backup taken before the upgrade (docs/deploying.md, Upgrading)",
			ErrNewerFormat, stream, got, FormatVersion)
	}
	return nil
}

// ErrLegacyLayout is New's error for a prefix whose jobs are in the stream
// layout of delayq's first NATS store, without Config.Upgrade.
var ErrLegacyLayout = errors.New("natsstore: jobs in the first stream layout")

// checkLayout refuses a prefix that still has the first layout's stream,
// saying how to move its jobs, unless told to move them.
func checkLayout(ctx context.Context, js jetstream.JetStream, cfg Config) (legacy bool, err error) {
	if err := checkFormat(ctx, js, newNames(cfg.Prefix).stream); err != nil {
		return false, err
	}
	legacy, err = HasLegacyLayout(ctx, js, cfg.Prefix)
	if err != nil || !legacy || cfg.Upgrade {
		return legacy, err
	}
	return true, fmt.Errorf("%w (stream %s): stop every delayq instance of the earlier version, "+
		"then start this one with --nats-upgrade, which moves the jobs into stream %s and deletes %s "+
		"(a backup first: `delayq export` against an instance of the earlier version)",
		ErrLegacyLayout, LegacyStream(cfg.Prefix), newNames(cfg.Prefix).stream, LegacyStream(cfg.Prefix))
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

// unavailable wraps an infrastructure error; a write refused at a storage
// limit is core.ErrStorageFull (an answer, not a failure).
func unavailable(op string, err error) error {
	if errors.Is(err, core.ErrUnavailable) {
		return err
	}
	if isStorageLimit(err) {
		return storageFull(op, err)
	}
	return fmt.Errorf("natsstore: %s: %w: %w", op, core.ErrUnavailable, err)
}

// errCAS is a compare-and-set publish that lost: the job has a newer
// message than the one the write replaces.
var errCAS = errors.New("natsstore: job changed")

// isWrongSeq reports whether err is JetStream's wrong-last-sequence answer.
func isWrongSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// stored is a job's message as read: the job as of when it was written.
type stored struct {
	job     *core.Job
	seq     uint64
	kind    string
	subject string
	// firing, for a message a schedule fired, is that schedule's subject
	// and the sequence of the message the schedule replaced (hdrReplaces),
	// for overtaken; nil for a written message, or one fired by a
	// schedule written without hdrReplaces.
	firing *firing
}

// firing is where a fired message came from.
type firing struct {
	schedule string
	after    uint64
}

// firingOf reads the headers of a message of kind for stored.firing. A
// schedule written over another schedule carries the same headers, but is
// of a schedule's kind: the server fires into due and dead subjects.
func firingOf(kind string, h nats.Header) *firing {
	if isSchedule(kind) {
		return nil
	}
	schedule := h.Get(hdrScheduler)
	if schedule == "" || h.Get(hdrScheduleNext) != "purge" {
		return nil
	}
	after, err := strconv.ParseUint(h.Get(hdrReplaces), 10, 64)
	if err != nil {
		return nil
	}
	return &firing{schedule: schedule, after: after}
}

// view returns the job as the contract shows it at now.
func (m *stored) view(now time.Time) *core.Job {
	j := m.job.Clone()
	j.AsOf(now)
	return j
}

// decodeStored decodes a job message read from the stream.
func (s *Store) decodeStored(subject string, seq uint64, data []byte) (*stored, error) {
	kind, id, _, ok := s.names.parse(subject)
	if !ok {
		return nil, fmt.Errorf("natsstore: foreign subject %q", subject)
	}
	j, err := decodeRecord(data)
	if err != nil {
		return nil, fmt.Errorf("natsstore: job %q: bad message: %w", id, err)
	}
	return &stored{job: j, seq: seq, kind: kind, subject: subject}, nil
}

// opTimeout bounds one JetStream request or a pipeline of publishes,
// whatever the caller's context allows: an answer lost with a server (a
// node killed after it took a publish) would otherwise hold the call, and
// the claims waiting behind it, until the caller gives up.
const opTimeout = 5 * time.Second

// opContext is ctx bounded by opTimeout.
func opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opTimeout)
}

// load reads a job's message, nil when the job has none. A fired message
// that a write had overtaken (overtaken) is deleted, and the job read again.
func (s *Store) load(ctx context.Context, id string) (*stored, error) {
	for range maxTries {
		m, err := s.lastMsg(ctx, s.names.jobFilter(id))
		if err != nil || m == nil {
			return nil, err
		}
		cur, err := s.decodeStored(m.Subject, m.Sequence, m.Data)
		if err != nil {
			return nil, err
		}
		cur.firing = firingOf(cur.kind, m.Header)
		stale, err := s.overtaken(ctx, cur, m.Data)
		if err != nil || !stale {
			return cur, err
		}
		s.drop(ctx, cur)
	}
	return nil, unavailable("read job", fmt.Errorf("job %q: %d stale fired messages in a row", id, maxTries))
}

// overtaken reports whether m, a message a schedule fired (data its
// payload), is stale: stored after a write that had replaced that
// schedule. nats-server fires a schedule it has taken up even as a write
// that purges it is applied (2.15.2; on a replicated stream the write's
// compare-and-set is checked before the fired message is, so both pass),
// and the fired message, stored after the write, would undo it: an ack
// or cancel answered, and the job delivered again or dead. The
// write's message lies between the schedule's predecessor (firing.after)
// and the fired message, where nothing else can: the schedule was the
// job's last message until one of the two replaced it. One read, of the
// job's first message after firing.after; the schedule itself, still
// there, would read as the fired message's payload on the schedule's
// subject.
func (s *Store) overtaken(ctx context.Context, m *stored, data []byte) (bool, error) {
	if m.firing == nil {
		return false, nil
	}
	next, err := s.nextMsg(ctx, s.names.jobFilter(m.job.ID), m.firing.after+1)
	if err != nil || next == nil || next.Sequence >= m.seq {
		return false, err
	}
	return next.Subject != m.firing.schedule || !bytes.Equal(next.Data, data), nil
}

// lastMsg reads the last message of the subjects filter matches, nil when
// there is none. A replicated stream is asked through its leader: a direct
// get may be answered by a replica that has not applied the latest writes,
// and a caller reads its own writes.
func (s *Store) lastMsg(ctx context.Context, filter string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := opContext(ctx)
	defer cancel()
	if s.cfg.Replicas <= 1 {
		m, err := s.stream.GetLastMsgForSubject(ctx, filter)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, unavailable("read message", err)
		}
		return m, nil
	}
	return s.leaderGet(ctx, map[string]any{"last_by_subj": filter})
}

// nextMsg reads the first message from seq on of the subjects filter
// matches, nil when there is none; through the leader, as lastMsg.
func (s *Store) nextMsg(ctx context.Context, filter string, seq uint64) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := opContext(ctx)
	defer cancel()
	if s.cfg.Replicas <= 1 {
		m, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, unavailable("read message", err)
		}
		return m, nil
	}
	return s.leaderGet(ctx, map[string]any{"seq": seq, "next_by_subj": filter})
}

// leaderGet asks the stream's leader for the message req names (a
// JetStream message get request), nil when there is none.
func (s *Store) leaderGet(ctx context.Context, req map[string]any) (*jetstream.RawStreamMsg, error) {
	data, _ := json.Marshal(req)
	resp, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+s.names.stream, data)
	if err != nil {
		return nil, unavailable("read message", err)
	}
	var r struct {
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Header  []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, unavailable("read message", err)
	}
	switch {
	case r.Error != nil && r.Error.Code == 404:
		return nil, nil
	case r.Error != nil:
		return nil, unavailable("read message", r.Error)
	case r.Message == nil:
		return nil, unavailable("read message", errors.New("empty answer"))
	}
	var h nats.Header
	if len(r.Message.Header) > 0 {
		if h, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, unavailable("read message", err)
		}
	}
	return &jetstream.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Seq, Header: h, Data: r.Message.Data}, nil
}

// firingMargin is how close to its time (by the store's clock) a
// schedule must be for a write that replaces it to wait for its firing
// first. nats-server may fire a schedule it has taken up even as a write
// that purges it is stored (2.15.2; the history checker saw a cancel
// answered 204 and the job's fired message delivered after it, and a
// replace whose old schedule then fired over the new job): the fired
// message, the job's newest, would undo the write. The server fires
// schedules late (0-360 ms), never early, so a write more than this before
// the time does not race.
const firingMargin = 100 * time.Millisecond

// firingWait bounds the wait for a schedule's firing.
const firingWait = 2 * time.Second

// afterFiring returns cur, the job's last message as read or guessed, or,
// when cur is a schedule whose time is within firingMargin or past, the
// job's last message once the server fired it (or anything else replaced
// it), read again every 20 ms for at most firingWait in all (on the real
// clock, the server's). What replaced it may be such a schedule too (a
// retry due at once, written by another instance), which it waits out the
// same way. A write against what it returns does not race a schedule,
// unless firingWait ran out.
func (s *Store) afterFiring(ctx context.Context, id string, cur *stored) (*stored, error) {
	var t *time.Ticker
	deadline := time.Now().Add(firingWait)
	for {
		if cur == nil || !isSchedule(cur.kind) {
			return cur, nil
		}
		at := cur.job.RunAt.Add(-s.cfg.Lead)
		if cur.kind == kindLease {
			at = cur.job.LeaseExpiresAt
		}
		if at.Sub(s.now()) > firingMargin {
			return cur, nil
		}
		if t == nil {
			t = time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
		}
		for {
			if !time.Now().Before(deadline) {
				return cur, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-t.C:
			}
			m, err := s.load(ctx, id)
			if err != nil || m == nil {
				return m, err
			}
			if m.seq != cur.seq {
				cur = m
				break
			}
		}
	}
}

// message builds the write of j, in its new state at now, as the message
// that replaces prev (nil: the job has none). The write holds only while
// prev is still the job's last message (expected last subject sequence
// over the job's subjects). A prev schedule is purged by the server as
// the message is stored; a prev plain message on another subject is
// returned as drop, to delete once the write succeeded (one on the same
// subject goes by the limit of one message per subject).
func (s *Store) message(j *core.Job, now time.Time, prev *stored) (m *nats.Msg, drop *stored, err error) {
	data, err := encodeRecord(j)
	if err != nil {
		return nil, nil, fmt.Errorf("natsstore: encode job %q: %w", j.ID, err)
	}
	kind := kindOf(j, now, s.cfg.Lead)
	subject := s.names.subject(kind, j.ID, j.Topic)
	h := make(nats.Header, 6)
	var expect uint64
	if prev != nil {
		expect = prev.seq
	}
	h.Set(hdrExpectLastSubjSeq, strconv.FormatUint(expect, 10))
	h.Set(hdrExpectLastSubjSeqSubj, s.names.jobFilter(j.ID))
	due := s.names.subject(kindDue, j.ID, j.Topic)
	switch kind {
	case kindSched:
		// Set by hand: jetstream.WithScheduleAt cuts to whole seconds.
		h.Set(hdrSchedule, "@at "+j.RunAt.Add(-s.cfg.Lead).Format(time.RFC3339Nano))
		h.Set(hdrScheduleTarget, due)
		h.Set(hdrReplaces, strconv.FormatUint(expect, 10))
	case kindLease:
		// The lease of the last attempt fires into the dead subject: a job
		// whose last lease runs out is dead without anyone's help.
		target := due
		if j.Attempt >= j.MaxAttempts {
			target = s.names.subject(kindDead, j.ID, j.Topic)
		}
		h.Set(hdrSchedule, "@at "+j.LeaseExpiresAt.Format(time.RFC3339Nano))
		h.Set(hdrScheduleTarget, target)
		h.Set(hdrReplaces, strconv.FormatUint(expect, 10))
	case kindDone, kindCancelled:
		// What is left of its retention: all of it for a finish, less for
		// a finished job written again (RewriteBody).
		left := j.UpdatedAt.Add(cmp.Or(j.Retention, s.cfg.Retention)).Sub(now)
		h.Set(hdrTTL, ttl(max(left, time.Second)))
	}
	if prev != nil && prev.subject != subject {
		if isSchedule(prev.kind) {
			h.Set(hdrScheduler, prev.subject)
			h.Set(hdrScheduleNext, "purge")
		} else {
			drop = prev
		}
	}
	return &nats.Msg{Subject: subject, Header: h, Data: data}, drop, nil
}

// ttl formats a retention as a Nats-TTL, in whole seconds (rounded up),
// the unit the server keeps.
func ttl(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10) + "s"
}

// connected refuses a write while the connection is down: nats.go keeps
// what is published while it reconnects and sends it once reconnected,
// after the write has been answered as failed (a history run saw a push
// answered 503 during a partition of its instance from NATS created 3 s
// later, after a cancel answered 404). What a write publishes in the
// moment the connection goes down can still go out late; a connection
// made with nats.ReconnectBufSize(-1) refuses that too.
func (s *Store) connected(op string) error {
	if !s.nc.IsConnected() {
		return unavailable(op, nats.ErrDisconnected)
	}
	return nil
}

// write stores j, in its new state, as the message that replaces prev, and
// deletes what it leaves behind. Errors: errCAS, ErrUnavailable.
func (s *Store) write(ctx context.Context, j *core.Job, now time.Time, prev *stored) (uint64, error) {
	if err := s.connected("write job"); err != nil {
		return 0, err
	}
	m, drop, err := s.message(j, now, prev)
	if err != nil {
		return 0, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	ack, err := s.js.PublishMsg(ctx, m)
	if isWrongSeq(err) {
		return 0, errCAS
	}
	if err != nil {
		return 0, unavailable("write job", err)
	}
	s.drop(ctx, drop)
	var was *core.Job
	if prev != nil {
		was = prev.job
	}
	s.rekey(ctx, j, was)
	return ack.Sequence, nil
}

// drop deletes a message a write replaced. A failure leaves a stale
// message behind, which the next claim, write or listing of it recognises
// (it is not the job's last): it is logged, not returned.
func (s *Store) drop(ctx context.Context, m *stored) {
	if m == nil {
		return
	}
	if err := s.stream.DeleteMsg(ctx, m.seq); err != nil && !isNotFoundAPI(err) {
		s.log.Warn("natsstore: delete replaced message", "id", m.job.ID, "seq", m.seq, "err", err)
	}
}

func isNotFoundAPI(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrMsgNotFound) ||
		(errors.As(err, &apiErr) && apiErr.Code == 404)
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
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i); err != nil {
				once.Do(func() { first = err })
			}
		})
	}
	wg.Wait()
	return first
}

// Ping implements core.Store: it asks JetStream for the job stream.
// Errors: ErrClosed, ErrUnavailable, ErrStorageFull while the disk is full
// (Config.DiskReserve; the store still serves all but new jobs).
func (s *Store) Ping(ctx context.Context) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	if _, err := s.stream.Info(ctx); err != nil {
		return unavailable("ping", err)
	}
	return s.diskErr()
}

// Close implements core.Store: fetchers stop and release the due messages
// they hold (nak, so another instance gets them at once), claims waiting
// return ErrClosed, and every later call too. The connection stays open.
// Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.notify.Close()
	queues := make([]*topicQueue, 0, len(s.queues))
	for _, q := range s.queues {
		queues = append(queues, q)
	}
	s.mu.Unlock()
	for _, q := range queues {
		q.stop()
	}
	s.pauses.stop()
	s.wg.Wait()
	return nil
}

// newLease returns a random lease token.
func newLease() string { return rand.Text() }

// encodeRecord encodes a job as its message's payload: the length of its
// JSON fields as a uvarint, the JSON of every field but the body, then the
// body byte for byte (encoding/json would compact it).
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
