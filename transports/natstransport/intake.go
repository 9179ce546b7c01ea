package natstransport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// Defaults of IntakeConfig.
const (
	// PrefixDefault is the first token of the intake subjects.
	PrefixDefault = "delayq"
	// QueueGroupDefault is the queue group of the intake subscriptions, so
	// that several instances share the messages.
	QueueGroupDefault = "delayq"
	// WorkersDefault is how many batches of intake messages are pushed to
	// the engine at once.
	WorkersDefault = 4
	// MaxBatchDefault bounds the messages pushed to the engine as one batch.
	MaxBatchDefault = 256
	// OpTimeoutDefault bounds the engine call of one batch or cancel.
	OpTimeoutDefault = 10 * time.Second
)

// IntakeConfig configures an Intake. Zero fields take their defaults.
type IntakeConfig struct {
	// Conn is the NATS connection to subscribe on. Required.
	Conn *nats.Conn
	// Engine takes the jobs. Required.
	Engine *core.Engine
	// Service pushes and cancels over Engine with the API's policy (batch
	// rules; the intake has no tokens, so no quota or topic refuses it);
	// share one with the other transports.
	//
	// Defaults to a service.Service over Engine with Logger.
	Service *service.Service
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Prefix is the first token of the subjects: jobs are pushed on
	// <Prefix>.push.<topic> and cancelled on <Prefix>.cancel.
	//
	// Defaults to PrefixDefault ("delayq").
	Prefix string
	// QueueGroup is the queue group of the subscriptions; instances in one
	// group share the messages, each message going to one of them.
	//
	// Defaults to QueueGroupDefault ("delayq").
	QueueGroup string
	// Workers is how many batches are pushed to the engine at once.
	//
	// Defaults to WorkersDefault (4).
	Workers int
	// MaxBatch bounds the messages that arrived together and are pushed to
	// the engine as one batch; at most the engine's Limits().MaxBatch.
	//
	// Defaults to MaxBatchDefault (256).
	MaxBatch int
	// OpTimeout bounds the engine call of one batch or cancel.
	//
	// Defaults to OpTimeoutDefault (10s).
	OpTimeout time.Duration
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c IntakeConfig) WithDefaults() IntakeConfig {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Prefix = cmp.Or(c.Prefix, PrefixDefault)
	c.QueueGroup = cmp.Or(c.QueueGroup, QueueGroupDefault)
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.MaxBatch = cmp.Or(c.MaxBatch, MaxBatchDefault)
	c.OpTimeout = cmp.Or(c.OpTimeout, OpTimeoutDefault)
	return c
}

// Validate checks the configuration, defaults filled, and names the bad
// field.
func (c IntakeConfig) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("natstransport: IntakeConfig.Conn is required")
	case c.Engine == nil:
		return errors.New("natstransport: IntakeConfig.Engine is required")
	case core.ValidateID(c.Prefix) != nil:
		return fmt.Errorf("natstransport: IntakeConfig.Prefix %q must be one subject token of [A-Za-z0-9_-]", c.Prefix)
	case core.ValidateID(c.QueueGroup) != nil:
		return fmt.Errorf("natstransport: IntakeConfig.QueueGroup %q must be of [A-Za-z0-9_-]", c.QueueGroup)
	case c.Workers < 1:
		return errors.New("natstransport: IntakeConfig.Workers must be at least 1")
	case c.MaxBatch < 1 || c.MaxBatch > c.Engine.Limits().MaxBatch:
		return fmt.Errorf("natstransport: IntakeConfig.MaxBatch must be between 1 and %d", c.Engine.Limits().MaxBatch)
	case c.OpTimeout <= 0:
		return errors.New("natstransport: IntakeConfig.OpTimeout must be positive")
	}
	return nil
}

// Intake takes jobs and cancels from NATS, as docs/api.md's NATS section says:
// a message on <prefix>.push.<topic> creates a job, a request on
// <prefix>.cancel cancels one. Create it with NewIntake, then Start and
// Stop it.
type Intake struct {
	conn   *nats.Conn
	svc    *service.Service
	log    *slog.Logger
	cfg    IntakeConfig
	push   string // subject prefix of pushes, "<prefix>.push."
	cancel string // cancel subject

	mu      sync.Mutex
	started bool
	stopped bool
	subs    []*nats.Subscription
	// msgs carries messages from the subscriptions to the workers.
	msgs chan *nats.Msg
	// closing is closed once no message will be queued any more: workers
	// handle what is queued and exit.
	closing chan struct{}
	// abort is closed when Stop runs out of time: queued messages are
	// dropped and workers exit after their current batch.
	abort   chan struct{}
	workers sync.WaitGroup
}

