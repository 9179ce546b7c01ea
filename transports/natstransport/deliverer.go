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
	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Defaults and limits of DelivererConfig.
const (
	// DeliverTimeoutDefault bounds one delivery (publish and confirmation)
	// unless the topic sets delivery.timeout.
	DeliverTimeoutDefault = 10 * time.Second
	// StreamCacheTTLDefault is how long the stream found for a subject (or
	// that none holds it) is remembered.
	StreamCacheTTLDefault = time.Minute
	// MaxSubjectLen is the longest delivery.subject accepted.
	MaxSubjectLen = 512
)

// DelivererConfig configures a Deliverer. Zero fields take their defaults.
type DelivererConfig struct {
	// Conn is the NATS connection to publish on. Required.
	Conn *nats.Conn
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock times the stream cache (StreamCacheTTL).
	//
	// Defaults to core.RealClock().
	Clock core.Clock
	// Prefix is the first token of the intake subjects; a delivery subject
	// under it must be under <Prefix>.deliver., so that no delivery feeds
	// intake or the store's own subjects.
	//
	// Defaults to PrefixDefault ("delayq").
	Prefix string
	// Timeout bounds one delivery, from the stream lookup to the PubAck or
	// the flush, unless the topic sets delivery.timeout.
	//
	// Defaults to DeliverTimeoutDefault (10s).
	Timeout time.Duration
	// StreamCacheTTL is how long the stream that holds a subject, or that
	// none does, is remembered before it is looked up again.
	//
	// Defaults to StreamCacheTTLDefault (1m).
	StreamCacheTTL time.Duration
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c DelivererConfig) WithDefaults() DelivererConfig {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Clock = cmp.Or(c.Clock, core.RealClock())
	c.Prefix = cmp.Or(c.Prefix, PrefixDefault)
	c.Timeout = cmp.Or(c.Timeout, DeliverTimeoutDefault)
	c.StreamCacheTTL = cmp.Or(c.StreamCacheTTL, StreamCacheTTLDefault)
	return c
}

// Validate checks the configuration, defaults filled, and names the bad
// field.
func (c DelivererConfig) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("natstransport: DelivererConfig.Conn is required")
	case core.ValidateID(c.Prefix) != nil:
		return fmt.Errorf("natstransport: DelivererConfig.Prefix %q must be one subject token of [A-Za-z0-9_-]", c.Prefix)
	case c.Timeout <= 0:
		return errors.New("natstransport: DelivererConfig.Timeout must be positive")
	case c.StreamCacheTTL <= 0:
		return errors.New("natstransport: DelivererConfig.StreamCacheTTL must be positive")
	}
	return nil
}

// Deliverer publishes the due jobs of topics configured with
// {"delivery": {"type": "nats", "subject": S}} on S. It implements
// core.Deliverer for core.DeliveryNATS and is safe for concurrent use.
type Deliverer struct {
	conn   *nats.Conn
	js     jetstream.JetStream
	log    *slog.Logger
	cfg    DelivererConfig
	clock  core.Clock
	prefix string
	// inboxes are the reply subject prefixes a delivery must not publish
	// into: clients' default one, and the connection's own when custom.
	inboxes []string

	mu      sync.Mutex
	streams map[string]streamEntry
}

// streamEntry is a cached stream lookup: the stream that holds a subject,
// "" for none.
type streamEntry struct {
	name string
	at   time.Time
}

var _ core.Deliverer = (*Deliverer)(nil)

// NewDeliverer returns a Deliverer configured by cfg. Errors: an invalid
// configuration.
func NewDeliverer(cfg DelivererConfig) (*Deliverer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("natstransport: %w", err)
	}
	inboxes := []string{nats.InboxPrefix[:len(nats.InboxPrefix)-1]}
	if p := cfg.Conn.Opts.InboxPrefix; p != "" && p != inboxes[0] {
		inboxes = append(inboxes, p)
	}
	return &Deliverer{
		conn:    cfg.Conn,
		js:      js,
		log:     cfg.Logger,
		cfg:     cfg,
		clock:   cfg.Clock,
		prefix:  cfg.Prefix + ".",
		inboxes: inboxes,
		streams: map[string]streamEntry{},
	}, nil
}

// DefaultSubject returns the delivery subject of a topic that names none:
// delayq.deliver.<topic>.
func DefaultSubject(topic string) string {
	t := core.Topic{Name: topic, Delivery: core.Delivery{Type: core.DeliveryNATS}}.WithDefaults()
	return t.Delivery.Subject
}

