package breaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/delayq/delayq/core"
)

// DelivererConfig configures a Deliverer.
type DelivererConfig struct {
	// Config holds the thresholds of every circuit; Name and CallTimeout
	// are not used. OpenTimeout defaults to EndpointOpenTimeoutDefault
	// (10s), IsFailureFunc to IsEndpointFailure.
	Config
	// EndpointFunc returns the endpoint of a topic's own destination. A
	// topic's deliveries there share the circuit of the topic and that
	// endpoint; no two topics share a circuit.
	//
	// Defaults to EndpointOf.
	EndpointFunc func(topic *core.Topic) string
	// MaxCircuits bounds how many circuits are kept. Jobs' own URLs are
	// chosen by whoever pushes, so past the bound the deliverer forgets a
	// circuit to make room: a closed one idle for longer than Window
	// first (it holds no count any more), then the closed one used
	// longest ago, then the one used longest ago.
	//
	// Defaults to MaxCircuitsDefault (10000).
	MaxCircuits int
}

// SharedEndpoint is implemented by a core.Deliverer whose topics all
// reach one endpoint that fails for every one of them at once, such as a
// Kafka cluster: a Deliverer around it keeps one circuit for that
// endpoint, shared by every topic, instead of one per topic, so that
// while the endpoint is down every topic fails fast, not only those that
// failed there first.
type SharedEndpoint interface {
	// SharedEndpoint returns the endpoint of topic's deliveries.
	SharedEndpoint(topic *core.Topic) string
}

// MaxCircuitsDefault is DelivererConfig.MaxCircuits unless set.
const MaxCircuitsDefault = 10000

// WithDefaults returns the configuration with every unset field at its
// default.
func (c DelivererConfig) WithDefaults() DelivererConfig {
	if c.OpenTimeout == 0 {
		c.OpenTimeout = EndpointOpenTimeoutDefault
	}
	if c.IsFailureFunc == nil {
		c.IsFailureFunc = IsEndpointFailure
	}
	if c.EndpointFunc == nil {
		c.EndpointFunc = EndpointOf
	}
	c.MaxCircuits = cmp.Or(c.MaxCircuits, MaxCircuitsDefault)
	c.Config = c.Config.WithDefaults()
	return c
}

// Validate checks a configuration with defaults filled and names the bad
// field.
func (c DelivererConfig) Validate() error {
	if c.MaxCircuits < 1 {
		return errors.New("breaker: MaxCircuits must be at least 1")
	}
	return c.Config.Validate()
}

// EndpointOf returns the endpoint of a topic: the host (with port, if any)
// of a webhook URL, else the delivery type and subject, such as
// "nats:delayq.deliver.orders".
func EndpointOf(topic *core.Topic) string {
	if topic.Delivery.URL != "" {
		if u, err := url.Parse(topic.Delivery.URL); err == nil && u.Host != "" {
			return u.Host
		}
		return topic.Delivery.URL
	}
	return topic.Delivery.Type + ":" + topic.Delivery.Subject
}

// JobEndpointOf returns the endpoint of a job's own URL: its
// scheme://host/path, without user, query or fragment, so that a job's
// failing path opens the circuit of that path only, and no secret in a
// query reaches logs.
func JobEndpointOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "job-url:invalid"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// statusCoder is an error that carries the HTTP status of an answer.
type statusCoder interface {
	error
	StatusCode() int
}

// IsEndpointFailure is the default IsFailureFunc of endpoint breakers: it
// counts only what says the endpoint itself is failing, so that one topic's
// configuration cannot open the breaker its host shares with other topics.
// An error with a StatusCode() method (an answer) counts when the status is
// a 5xx, 408 or 429, and not otherwise: a 3xx or 4xx refused the request,
// and a delivery.success condition that did not hold over a 2xx answer
// judged the topic's request, not the endpoint. An error wrapping
// core.ErrInvalidArgument (a topic that cannot be delivered as configured)
// does not count. Every other error counts: no connection, a timeout.
func IsEndpointFailure(err error) bool {
	if sc, ok := errors.AsType[statusCoder](err); ok {
		code := sc.StatusCode()
		return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
	}
	return !errors.Is(err, core.ErrInvalidArgument)
}

