package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// TopicConfig is a topic's configuration for PutTopic. Every field is
// optional; a zero one takes the service's default.
type TopicConfig struct {
	// Delivery says how the topic's jobs leave: pulled by consumers (the
	// default), posted to a webhook or published on NATS.
	Delivery DeliveryConfig
	// TTR is the default time to run of the topic's jobs (1s to 12h).
	TTR time.Duration
	// MaxAttempts is the default attempt limit of the topic's jobs (1-1000).
	MaxAttempts int
	// Backoff is the retry schedule of failed attempts.
	Backoff BackoffConfig
	// Concurrency bounds the webhook or NATS deliveries in flight per
	// instance (1-10 000).
	Concurrency int
	// UniqueKeys is "reject" or "replace" to make business keys unique
	// among the topic's unfinished jobs; "": not unique.
	UniqueKeys string
	// OnDead is a topic that gets a dead-letter notice for each job of
	// this one that goes dead; "": none.
	OnDead string
	// Rate limits the topic's deliveries across every instance; a zero
	// Limit: none.
	Rate RateConfig
	// MaxInFlight bounds the topic's deliveries in flight over every
	// instance (1-1 000 000); 0: no bound.
	MaxInFlight int
	// KeyConcurrency bounds the topic's deliveries in flight of one
	// business key over every instance (1-10 000), so that a key's jobs go
	// out one at a time with 1; 0: no bound. The redis and nats backends
	// refuse it.
	KeyConcurrency int
	// Fair makes claims take the topic's due jobs round-robin across
	// business keys, one of each key in turn, so that a key with many due
	// jobs does not hold up the others. The redis and nats backends refuse
	// it.
	Fair bool
	// ExpiresIn is the expiry, from run_at, of the topic's jobs pushed
	// without one (PushParams.ExpiresAt); 0: they never expire.
	ExpiresIn time.Duration
	// Delay is the delay of the topic's pushes that give neither Delay
	// nor RunAt; 0: none.
	Delay time.Duration
	// Retention is how long the topic's jobs pushed from then on are kept
	// once done or cancelled, in whole seconds; 0: the server's.
	Retention time.Duration
	// Events sends an event job to another topic for each of the topic's
	// jobs that finishes; a zero Events: none.
	Events EventsConfig
}

// EventsConfig is a topic's job lifecycle events: for each of its jobs
// that finishes as one of On, an event job, a CloudEvents document, is
// put on Topic (docs/api.md, "Job events").
type EventsConfig struct {
	// Topic is the topic that gets the events (required with On).
	Topic string `json:"topic,omitempty"`
	// On are the transitions told: "done", "cancelled", "dead",
	// "expired"; empty: all of them.
	On []string `json:"on,omitempty"`
}

// RateConfig is a topic's rate limit: at most Limit deliveries per Period
// (default 1s), Burst (default Limit) at once.
type RateConfig struct {
	Limit  int
	Period time.Duration
	Burst  int
	// PerKey gives each business key of the topic its own bucket of the
	// rate (jobs without a key share one); it needs a Limit. The redis and
	// nats backends refuse it.
	PerKey bool
}

