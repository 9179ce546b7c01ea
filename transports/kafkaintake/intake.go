package kafkaintake

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/kafkaclient"
	"github.com/delayq/delayq/transports/wire"
)

// Headers of intake records besides package wire's push headers.
const (
	// HeaderTopic is the delayq topic of the job a record pushes; Kafka has
	// no subject per topic as NATS has.
	HeaderTopic = "Delayq-Topic"
	// HeaderCancel makes a record the cancel of the job it names; such a
	// record carries no other delayq header.
	HeaderCancel = "Delayq-Cancel"
	// HeaderFormat set to FormatJSON makes a record's value the whole job,
	// in the JSON form of POST /v1/jobs; such a record carries no other
	// delayq header.
	HeaderFormat = "Delayq-Format"
	// FormatJSON is the one value of HeaderFormat.
	FormatJSON = "json"
	// HeaderError is set on a record of the dead topic: why it was refused.
	HeaderError = "delayq-error"
)

// Defaults of Config.
const (
	// GroupDefault is the consumer group, shared by delayq's instances.
	GroupDefault = "delayq"
	// MaxBatchDefault bounds the records polled and pushed as one batch.
	MaxBatchDefault = 256
	// OpTimeoutDefault bounds the engine call of one batch or cancel, and
	// the produce of a dead record.
	OpTimeoutDefault = 10 * time.Second
	// RetryDelayDefault is the wait before a batch whose store call failed
	// is pushed again.
	RetryDelayDefault = time.Second
)

// SessionTimeout is how long the group waits for a member that stopped
// answering before its partitions go to the others.
const SessionTimeout = 10 * time.Second

// RecordIDPrefix starts the id RecordID derives.
const RecordIDPrefix = "kafka-"

// metricDead counts the records sent to the dead topic.
const metricDead = "delayq.kafka.intake.dead.records"