// NewIntake returns an Intake configured by cfg. Errors: an invalid
// configuration.
func NewIntake(cfg IntakeConfig) (*Intake, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Service == nil {
		cfg.Service = service.New(service.Config{Engine: cfg.Engine, Logger: cfg.Logger})
	}
	return &Intake{
		conn:    cfg.Conn,
		svc:     cfg.Service,
		log:     cfg.Logger,
		cfg:     cfg,
		push:    cfg.Prefix + ".push.",
		cancel:  cfg.Prefix + ".cancel",
		msgs:    make(chan *nats.Msg, cfg.Workers*cfg.MaxBatch),
		closing: make(chan struct{}),
		abort:   make(chan struct{}),
	}, nil
}

// PushSubject returns the subject on which jobs of topic are pushed.
func (in *Intake) PushSubject(topic string) string { return in.push + topic }

// CancelSubject returns the subject on which jobs are cancelled.
func (in *Intake) CancelSubject() string { return in.cancel }

// Start subscribes to the intake subjects in the queue group and starts the
// workers; it returns once the server has the subscriptions, so that a
// message published after Start returns is taken. Errors: Start called
// twice or after Stop, or the subscriptions failed.
func (in *Intake) Start(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.started || in.stopped {
		return errors.New("natstransport: intake already started or stopped")
	}
	for _, subject := range []string{in.push + ">", in.cancel} {
		sub, err := in.conn.QueueSubscribe(subject, in.cfg.QueueGroup, in.enqueue)
		if err != nil {
			in.unsubscribeLocked()
			return fmt.Errorf("natstransport: subscribe to %s: %w", subject, err)
		}
		// The workers bound what is in flight; the subscription buffers
		// the rest, up to a limit far above the library's default.
		if err := sub.SetPendingLimits(1<<20, 256<<20); err != nil {
			in.unsubscribeLocked()
			return fmt.Errorf("natstransport: subscribe to %s: %w", subject, err)
		}
		in.subs = append(in.subs, sub)
	}
	fctx, cancel := context.WithTimeout(ctx, in.cfg.OpTimeout)
	defer cancel()
	if err := in.conn.FlushWithContext(fctx); err != nil {
		in.unsubscribeLocked()
		return fmt.Errorf("natstransport: subscribe: %w", err)
	}
	in.started = true
	for range in.cfg.Workers {
		in.workers.Go(in.work)
	}
	return nil
}

func (in *Intake) unsubscribeLocked() {
	for _, sub := range in.subs {
		_ = sub.Unsubscribe()
	}
	in.subs = nil
}