// DeliveryConfig is a topic's delivery, as docs/api.md's
// "PUT /v1/topics/{topic}" describes each field.
type DeliveryConfig struct {
	// Type is "consumer" (the default), "webhook", "nats" or "kafka".
	Type string `json:"type,omitempty"`
	// URL is the webhook's URL.
	URL string `json:"url,omitempty"`
	// Timeout bounds one webhook attempt, NATS publish or Kafka record
	// until acknowledged (0 to 5m).
	Timeout time.Duration `json:"-"`
	// Secret signs each webhook request; never shown back.
	Secret string `json:"secret,omitempty"`
	// Subject is the NATS subject to publish on.
	Subject string `json:"subject,omitempty"`
	// KafkaTopic is the Kafka topic a kafka delivery produces to
	// (required there).
	KafkaTopic string `json:"kafka_topic,omitempty"`
	// Success is a CEL condition over a webhook's answer that alone
	// decides success.
	Success string `json:"success,omitempty"`
	// ErrorBody lets the start of a failed webhook answer into last_error;
	// nil: the default (off).
	ErrorBody *bool `json:"error_body,omitempty"`
	// Method is the webhook's HTTP method: POST (default), PUT or PATCH.
	Method string `json:"method,omitempty"`
	// Headers are sent with every webhook request; never shown back.
	Headers map[string]string `json:"headers,omitempty"`
	// PreviousSecret also signs each request while a secret is rotated;
	// never shown back.
	PreviousSecret string `json:"previous_secret,omitempty"`
	// AllowJobURL lets the topic's jobs carry their own webhook URL.
	AllowJobURL bool `json:"allow_job_url,omitempty"`
}

// BackoffConfig is a topic's retry schedule: exponential (Initial, Max,
// Factor, Jitter), or the explicit Delays.
type BackoffConfig struct {
	// Initial is the delay after the first failed attempt.
	Initial time.Duration
	// Max caps the delays.
	Max time.Duration
	// Factor multiplies the delay after each attempt (1-100).
	Factor float64
	// Jitter spreads each delay by ±Jitter of itself (at most 1; negative:
	// none).
	Jitter float64
	// Delays, when set, is the schedule itself: the delay after attempt n
	// is the n-th, the last repeated.
	Delays []time.Duration
}

// Topic is a topic as the service shows it: its configuration with the
// defaults filled in, whether it is configured or paused, and its counts.
type Topic struct {
	// Name is the topic's name.
	Name string
	// Delivery is its delivery; Secret and Headers are never shown, only
	// SecretSet and HeaderNames.
	Delivery DeliveryView
	// TTR, MaxAttempts, Backoff, Concurrency, UniqueKeys, OnDead, Rate,
	// MaxInFlight, KeyConcurrency, Fair, ExpiresIn, Delay, Retention and
	// Events are as in TopicConfig, with defaults filled.
	TTR            time.Duration
	MaxAttempts    int
	Backoff        BackoffConfig
	Concurrency    int
	UniqueKeys     string
	OnDead         string
	Rate           RateConfig
	MaxInFlight    int
	KeyConcurrency int
	Fair           bool
	ExpiresIn      time.Duration
	Delay          time.Duration
	Retention      time.Duration
	Events         EventsConfig
	// Configured is true when the topic has a configuration of its own.
	Configured bool
	// Paused is true while its deliveries are paused.
	Paused bool
	// Counts are its jobs in each state (finished ones within retention).
	Counts Counts
}

// DeliveryView is a topic's delivery as the service shows it.
type DeliveryView struct {
	// Type, URL, Timeout, Subject, KafkaTopic, Success and Method are as
	// configured.
	Type       string
	URL        string
	Timeout    time.Duration
	Subject    string
	KafkaTopic string
	Success    string
	Method     string
	// SecretSet is true when the delivery has a secret, and
	// PreviousSecretSet while a second one is kept for a rotation.
	SecretSet         bool
	PreviousSecretSet bool
	// AllowJobURL is true when jobs may carry their own webhook URL.
	AllowJobURL bool
	// ErrorBody is true when failed answers go into last_error.
	ErrorBody bool
	// HeaderNames are the names of the configured headers.
	HeaderNames []string
}

// Counts are a topic's jobs in each state.
type Counts struct {
	Scheduled int64 `json:"scheduled"`
	Ready     int64 `json:"ready"`
	Reserved  int64 `json:"reserved"`
	Done      int64 `json:"done"`
	Dead      int64 `json:"dead"`
	Cancelled int64 `json:"cancelled"`
}

// rateWire is a rate limit on the wire.
type rateWire struct {
	Limit  int          `json:"limit,omitempty"`
	Period jsonDuration `json:"period,omitempty"`
	Burst  int          `json:"burst,omitempty"`
	PerKey bool         `json:"per_key,omitempty"`
}

