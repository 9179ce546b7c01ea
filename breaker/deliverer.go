package breaker

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"sync"

	"github.com/delayq/delayq/core"
)

// DelivererConfig configures a Deliverer.
type DelivererConfig struct {
	// Config holds the thresholds of every endpoint's breaker; Name and
	// CallTimeout are not used. OpenTimeout defaults to
	// EndpointOpenTimeoutDefault (10s), IsFailureFunc to IsEndpointFailure.
	Config
	// EndpointFunc returns the key of a topic's endpoint: topics with the
	// same key share a breaker.
	//
	// Defaults to EndpointOf.
	EndpointFunc func(topic *core.Topic) string
}

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
	c.Config = c.Config.WithDefaults()
	return c
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

// Deliverer is a core.Deliverer that sends each delivery through the
// breaker of its endpoint, so that a failing endpoint costs its deliveries
// no connection or timeout while other endpoints go on. It is safe for
// concurrent use. Create it with NewDeliverer.
type Deliverer struct {
	next core.Deliverer
	cfg  DelivererConfig

	mu        sync.Mutex
	endpoints map[string]*circuit
}

var _ core.Deliverer = (*Deliverer)(nil)

// NewDeliverer returns next behind a breaker per endpoint, each configured
// by cfg. It panics when cfg, with its defaults filled, is invalid (see
// Config.Validate).
func NewDeliverer(next core.Deliverer, cfg DelivererConfig) *Deliverer {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Deliverer{next: next, cfg: cfg, endpoints: map[string]*circuit{}}
}

// ValidateTopic implements core.Deliverer by asking the wrapped deliverer.
func (d *Deliverer) ValidateTopic(topic *core.Topic) error { return d.next.ValidateTopic(topic) }

// ValidateJobURL implements core.JobURLValidator by asking the wrapped
// deliverer.
func (d *Deliverer) ValidateJobURL(raw string) error { return core.ValidateJobURL(d.next, raw) }

// Deliver implements core.Deliverer. While the endpoint's breaker is open,
// or half-open with its probes taken, it returns an *OpenError at once,
// without calling the wrapped deliverer; otherwise it delivers and counts
// the outcome for the endpoint. A delivery ended by ctx is not counted.
func (d *Deliverer) Deliver(ctx context.Context, p *core.DeliverParams) error {
	if p == nil || p.Topic == nil || p.Job == nil {
		return core.Invalid("", "breaker: deliver: no params (topic and job are required)")
	}
	key := d.cfg.EndpointFunc(endpointTopic(p))
	c := d.endpoint(key)
	done, err := c.allow()
	if err != nil {
		return &OpenError{Endpoint: key, Wait: c.openFor()}
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

// endpointTopic is the topic whose endpoint a delivery reaches: p.Topic,
// or for a job with its own URL, a copy of it with that URL, so that a
// failing per-job URL opens its own host's breaker, not the topic's.
func endpointTopic(p *core.DeliverParams) *core.Topic {
	if p.Job.URL == "" {
		return p.Topic
	}
	t := *p.Topic
	t.Delivery.URL = p.Job.URL
	return &t
}

// endpoint returns the breaker of key, made at first use.
func (d *Deliverer) endpoint(key string) *circuit {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.endpoints[key]
	if c == nil {
		c = newCircuit(key, d.cfg.Config)
		d.endpoints[key] = c
	}
	return c
}

// EndpointState is the state of one endpoint's breaker.
type EndpointState struct {
	// Endpoint is the breaker's key.
	Endpoint string
	// State is its state.
	State State
}

// States returns the state of every endpoint's breaker that was used, in
// order of endpoint.
func (d *Deliverer) States() []EndpointState {
	d.mu.Lock()
	keys := make([]string, 0, len(d.endpoints))
	cs := make(map[string]*circuit, len(d.endpoints))
	for k, c := range d.endpoints {
		keys = append(keys, k)
		cs[k] = c
	}
	d.mu.Unlock()
	sort.Strings(keys)
	out := make([]EndpointState, len(keys))
	for i, k := range keys {
		out[i] = EndpointState{Endpoint: k, State: cs[k].state()}
	}
	return out
}

// State returns the state of one endpoint's breaker; closed for an endpoint
// not used yet.
func (d *Deliverer) State(endpoint string) State {
	d.mu.Lock()
	c := d.endpoints[endpoint]
	d.mu.Unlock()
	if c == nil {
		return StateClosed
	}
	return c.state()
}