// ValidateTopic checks the NATS fields of a topic: delivery.subject, when
// set, must be a subject one can publish to (non-empty tokens separated by
// dots, no wildcards, spaces or control characters, not a $ system subject,
// at most MaxSubjectLen bytes, under <prefix>.deliver. when under the prefix
// at all, and not under _INBOX or the connection's own inbox prefix, where
// replies travel), and the webhook fields must be empty. It returns a
// *core.FieldError naming the bad field.
func (d *Deliverer) ValidateTopic(t *core.Topic) error {
	if t.Delivery.Type != core.DeliveryNATS {
		return core.Invalid("delivery.type", "delivery.type must be %s for a nats topic", core.DeliveryNATS)
	}
	switch {
	case t.Delivery.URL != "":
		return core.Invalid("delivery.url", "delivery.url is only for webhook delivery")
	case t.Delivery.Secret != "":
		return core.Invalid("delivery.secret", "delivery.secret is only for webhook delivery")
	case t.Delivery.Success != "":
		return core.Invalid("delivery.success", "delivery.success is only for webhook delivery")
	}
	if t.Delivery.Subject == "" {
		return nil
	}
	return d.validateSubject(t.Delivery.Subject)
}

func (d *Deliverer) validateSubject(s string) error {
	const field = "delivery.subject"
	if len(s) > MaxSubjectLen {
		return core.Invalid(field, "delivery.subject must be at most %d bytes", MaxSubjectLen)
	}
	if strings.HasPrefix(s, "$") {
		return core.Invalid(field, "delivery.subject must not be a system subject starting with $")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '*' || c == '>':
			return core.Invalid(field, "delivery.subject must not contain the wildcards * and >")
		case c <= ' ' || c == 0x7f:
			return core.Invalid(field, "delivery.subject must not contain spaces or control characters")
		}
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return core.Invalid(field, "delivery.subject %q has an empty token", wire.Truncate(s, 64))
		}
	}
	if strings.HasPrefix(s, d.prefix) && !strings.HasPrefix(s, d.prefix+"deliver.") {
		return core.Invalid(field, "delivery.subject under %q must be under %q: the rest is delayq's own (intake, storage)", d.prefix, d.prefix+"deliver.")
	}
	for _, inbox := range d.inboxes {
		if s == inbox || strings.HasPrefix(s, inbox+".") {
			return core.Invalid(field, "delivery.subject must not be under %q: replies to requests travel there", inbox)
		}
	}
	return nil
}

// Deliver publishes job's body on the topic's subject with the headers
// Delayq-Id, Delayq-Attempt, Delayq-Run-At, Delayq-Topic and traceparent.
// When a JetStream stream holds the subject, the stream's PubAck completes
// the delivery; otherwise a core publish does, once a flush confirms that
// the server has it (whether anyone listens is not known). It returns when
// ctx is done; any error fails the attempt.
func (d *Deliverer) Deliver(ctx context.Context, p *core.DeliverParams) error {
	if p == nil || p.Topic == nil || p.Job == nil {
		return core.Invalid("", "natstransport: deliver: no params (topic and job are required)")
	}
	topic, job := p.Topic, p.Job
	subject := cmp.Or(topic.Delivery.Subject, DefaultSubject(topic.Name))
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(topic.Delivery.Timeout, d.cfg.Timeout))
	defer cancel()
	body := []byte(job.Body)
	if len(body) == 0 {
		body = []byte("null")
	}
	msg := &nats.Msg{Subject: subject, Data: body, Header: deliveryHeaders(job)}
	stream, err := d.streamFor(ctx, subject)
	if err != nil {
		return fmt.Errorf("natstransport: finding the stream of %s: %w", subject, err)
	}
	if stream != "" {
		if _, err := d.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(stream)); err != nil {
			d.forget(subject)
			return fmt.Errorf("natstransport: publish to stream %s on %s: %w", stream, subject, err)
		}
		return nil
	}
	if err := d.conn.PublishMsg(msg); err != nil {
		return fmt.Errorf("natstransport: publish on %s: %w", subject, err)
	}
	if err := d.conn.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("natstransport: confirming the publish on %s: %w", subject, err)
	}
	return nil
}

// streamFor returns the JetStream stream that holds subject, "" when none
// does or the server has no JetStream, from the cache when fresh.
func (d *Deliverer) streamFor(ctx context.Context, subject string) (string, error) {
	now := d.clock.Now()
	d.mu.Lock()
	e, ok := d.streams[subject]
	d.mu.Unlock()
	if ok && now.Sub(e.at) < d.cfg.StreamCacheTTL {
		return e.name, nil
	}
	name, err := d.js.StreamNameBySubject(ctx, subject)
	switch {
	case err == nil:
	case errors.Is(err, jetstream.ErrStreamNotFound),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, nats.ErrNoResponders):
		name = ""
	default:
		return "", err
	}
	d.mu.Lock()
	d.streams[subject] = streamEntry{name: name, at: now}
	d.mu.Unlock()
	return name, nil
}

// forget drops the cached stream of subject, after a publish to it failed
// (the stream may be gone).
func (d *Deliverer) forget(subject string) {
	d.mu.Lock()
	delete(d.streams, subject)
	d.mu.Unlock()
}