// backoffWire is a backoff on the wire.
type backoffWire struct {
	Initial jsonDuration   `json:"initial,omitempty"`
	Max     jsonDuration   `json:"max,omitempty"`
	Factor  float64        `json:"factor,omitempty"`
	Jitter  float64        `json:"jitter,omitempty"`
	Delays  []jsonDuration `json:"delays,omitempty"`
}

// config returns b as a BackoffConfig.
func (b *backoffWire) config() BackoffConfig {
	c := BackoffConfig{Initial: time.Duration(b.Initial), Max: time.Duration(b.Max), Factor: b.Factor, Jitter: b.Jitter}
	for _, d := range b.Delays {
		c.Delays = append(c.Delays, time.Duration(d))
	}
	return c
}

// topicWire is a topic as the service writes it.
type topicWire struct {
	Name     string `json:"name"`
	Delivery struct {
		Type        string       `json:"type"`
		URL         string       `json:"url"`
		Timeout     jsonDuration `json:"timeout"`
		Subject     string       `json:"subject"`
		KafkaTopic  string       `json:"kafka_topic"`
		Success     string       `json:"success"`
		SecretSet   bool         `json:"secret_set"`
		PrevSet     bool         `json:"previous_secret_set"`
		AllowJobURL bool         `json:"allow_job_url"`
		ErrorBody   bool         `json:"error_body"`
		Method      string       `json:"method"`
		HeaderNames []string     `json:"header_names"`
	} `json:"delivery"`
	TTR         jsonDuration `json:"ttr"`
	MaxAttempts int          `json:"max_attempts"`
	Backoff     backoffWire  `json:"backoff"`
	Concurrency int          `json:"concurrency"`
	UniqueKeys  string       `json:"unique_keys"`
	OnDead      string       `json:"on_dead"`
	Rate        struct {
		Limit  int          `json:"limit"`
		Period jsonDuration `json:"period"`
		Burst  int          `json:"burst"`
		PerKey bool         `json:"per_key"`
	} `json:"rate"`
	MaxInFlight    int          `json:"max_in_flight"`
	KeyConcurrency int          `json:"key_concurrency"`
	Fair           bool         `json:"fair"`
	ExpiresIn      jsonDuration `json:"expires_in"`
	Delay          jsonDuration `json:"delay"`
	Retention      jsonDuration `json:"retention"`
	Events         EventsConfig `json:"events"`
	Configured     bool         `json:"configured"`
	Paused         bool         `json:"paused"`
	Counts         Counts       `json:"counts"`
}

// UnmarshalJSON reads a topic in the service's form.
func (t *Topic) UnmarshalJSON(b []byte) error {
	var w topicWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	d := w.Delivery
	*t = Topic{
		Name: w.Name,
		Delivery: DeliveryView{Type: d.Type, URL: d.URL, Timeout: time.Duration(d.Timeout), Subject: d.Subject, KafkaTopic: d.KafkaTopic,
			Success: d.Success, Method: d.Method, SecretSet: d.SecretSet, PreviousSecretSet: d.PrevSet, AllowJobURL: d.AllowJobURL,
			ErrorBody: d.ErrorBody, HeaderNames: d.HeaderNames},
		TTR: time.Duration(w.TTR), MaxAttempts: w.MaxAttempts, Backoff: w.Backoff.config(), Concurrency: w.Concurrency,
		UniqueKeys: w.UniqueKeys, OnDead: w.OnDead, Configured: w.Configured, Paused: w.Paused, Counts: w.Counts,
		Rate: RateConfig{Limit: w.Rate.Limit, Period: time.Duration(w.Rate.Period), Burst: w.Rate.Burst, PerKey: w.Rate.PerKey}, MaxInFlight: w.MaxInFlight,
		KeyConcurrency: w.KeyConcurrency,
		Fair:           w.Fair,
		ExpiresIn:      time.Duration(w.ExpiresIn),
		Delay:          time.Duration(w.Delay),
		Retention:      time.Duration(w.Retention),
		Events:         w.Events,
	}
	return nil
}