// Stop drains the subscriptions (no new message is taken, those already
// received are handled and answered) and waits for the workers until ctx is
// done; then it drops what is left, unanswered, and returns ctx's error. It
// is idempotent and safe before Start.
func (in *Intake) Stop(ctx context.Context) error {
	in.mu.Lock()
	if in.stopped || !in.started {
		in.stopped = true
		in.mu.Unlock()
		return nil
	}
	in.stopped = true
	subs := in.subs
	in.mu.Unlock()

	drained := make(chan struct{})
	closed := make([]<-chan nats.SubStatus, 0, len(subs))
	for _, sub := range subs {
		ch := sub.StatusChanged(nats.SubscriptionClosed)
		if err := sub.Drain(); err != nil {
			_ = sub.Unsubscribe() // the connection is gone: nothing to drain
			continue
		}
		closed = append(closed, ch)
	}
	go func() {
		defer close(drained)
		for _, ch := range closed {
			select {
			case <-ch:
			case <-in.abort:
				return
			}
		}
	}()
	workersDone := make(chan struct{})
	go func() {
		in.workers.Wait()
		close(workersDone)
	}()
	select {
	case <-drained:
		close(in.closing)
		select {
		case <-workersDone:
			return nil
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	close(in.abort)
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
	<-drained
	<-workersDone
	return ctx.Err()
}

// enqueue hands a message to the workers; it runs in the subscription's
// goroutine, so a full queue holds further messages in the subscription's
// buffer.
func (in *Intake) enqueue(m *nats.Msg) {
	select {
	case in.msgs <- m:
	case <-in.abort:
	}
}

// work handles queued messages: pushes that arrived together as one batch,
// cancels one by one.
func (in *Intake) work() {
	batch := make([]*nats.Msg, 0, in.cfg.MaxBatch)
	for {
		var m *nats.Msg
		select {
		case m = <-in.msgs:
		case <-in.closing:
			select {
			case m = <-in.msgs:
			default:
				return
			}
		case <-in.abort:
			return
		}
		batch = append(batch[:0], m)
	fill:
		for len(batch) < in.cfg.MaxBatch {
			select {
			case m := <-in.msgs:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		in.handle(batch)
		clear(batch)
	}
}

// handle pushes the push messages of batch as one engine batch and cancels
// the cancel messages, replying to each message that has a reply subject.
func (in *Intake) handle(batch []*nats.Msg) {
	ctx, cancel := context.WithTimeout(core.WithTransport(context.Background(), core.TransportNATS), in.cfg.OpTimeout)
	defer cancel()
	var (
		params []*core.PushParams
		pushed []*nats.Msg
	)
	for _, m := range batch {
		if in.ownReply(m.Reply) {
			in.log.Warn("natstransport: intake dropped a message whose reply subject is delayq's own", "subject", m.Subject, "reply", wire.Truncate(m.Reply, 64))
			continue
		}
		if m.Subject == in.cancel {
			in.reply(m, nil, in.cancelJob(ctx, m))
			continue
		}
		p, err := decodePush(in.push, m)
		if err != nil {
			in.reply(m, nil, err)
			continue
		}
		params = append(params, p)
		pushed = append(pushed, m)
	}
	if len(params) == 0 {
		return
	}
	results, err := in.svc.PushBatch(ctx, len(params), func(i int) (*core.PushParams, error) { return params[i], nil })
	if err != nil {
		for _, m := range pushed {
			in.reply(m, nil, err)
		}
		return
	}
	for i, r := range results {
		in.reply(pushed[i], r.Job, r.Err)
	}
}

// ownReply reports whether reply is a subject delayq keeps for itself: under
// the prefix (intake, the store), a $ API subject ($JS, $KV...), or the
// connection's own inbox, where its JetStream calls are answered. Answering
// there would let a producer write into the store or forge answers.
func (in *Intake) ownReply(reply string) bool {
	under := func(p string) bool { return reply == p || strings.HasPrefix(reply, p+".") }
	switch {
	case reply == "":
		return false
	case strings.HasPrefix(reply, "$"), under(in.cfg.Prefix):
		return true
	}
	inbox := in.conn.Opts.InboxPrefix
	return inbox != "" && inbox+"." != nats.InboxPrefix && under(inbox)
}

// cancelJob cancels the job whose id is the message's payload.
func (in *Intake) cancelJob(ctx context.Context, m *nats.Msg) error {
	id := string(m.Data)
	if id == "" {
		return core.Invalid("payload", "the payload must be the id of the job to cancel")
	}
	err := in.svc.Cancel(ctx, &core.CancelJobParams{ID: id})
	switch {
	case errors.Is(err, core.ErrNotFound):
		return wire.WithMessage(fmt.Sprintf("job %q not found", wire.Truncate(id, core.MaxIDLen)), err)
	case errors.Is(err, core.ErrConflict):
		return wire.WithMessage(fmt.Sprintf("job %q is being delivered and cannot be cancelled", wire.Truncate(id, core.MaxIDLen)), err)
	}
	return err
}

// reply answers a message that has a reply subject: the created job, {}
// for a cancel, or the error.
func (in *Intake) reply(m *nats.Msg, job *core.Job, err error) {
	if err != nil {
		e := toReplyError(err)
		if e.Code == wire.CodeInternal || e.Code == wire.CodeUnavailable {
			in.log.Warn("natstransport: intake failed", "subject", m.Subject, "err", err)
		}
		if m.Reply == "" {
			in.log.Debug("natstransport: intake refused a message without a reply subject", "subject", m.Subject, "err", err)
			return
		}
		in.respond(m, appendErrorReply(nil, e))
		return
	}
	if m.Reply == "" {
		return
	}
	if job == nil {
		in.respond(m, []byte("{}"))
		return
	}
	in.respond(m, appendPushed(nil, job))
}

func (in *Intake) respond(m *nats.Msg, data []byte) {
	if err := m.Respond(data); err != nil {
		in.log.Debug("natstransport: reply failed", "subject", m.Subject, "err", err)
	}
}