// Deliverer is a core.Deliverer that sends each delivery through a circuit
// breaker of its topic and endpoint, so that a failing endpoint costs its
// deliveries no connection or timeout while other endpoints go on, and
// what one topic or job chose (its timeout, its path) opens no other
// topic's circuit. It is safe for concurrent use. Create it with
// NewDeliverer.
type Deliverer struct {
	next   core.Deliverer
	shared SharedEndpoint // next, when it is one
	cfg    DelivererConfig

	mu       sync.Mutex
	circuits map[circuitKey]*keptCircuit
}

// circuitKey names a circuit: a topic and the endpoint of its own
// destination (EndpointFunc), or of a job's own URL (JobEndpointOf, with
// job set so that it never meets the topic's); or, with no topic, an
// endpoint shared by every topic (SharedEndpoint).
type circuitKey struct {
	topic    string
	endpoint string
	job      bool
}

// keptCircuit is a circuit with the time the deliverer last used it, for
// eviction.
type keptCircuit struct {
	*circuit
	usedAt time.Time // wall clock, as the circuit's; guarded by Deliverer.mu
}

var (
	_ core.Deliverer    = (*Deliverer)(nil)
	_ core.DeliveryGate = (*Deliverer)(nil)
)

// NewDeliverer returns next behind a circuit per topic and endpoint, each
// configured by cfg. It panics when cfg, with its defaults filled, is
// invalid (see DelivererConfig.Validate).
func NewDeliverer(next core.Deliverer, cfg DelivererConfig) *Deliverer {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	shared, _ := next.(SharedEndpoint)
	return &Deliverer{next: next, shared: shared, cfg: cfg, circuits: map[circuitKey]*keptCircuit{}}
}

// ValidateTopic implements core.Deliverer by asking the wrapped deliverer.
func (d *Deliverer) ValidateTopic(topic *core.Topic) error { return d.next.ValidateTopic(topic) }

// ValidateJobURL implements core.JobURLValidator by asking the wrapped
// deliverer.
func (d *Deliverer) ValidateJobURL(raw string) error { return core.ValidateJobURL(d.next, raw) }

// Deliver implements core.Deliverer. While the circuit of the delivery's
// topic and endpoint is open, or half-open with its probes taken, it
// returns an *OpenError at once, without calling the wrapped deliverer;
// otherwise it delivers and counts the outcome for that circuit. A
// delivery ended by ctx is not counted.
func (d *Deliverer) Deliver(ctx context.Context, p *core.DeliverParams) error {
	if p == nil || p.Topic == nil || p.Job == nil {
		return core.Invalid("", "breaker: deliver: no params (topic and job are required)")
	}
	key := d.key(p)
	c := d.circuit(key)
	done, err := c.allow()
	if err != nil {
		oe := &OpenError{Topic: key.topic, Endpoint: key.endpoint, Wait: c.openFor()}
		if oe.Wait == 0 {
			// Half-open with its probes taken: the probes end within
			// an open period, whichever way they go.
			oe.HalfOpen, oe.Wait = true, d.cfg.OpenTimeout
		}
		return oe
	}
	reported := false
	defer func() {
		if !reported {
			done(errFailure)
		}
	}()
	err = d.next.Deliver(ctx, p)
	reported = true
	done(outcome(ctx, err, d.cfg.IsFailureFunc))
	return err
}

// DeliveryAdmits implements core.DeliveryGate for the topic's own
// destination: -1 while its circuit is closed (or unused), 0 and the time
// until it half-opens while it is open, the probes left while half-open,
// or 0 and OpenTimeout when they are taken (a dispatcher also wakes when
// its probe ends).
func (d *Deliverer) DeliveryAdmits(topic *core.Topic) (int, time.Duration) {
	d.mu.Lock()
	c := d.circuits[d.topicKey(topic)]
	d.mu.Unlock()
	if c == nil {
		return -1, 0
	}
	switch c.state() {
	case StateOpen:
		return 0, c.openFor()
	case StateHalfOpen:
		if left := c.probesLeft(); left > 0 {
			return left, 0
		}
		return 0, d.cfg.OpenTimeout
	}
	return -1, 0
}

// key returns the circuit of a delivery: the topic's own endpoint, or for
// a job with its own URL, that URL's endpoint within the topic.
func (d *Deliverer) key(p *core.DeliverParams) circuitKey {
	if p.Job.URL != "" {
		return circuitKey{topic: p.Topic.Name, endpoint: JobEndpointOf(p.Job.URL), job: true}
	}
	return d.topicKey(p.Topic)
}