// wire returns c as the service reads it.
func (c *TopicConfig) wire() []byte {
	type deliveryWire struct {
		DeliveryConfig
		Timeout jsonDuration `json:"timeout,omitempty"`
	}
	w := struct {
		Delivery       *deliveryWire `json:"delivery,omitempty"`
		TTR            jsonDuration  `json:"ttr,omitempty"`
		MaxAttempts    int           `json:"max_attempts,omitempty"`
		Backoff        *backoffWire  `json:"backoff,omitempty"`
		Concurrency    int           `json:"concurrency,omitempty"`
		UniqueKeys     string        `json:"unique_keys,omitempty"`
		OnDead         string        `json:"on_dead,omitempty"`
		Rate           *rateWire     `json:"rate,omitempty"`
		MaxInFlight    int           `json:"max_in_flight,omitempty"`
		KeyConcurrency int           `json:"key_concurrency,omitempty"`
		Fair           bool          `json:"fair,omitempty"`
		ExpiresIn      jsonDuration  `json:"expires_in,omitempty"`
		Delay          jsonDuration  `json:"delay,omitempty"`
		Retention      jsonDuration  `json:"retention,omitempty"`
		Events         *EventsConfig `json:"events,omitempty"`
	}{TTR: jsonDuration(c.TTR), MaxAttempts: c.MaxAttempts, Concurrency: c.Concurrency, UniqueKeys: c.UniqueKeys, OnDead: c.OnDead,
		MaxInFlight: c.MaxInFlight, KeyConcurrency: c.KeyConcurrency, Fair: c.Fair, ExpiresIn: jsonDuration(c.ExpiresIn), Delay: jsonDuration(c.Delay), Retention: jsonDuration(c.Retention)}
	if c.Events.Topic != "" || len(c.Events.On) > 0 {
		w.Events = &c.Events
	}
	if r := c.Rate; r.Limit != 0 || r.Period != 0 || r.Burst != 0 || r.PerKey {
		w.Rate = &rateWire{Limit: r.Limit, Period: jsonDuration(r.Period), Burst: r.Burst, PerKey: r.PerKey}
	}
	d := c.Delivery
	if d.Type != "" || d.URL != "" || d.Timeout != 0 || d.Secret != "" || d.Subject != "" || d.KafkaTopic != "" || d.Success != "" ||
		d.ErrorBody != nil || d.Method != "" || len(d.Headers) > 0 || d.PreviousSecret != "" || d.AllowJobURL {
		w.Delivery = &deliveryWire{DeliveryConfig: d, Timeout: jsonDuration(d.Timeout)}
	}
	if b := c.Backoff; b.Initial != 0 || b.Max != 0 || b.Factor != 0 || b.Jitter != 0 || len(b.Delays) > 0 {
		w.Backoff = &backoffWire{Initial: jsonDuration(b.Initial), Max: jsonDuration(b.Max), Factor: b.Factor, Jitter: b.Jitter}
		for _, d := range b.Delays {
			w.Backoff.Delays = append(w.Backoff.Delays, jsonDuration(d))
		}
	}
	return jsonBody(&w)
}

// GetTopic reads a topic (GET /v1/topics/{topic}). Errors: ErrNotFound
// when it is neither configured, paused nor has jobs; ErrPermissionDenied
// (admin); ErrUnavailable.
func (c *Client) GetTopic(ctx context.Context, name string) (*Topic, error) {
	return c.topicCall(ctx, http.MethodGet, "/v1/topics/"+segment(name), nil)
}