// Config configures an Intake. Zero fields take their defaults.
type Config struct {
	// Kafka reaches the cluster. Required: its brokers.
	Kafka kafkaclient.Config
	// Topic is the Kafka topic consumed. Required.
	Topic string
	// Group is the consumer group; instances in one group share the
	// topic's partitions.
	//
	// Defaults to GroupDefault ("delayq").
	Group string
	// DeadTopic takes the records refused, with HeaderError. Empty: they
	// are logged, counted and skipped.
	DeadTopic string
	// Engine takes the jobs. Required.
	Engine *core.Engine
	// Service pushes and cancels over Engine with the API's policy; share
	// one with the other transports.
	//
	// Defaults to a service.Service over Engine with Logger.
	Service *service.Service
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MeterProvider gets the count of dead records.
	//
	// Defaults to otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// MaxBatch bounds the records polled and pushed as one engine batch; at
	// most the engine's Limits().MaxBatch.
	//
	// Defaults to MaxBatchDefault (256).
	MaxBatch int
	// OpTimeout bounds the engine call of one batch or cancel, and the
	// produce of a dead record.
	//
	// Defaults to OpTimeoutDefault (10s).
	OpTimeout time.Duration
	// RetryDelay is the wait before a batch whose store call failed is
	// pushed again.
	//
	// Defaults to RetryDelayDefault (1s).
	RetryDelay time.Duration
	// Opts are further client options, after those of Kafka and the
	// consumer's.
	Opts []kgo.Opt
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c Config) WithDefaults() Config {
	c.Group = cmp.Or(c.Group, GroupDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	c.MaxBatch = cmp.Or(c.MaxBatch, MaxBatchDefault)
	c.OpTimeout = cmp.Or(c.OpTimeout, OpTimeoutDefault)
	c.RetryDelay = cmp.Or(c.RetryDelay, RetryDelayDefault)
	return c
}

// Validate checks the configuration, defaults filled, and names the bad
// field.
func (c Config) Validate() error {
	switch {
	case !c.Kafka.Enabled():
		return errors.New("kafkaintake: Config.Kafka needs brokers (--kafka-brokers)")
	case c.Topic == "":
		return errors.New("kafkaintake: Config.Topic is required")
	case c.Topic == c.DeadTopic:
		return fmt.Errorf("kafkaintake: the dead topic must not be the intake topic %q", c.Topic)
	case c.Engine == nil:
		return errors.New("kafkaintake: Config.Engine is required")
	case c.MaxBatch < 1 || c.MaxBatch > c.Engine.Limits().MaxBatch:
		return fmt.Errorf("kafkaintake: Config.MaxBatch must be between 1 and %d", c.Engine.Limits().MaxBatch)
	case c.OpTimeout <= 0 || c.RetryDelay <= 0:
		return errors.New("kafkaintake: Config.OpTimeout and RetryDelay must be positive")
	}
	return c.Kafka.Validate()
}

// RecordID returns the id of the job of the record at offset of partition
// of Kafka topic topic: RecordIDPrefix and 32 hex digits of a SHA-256 of
// the three, valid for core.ValidateID and not of a derived form
// (core.IsDerivedID).
func RecordID(topic string, partition int32, offset int64) string {
	h := sha256.New()
	h.Write([]byte(topic))
	var b [12]byte
	binary.BigEndian.PutUint32(b[:4], uint32(partition))
	binary.BigEndian.PutUint64(b[4:], uint64(offset))
	h.Write(b[:])
	return RecordIDPrefix + hex.EncodeToString(h.Sum(nil)[:16])
}

// Intake consumes Config.Topic and takes each record as a push or a
// cancel. Create it with New, then Start and Stop it.
type Intake struct {
	cfg  Config
	svc  *service.Service
	log  *slog.Logger
	dead metric.Int64Counter

	// beforeCommit, when set (by tests), runs after a batch is handled and
	// before its offsets are committed; false abandons the batch
	// uncommitted and ends the loop, as a crash there would.
	beforeCommit func() bool

	mu      sync.Mutex
	started bool
	stopped bool
	cl      *kgo.Client
	cancel  context.CancelFunc
	done    chan struct{}
}

// New returns an Intake configured by cfg. Errors: an invalid
// configuration.
func New(cfg Config) (*Intake, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Service == nil {
		cfg.Service = service.New(service.Config{Engine: cfg.Engine, Logger: cfg.Logger})
	}
	dead, err := cfg.MeterProvider.Meter("github.com/delayq/delayq/transports/kafkaintake").Int64Counter(metricDead, metric.WithUnit("{record}"),
		metric.WithDescription("Records of Kafka intake refused (they fail validation) and sent to the dead topic, or dropped without one."))
	if err != nil {
		return nil, fmt.Errorf("kafkaintake: metric: %w", err)
	}
	return &Intake{cfg: cfg, svc: cfg.Service, log: cfg.Logger, dead: dead, done: make(chan struct{})}, nil
}

// Start connects to the brokers, joins the consumer group and starts
// consuming; it returns once a broker answered. Errors: Start called twice
// or after Stop, no broker answering within ctx.
func (in *Intake) Start(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.started || in.stopped {
		return errors.New("kafkaintake: intake already started or stopped")
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(in.cfg.Group),
		kgo.ConsumeTopics(in.cfg.Topic),
		// Offsets are committed by hand, once the batch is stored, and a
		// rebalance waits for that commit so that the partition's next
		// owner starts after it.
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// A member that vanished (kill -9) holds its partitions until its
		// session ends: 10 s, not the client's 45 s.
		kgo.SessionTimeout(SessionTimeout),
	}
	cl, err := in.cfg.Kafka.NewClient(ctx, append(opts, in.cfg.Opts...)...)
	if err != nil {
		return fmt.Errorf("kafkaintake: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	in.cl, in.cancel, in.started = cl, cancel, true
	go in.run(runCtx)
	return nil
}

// Stop ends the consumption: the batch being handled is finished and
// committed, then the client leaves the group, within ctx; past it the
// batch is left uncommitted (its records are read again), and Stop returns
// ctx's error once the engine call in flight returned (OpTimeout at most).
// It is idempotent and safe before Start.
func (in *Intake) Stop(ctx context.Context) error {
	in.mu.Lock()
	if in.stopped || !in.started {
		in.stopped = true
		in.mu.Unlock()
		return nil
	}
	in.stopped = true
	in.mu.Unlock()
	in.cancel()
	var err error
	select {
	case <-in.done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	// Leaving the group is a rebalance, which waits for a polled batch to
	// be let go (BlockRebalanceOnPoll).
	in.cl.AllowRebalance()
	in.cl.Close()
	<-in.done
	return err
}

// run polls batches of records and handles each until ctx ends.
func (in *Intake) run(ctx context.Context) {
	defer close(in.done)
	for {
		fetches := in.cl.PollRecords(ctx, in.cfg.MaxBatch)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			in.log.Warn("kafkaintake: fetch failed", "topic", topic, "partition", partition, "err", err)
		})
		recs := fetches.Records()
		if len(recs) > 0 {
			if err := in.handle(ctx, recs); err != nil {
				return // stopping: the batch stays uncommitted
			}
			if in.beforeCommit != nil && !in.beforeCommit() {
				return
			}
			// The commit's own context: a stop waits for it.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.cfg.OpTimeout)
			if err := in.cl.CommitRecords(cctx, recs...); err != nil {
				in.log.Warn("kafkaintake: commit failed; the records will be read again", "err", err)
			}
			cancel()
		}
		in.cl.AllowRebalance()
	}
}

// pending is a record decoded into a push.
type pending struct {
	rec *kgo.Record
	p   *core.PushParams
}

// handle takes recs in order: runs of pushes as one engine batch, cancels
// and refusals one by one between them. It returns an error only when ctx
// ended first.
func (in *Intake) handle(ctx context.Context, recs []*kgo.Record) error {
	var run []pending
	for _, rec := range recs {
		p, cancelID, err := in.decode(rec)
		switch {
		case err != nil || cancelID != "":
			// The pushes before it go first: the partition's order holds
			// for cancels and on the dead topic.
			if err := in.push(ctx, run); err != nil {
				return err
			}
			run = run[:0]
			if err == nil {
				err = in.cancelJob(ctx, rec, cancelID)
			} else {
				err = in.refuse(ctx, rec, err)
			}
			if err != nil {
				return err
			}
		default:
			run = append(run, pending{rec, p})
		}
	}
	return in.push(ctx, run)
}

// decode reads a record as a push, or as the cancel of the id it returns.
func (in *Intake) decode(rec *kgo.Record) (*core.PushParams, string, error) {
	p := &core.PushParams{Body: json.RawMessage(rec.Value)}
	extra, err := wire.DecodePushHeaders(p, recordHeaders(rec), HeaderTopic, HeaderCancel, HeaderFormat)
	if err != nil {
		return nil, "", err
	}
	if id, ok := extra[HeaderCancel]; ok {
		if err := soleHeader(rec, HeaderCancel); err != nil {
			return nil, "", err
		}
		if id == "" {
			return nil, "", core.Invalid(HeaderCancel, "%s must name the job to cancel", HeaderCancel)
		}
		return nil, id, nil
	}
	if format, ok := extra[HeaderFormat]; ok {
		if !strings.EqualFold(strings.TrimSpace(format), FormatJSON) {
			return nil, "", core.Invalid(HeaderFormat, "%s must be %s: the value is then the job as POST /v1/jobs takes it", HeaderFormat, FormatJSON)
		}
		if err := soleHeader(rec, HeaderFormat); err != nil {
			return nil, "", err
		}
		traceParent := p.TraceParent
		if p, err = wire.DecodeJob(rec.Value); err != nil {
			return nil, "", wire.WithMessage("the record's JSON job: "+wire.ToError(err).Message, err)
		}
		p.TraceParent = traceParent
	} else {
		topic, ok := extra[HeaderTopic]
		if !ok || topic == "" {
			return nil, "", core.Invalid(HeaderTopic, "%s is required: the delayq topic of the job", HeaderTopic)
		}
		p.Topic = topic
	}
	if p.ID == "" && (p.Key == "" || in.cfg.Engine.UniqueKeys(p.Topic) == "") {
		p.ID = RecordID(rec.Topic, rec.Partition, rec.Offset)
	}
	return p, "", nil
}

// soleHeader refuses rec when it carries a delayq header besides name: the
// job's fields, when name makes it a cancel or a JSON job.
func soleHeader(rec *kgo.Record, name string) error {
	for _, h := range rec.Headers {
		if wire.IsDelayqHeader(h.Key) && !strings.EqualFold(h.Key, name) {
			return core.Invalid(name, "a record with %s carries no other delayq header (%s given)", name, wire.Truncate(h.Key, 64))
		}
	}
	return nil
}

// recordHeaders yields a record's headers as package wire reads them.
func recordHeaders(rec *kgo.Record) wire.Headers {
	return func(yield func(string, []string) bool) {
		for _, h := range rec.Headers {
			if !yield(h.Key, []string{string(h.Value)}) {
				return
			}
		}
	}
}

// push stores the jobs of run as one batch, retrying those whose store
// call failed until they pass or ctx ends, and sends those refused to the
// dead topic.
func (in *Intake) push(ctx context.Context, run []pending) error {
	for len(run) > 0 {
		opCtx, cancel := context.WithTimeout(core.WithTransport(context.WithoutCancel(ctx), core.TransportKafka), in.cfg.OpTimeout)
		results, err := in.svc.PushBatch(opCtx, len(run), func(i int) (*core.PushParams, error) { return run[i].p, nil })
		cancel()
		var again []pending
		var firstErr error
		for i, pd := range run {
			rerr := err
			if err == nil {
				rerr = results[i].Err
			}
			switch {
			case rerr == nil || reread(rerr, pd.p):
			case serverSide(rerr):
				again = append(again, pd)
				firstErr = cmp.Or(firstErr, rerr)
			default:
				if derr := in.refuse(ctx, pd.rec, rerr); derr != nil {
					return derr
				}
			}
		}
		if len(again) == 0 {
			return nil
		}
		in.log.Warn("kafkaintake: storing jobs failed; retrying", "jobs", len(again), "err", firstErr)
		if err := in.wait(ctx); err != nil {
			return err
		}
		run = again
	}
	return nil
}

// reread reports whether err is the conflict of a record read again: the
// job that holds the id (or the unique key) has p's topic and body, or is
// not known.
func reread(err error, p *core.PushParams) bool {
	ce, ok := errors.AsType[*core.ConflictError](err)
	if !ok {
		return false
	}
	return ce.Job == nil || ce.Job.Topic == p.Topic && bytes.Equal(orNull(ce.Job.Body), orNull(p.Body))
}

// orNull returns body, or null for an empty one, which a push stores as
// null.
func orNull(body []byte) []byte {
	if len(body) == 0 {
		return []byte("null")
	}
	return body
}

// serverSide reports whether err is the server's, not the record's: the
// record is retried rather than refused.
func serverSide(err error) bool {
	code := wire.ToError(err).Code
	return code == wire.CodeInternal || code == wire.CodeUnavailable || code == wire.CodeUnimplemented
}

// cancelJob cancels the job id as a cancel record asks. A job not found
// counts as cancelled (a record read again finds it cancelled); a job being
// delivered refuses the record.
func (in *Intake) cancelJob(ctx context.Context, rec *kgo.Record, id string) error {
	for {
		opCtx, cancel := context.WithTimeout(core.WithTransport(context.WithoutCancel(ctx), core.TransportKafka), in.cfg.OpTimeout)
		err := in.svc.Cancel(opCtx, &core.CancelJobParams{ID: id})
		cancel()
		switch {
		case err == nil, errors.Is(err, core.ErrNotFound):
			return nil
		case errors.Is(err, core.ErrConflict):
			return in.refuse(ctx, rec, fmt.Errorf("job %q is being delivered and cannot be cancelled", wire.Truncate(id, core.MaxIDLen)))
		case !serverSide(err):
			return in.refuse(ctx, rec, err)
		}
		in.log.Warn("kafkaintake: cancel failed; retrying", "id", id, "err", err)
		if err := in.wait(ctx); err != nil {
			return err
		}
	}
}

// refuse sends rec to the dead topic with why in HeaderError, and counts
// it; without a dead topic it logs and counts it. A produce that fails is
// retried until it passes or ctx ends.
func (in *Intake) refuse(ctx context.Context, rec *kgo.Record, why error) error {
	msg := wire.ToError(why).Message
	in.dead.Add(context.WithoutCancel(ctx), 1)
	if in.cfg.DeadTopic == "" {
		in.log.Warn("kafkaintake: record refused", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", msg)
		return nil
	}
	headers := make([]kgo.RecordHeader, 0, len(rec.Headers)+1)
	for _, h := range rec.Headers {
		if !strings.EqualFold(h.Key, HeaderError) {
			headers = append(headers, h)
		}
	}
	dead := &kgo.Record{Topic: in.cfg.DeadTopic, Key: rec.Key, Value: rec.Value, Headers: append(headers, kgo.RecordHeader{Key: HeaderError, Value: []byte(msg)})}
	for {
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.cfg.OpTimeout)
		err := in.cl.ProduceSync(opCtx, dead).FirstErr()
		cancel()
		if err == nil {
			return nil
		}
		in.log.Warn("kafkaintake: producing to the dead topic failed; retrying", "topic", in.cfg.DeadTopic, "err", err)
		if err := in.wait(ctx); err != nil {
			return err
		}
	}
}

// wait waits RetryDelay, or returns ctx's error when it ends first.
func (in *Intake) wait(ctx context.Context) error {
	t := time.NewTimer(in.cfg.RetryDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