// topicKey returns the circuit of topic's own endpoint: shared by every
// topic when the wrapped deliverer is a SharedEndpoint.
func (d *Deliverer) topicKey(topic *core.Topic) circuitKey {
	if d.shared != nil {
		return circuitKey{endpoint: d.shared.SharedEndpoint(topic)}
	}
	return circuitKey{topic: topic.Name, endpoint: d.cfg.EndpointFunc(topic)}
}

// circuit returns the circuit of key, made at first use, and marks it
// used; making one past MaxCircuits forgets another first (evict).
func (d *Deliverer) circuit(key circuitKey) *circuit {
	now := time.Now() // the circuits' clock: see circuit
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.circuits[key]
	if c == nil {
		if len(d.circuits) >= d.cfg.MaxCircuits {
			d.evict(now)
		}
		c = &keptCircuit{circuit: newCircuit(key.String(), d.cfg.Config)}
		d.circuits[key] = c
	}
	c.usedAt = now
	return c.circuit
}

// evict makes room for one circuit: it drops every closed circuit idle for
// longer than Window, whose counts have expired, or else the closed one
// used longest ago, or else the one used longest ago. d.mu is held.
func (d *Deliverer) evict(now time.Time) {
	var oldest, oldestClosed *circuitKey
	for k, c := range d.circuits {
		closed := c.state() == StateClosed
		if closed && now.Sub(c.usedAt) > d.cfg.Window {
			delete(d.circuits, k)
			continue
		}
		if oldest == nil || c.usedAt.Before(d.circuits[*oldest].usedAt) {
			oldest = &k
		}
		if closed && (oldestClosed == nil || c.usedAt.Before(d.circuits[*oldestClosed].usedAt)) {
			oldestClosed = &k
		}
	}
	switch {
	case len(d.circuits) < d.cfg.MaxCircuits:
	case oldestClosed != nil:
		delete(d.circuits, *oldestClosed)
	case oldest != nil:
		delete(d.circuits, *oldest)
	}
}

// String names the circuit in logs: the topic, then the endpoint; a
// shared endpoint alone.
func (k circuitKey) String() string {
	if k.topic == "" {
		return k.endpoint
	}
	return fmt.Sprintf("%s→%s", k.topic, k.endpoint)
}

// EndpointState is the state of one circuit.
type EndpointState struct {
	// Topic is the topic whose deliveries the circuit carries; "" for
	// the circuit of a SharedEndpoint.
	Topic string
	// Endpoint is the topic's endpoint (EndpointFunc) or, for a job's own
	// URL, JobEndpointOf it.
	Endpoint string
	// JobURL is true for the circuit of a job's own URL.
	JobURL bool
	// State is its state.
	State State
}

// States returns the state of every circuit kept, in order of topic, then
// endpoint.
func (d *Deliverer) States() []EndpointState {
	d.mu.Lock()
	out := make([]EndpointState, 0, len(d.circuits))
	cs := make([]*circuit, 0, len(d.circuits))
	for k, c := range d.circuits {
		out = append(out, EndpointState{Topic: k.topic, Endpoint: k.endpoint, JobURL: k.job})
		cs = append(cs, c.circuit)
	}
	d.mu.Unlock()
	for i, c := range cs {
		out[i].State = c.state()
	}
	slices.SortFunc(out, func(a, b EndpointState) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Endpoint, b.Endpoint), compareBool(a.JobURL, b.JobURL))
	})
	return out
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// State returns the state of the circuit of topic's own endpoint (topic ""
// for that of a SharedEndpoint); closed for one not used yet.
func (d *Deliverer) State(topic, endpoint string) State {
	d.mu.Lock()
	c := d.circuits[circuitKey{topic: topic, endpoint: endpoint}]
	d.mu.Unlock()
	if c == nil {
		return StateClosed
	}
	return c.state()
}

// JobURLState returns the state of the circuit of a job's own URL within
// topic; closed for one not used yet (or forgotten).
func (d *Deliverer) JobURLState(topic, rawURL string) State {
	d.mu.Lock()
	c := d.circuits[circuitKey{topic: topic, endpoint: JobEndpointOf(rawURL), job: true}]
	d.mu.Unlock()
	if c == nil {
		return StateClosed
	}
	return c.state()
}

// Len returns how many circuits are kept.
func (d *Deliverer) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.circuits)
}