// PutTopic sets a topic's configuration (PUT /v1/topics/{topic}) and
// returns the topic as GetTopic shows it. A nil cfg resets it to the
// defaults while keeping it configured. Errors: ErrInvalidArgument (Field
// names the field, such as "delivery.url"), ErrPermissionDenied,
// ErrUnavailable. Idempotent.
func (c *Client) PutTopic(ctx context.Context, name string, cfg *TopicConfig) (*Topic, error) {
	if cfg == nil {
		cfg = &TopicConfig{}
	}
	return c.topicCall(ctx, http.MethodPut, "/v1/topics/"+segment(name), cfg.wire())
}

// PutTopicJSON is PutTopic with the configuration given as the JSON body
// of PUT /v1/topics/{topic} (docs/api.md), sent byte for byte: for
// configurations kept as files, and fields this package has no
// TopicConfig field for. Errors: ErrInvalidArgument when cfg is not one
// JSON object (checked before sending), else those of PutTopic.
func (c *Client) PutTopicJSON(ctx context.Context, name string, cfg json.RawMessage) (*Topic, error) {
	body, err := rawObject("config", cfg)
	if err != nil {
		return nil, err
	}
	return c.topicCall(ctx, http.MethodPut, "/v1/topics/"+segment(name), body)
}

// PatchTopicJSON changes some settings of a topic's configuration and
// keeps the others (PATCH /v1/topics/{topic}, docs/api.md): patch is a
// JSON merge patch of the configuration in the form of PutTopicJSON's, a
// member sets its setting and null drops one (its default again). It
// returns the topic as GetTopic does. Errors: ErrInvalidArgument when
// patch is not one JSON object (checked before sending) or the result is
// refused, ErrNotFound for a topic with neither jobs nor configuration.
func (c *Client) PatchTopicJSON(ctx context.Context, name string, patch json.RawMessage) (*Topic, error) {
	body, err := rawObject("patch", patch)
	if err != nil {
		return nil, err
	}
	return c.topicCall(ctx, http.MethodPatch, "/v1/topics/"+segment(name), body)
}

// rawObject returns raw trimmed when it is one JSON object, else an
// ErrInvalidArgument naming field.
func rawObject(field string, raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) || len(raw) == 0 || raw[0] != '{' {
		return nil, invalidArgument(field, "want one JSON object")
	}
	return raw, nil
}

// DeleteTopic drops a topic's configuration (DELETE /v1/topics/{topic});
// its jobs stay and take the defaults. Errors: ErrNotFound when it had
// none, ErrPermissionDenied, ErrUnavailable.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.do(ctx, &request{method: http.MethodDelete, path: "/v1/topics/" + segment(name)}, nil)
	return err
}

// ListTopics lists every topic that is configured, paused or has jobs,
// sorted by name (GET /v1/topics); a token restricted to topics sees only
// its own. Errors: ErrPermissionDenied, ErrUnavailable.
func (c *Client) ListTopics(ctx context.Context) ([]*Topic, error) {
	var out struct {
		Topics []*Topic `json:"topics"`
	}
	if _, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/topics"}, &out); err != nil {
		return nil, err
	}
	return out.Topics, nil
}

// PauseTopic stops a topic's deliveries on every instance
// (POST /v1/topics/{topic}/pause) and returns the topic. Idempotent.
// Errors: ErrInvalidArgument, ErrPermissionDenied, ErrUnavailable.
func (c *Client) PauseTopic(ctx context.Context, name string) (*Topic, error) {
	return c.topicCall(ctx, http.MethodPost, "/v1/topics/"+segment(name)+"/pause", nil)
}

// ResumeTopic starts a paused topic's deliveries again
// (POST /v1/topics/{topic}/resume) and returns the topic. Idempotent.
// Errors: as PauseTopic.
func (c *Client) ResumeTopic(ctx context.Context, name string) (*Topic, error) {
	return c.topicCall(ctx, http.MethodPost, "/v1/topics/"+segment(name)+"/resume", nil)
}

// topicCall sends a request answered with a topic.
func (c *Client) topicCall(ctx context.Context, method, path string, body []byte) (*Topic, error) {
	var t Topic
	if _, err := c.do(ctx, &request{method: method, path: path, body: body}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
