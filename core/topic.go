package core

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Delivery types of a topic (docs/api.md, PUT /v1/topics/{topic}).
const (
	// DeliveryConsumer leaves jobs to pull and WebSocket consumers (the default).
	DeliveryConsumer = "consumer"
	// DeliveryWebhook posts each job to a URL.
	DeliveryWebhook = "webhook"
	// DeliveryNATS publishes each job on a NATS subject.
	DeliveryNATS = "nats"
	// DeliveryKafka produces each job as a record to a Kafka topic.
	DeliveryKafka = "kafka"
)

// Topic is a topic's configuration, shared by every instance through the
// store. Zero fields take the defaults.
type Topic struct {
	// Name is the topic name.
	Name string `json:"name"`
	// Delivery says how due jobs leave delayq.
	Delivery Delivery `json:"delivery"`
	// TTR is the default time to run of the topic's jobs.
	TTR time.Duration `json:"ttr,omitempty"`
	// MaxAttempts is the default attempt limit of the topic's jobs.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Backoff spaces out retries of failed attempts.
	Backoff Backoff `json:"backoff"`
	// Concurrency bounds deliveries in flight per instance for push
	// deliveries (webhook, nats). Defaults to ConcurrencyDefault.
	Concurrency int `json:"concurrency,omitempty"`
	// UniqueKeys makes business keys unique among the topic's unfinished
	// jobs: a job pushed with a key gets the id KeyID(topic, key), so that
	// a second push with the key is refused as a conflict
	// (UniqueKeysReject) or replaces the job (UniqueKeysReplace). Empty:
	// keys are not unique.
	UniqueKeys string `json:"unique_keys,omitempty"`
	// MaxInFlight bounds the topic's deliveries in flight (its reserved
	// jobs) over every instance and every kind of delivery; 0: no bound. A
	// slot is a lease: a delivery that ends, or a lease that runs out (an
	// instance gone), gives it back.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// KeyConcurrency bounds the topic's reserved jobs of one business key
	// (Job.Key) over the whole store, 1 to KeyConcurrencyMax; 0: no bound.
	// With 1 a key's jobs go out one at a time, in claim order. Jobs
	// without a key are not bounded. A slot is a lease, as for MaxInFlight.
	KeyConcurrency int `json:"key_concurrency,omitempty"`
	// Fair makes a claim take the topic's due jobs round-robin across
	// business keys, one of each key in turn, so that a key with many due
	// jobs does not hold up the others (ClaimJobsParams.Fair).
	Fair bool `json:"fair,omitempty"`
	// Rate limits the topic's deliveries across every instance (Rate).
	Rate Rate `json:"rate"`
	// ExpiresIn, when set, is the expiry of the topic's jobs pushed without
	// one: run_at plus ExpiresIn (Job.ExpiresAt). 0: they never expire.
	ExpiresIn time.Duration `json:"expires_in,omitempty"`
	// Delay is the delay of the topic's pushes that give neither delay
	// nor run_at (0 to the engine's Limits.MaxDelay): run_at is the push's
	// time plus it. Schedules' slots give their run_at.
	Delay time.Duration `json:"delay,omitempty"`
	// Retention, when set, is how long the topic's jobs pushed from then
	// on are kept once done or cancelled (Job.Retention), instead of the
	// store's retention (--retention); RetentionMin to RetentionMax.
	Retention time.Duration `json:"retention,omitempty"`
	// OnDead names the topic that gets a dead-letter notice (a job whose
	// body is a DeadNotice) for each of this topic's jobs that goes dead;
	// its delivery decides how the notice goes out. Empty: none.
	OnDead string `json:"on_dead,omitempty"`
	// Events sends an event job, a CloudEvents document, to another topic
	// for each of this topic's jobs that finishes as one of Events.On
	// (events.go). Zero: none.
	Events Events `json:"events,omitzero"`
	// Configured is false for a topic that has jobs but was never set.
	Configured bool `json:"configured"`
	// Paused is true while the topic's deliveries are paused
	// (Store.SetTopicPaused). It is state, not configuration: the engine
	// fills it from the store's TopicState when it reads topics, PutTopic
	// ignores it and keeps the state, and DeleteTopic keeps it too.
	Paused bool `json:"-"`
	// Counts holds the topic's job counts when read; the engine fills it
	// from the store's TopicState.
	Counts Counts `json:"-"`
}

// TopicState is what a store keeps of a topic beside its jobs
// (Store.GetTopicState): its job counts and whether it is paused. The
// engine merges it with the topic's configuration, a record of
// KindTopic, into a Topic.
type TopicState struct {
	Name   string
	Paused bool
	Counts Counts
}

// Delivery configures how a topic's due jobs are delivered.
type Delivery struct {
	// Type is DeliveryConsumer, DeliveryWebhook, DeliveryNATS or
	// DeliveryKafka.
	Type string `json:"type,omitempty"`
	// URL is the webhook endpoint.
	URL string `json:"url,omitempty"`
	// Timeout bounds one webhook attempt, one NATS publish with its
	// confirmation, or one Kafka record until the brokers acknowledge it.
	// Defaults to 10s.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Secret signs webhook bodies (Delayq-Signature and the Standard
	// Webhooks headers) when set.
	Secret string `json:"secret,omitempty"`
	// PreviousSecret, set only beside Secret, signs every request too, so
	// that receivers still holding it verify during a rotation.
	PreviousSecret string `json:"previous_secret,omitempty"`
	// Success is an optional CEL condition over the webhook's answer, such
	// as `status == 200 && body.code == 0`; without it any 2xx succeeds.
	Success string `json:"success,omitempty"`
	// Subject is the NATS subject; defaults to delayq.deliver.<topic>.
	Subject string `json:"subject,omitempty"`
	// KafkaTopic is the Kafka topic of a kafka delivery (required there):
	// 1 to 249 of [a-zA-Z0-9._-], not "." or "..".
	KafkaTopic string `json:"kafka_topic,omitempty"`
	// Method is the webhook's HTTP method: POST (the default), PUT or
	// PATCH.
	Method string `json:"method,omitempty"`
	// Headers are sent with every webhook request, such as the
	// Authorization or API key header the receiver checks. They cannot
	// replace the headers delayq sets itself.
	Headers map[string]string `json:"headers,omitempty"`
	// ErrorBody lets a webhook's answer into the job's last_error: the
	// start of a failed answer's body, a redirect's Location and the reason
	// a delivery.success condition failed to evaluate. Off by default, so
	// that whoever can read a topic's jobs cannot read through them the
	// answers of the services its URL points at.
	ErrorBody bool `json:"error_body,omitempty"`
	// AllowJobURL lets the topic's jobs carry their own URL (Job.URL),
	// checked against the same destination rules as URL. Turned off
	// later, it makes the deliveries of jobs that carry one fail, rather
	// than go to URL, which the job's producer did not choose.
	AllowJobURL bool `json:"allow_job_url,omitempty"`
}

// Backoff is an exponential backoff with jitter.
type Backoff struct {
	// Initial is the delay after the first failed attempt. Defaults to 1s.
	Initial time.Duration `json:"initial,omitempty"`
	// Max caps the delay. Defaults to 1h.
	Max time.Duration `json:"max,omitempty"`
	// Factor multiplies the delay after each failure. Defaults to 2.
	Factor float64 `json:"factor,omitempty"`
	// Jitter spreads each delay uniformly by ±Jitter of itself, 0 to 1.
	// Defaults to 0.2; a negative value means none.
	Jitter float64 `json:"jitter,omitempty"`
	// Delays, when set, is the retry schedule instead of the exponential
	// one: the delay after failed attempt n is Delays[n-1], the last
	// repeated, taken as given (no jitter, no cap).
	Delays []time.Duration `json:"delays,omitempty"`
	// Zeros names the fields among BackoffZeroable given as 0 on purpose:
	// they stay 0 (retry at once, no jitter) where an unset one takes its
	// default. The transports fill it from an explicit 0. A configuration
	// stored before it has none: its zeros were left out of the record
	// and read as unset, as they still do.
	Zeros []string `json:"zeros,omitempty"`
}

// BackoffZeroable are the backoff fields whose range holds 0, which an
// explicit 0 sets (Backoff.Zeros), by their names in the API.
var BackoffZeroable = []string{"initial", "max", "jitter"}

// zero reports whether Zeros names field.
func (b Backoff) zero(field string) bool { return slices.Contains(b.Zeros, field) }

// Retry schedule limits.
const (
	// DelaysMax bounds how many delays a retry schedule lists.
	DelaysMax = 100
	// DelayMax bounds each delay of a retry schedule, as backoff.max.
	DelayMax = 7 * 24 * time.Hour
)

// Values of Topic.UniqueKeys.
const (
	// UniqueKeysReject answers a push whose key an unfinished job of the
	// topic has with a conflict carrying that job.
	UniqueKeysReject = "reject"
	// UniqueKeysReplace makes such a push replace the job, unless it is
	// reserved (a conflict).
	UniqueKeysReplace = "replace"
)

// Topic defaults.
const (
	// ConcurrencyDefault bounds in-flight push deliveries per topic and instance.
	ConcurrencyDefault = 16
	// ConcurrencyMax is the largest concurrency a topic may set.
	ConcurrencyMax = 10000
	// MaxInFlightMax is the largest max_in_flight a topic may set.
	MaxInFlightMax = 1_000_000
	// KeyConcurrencyMax is the largest key_concurrency a topic may set.
	KeyConcurrencyMax = 10000
	// WebhookTimeoutDefault bounds one webhook attempt.
	WebhookTimeoutDefault = 10 * time.Second
)

// Clone returns a copy of t that shares nothing with it.
func (t *Topic) Clone() *Topic {
	c := *t
	c.Backoff.Delays = slices.Clone(t.Backoff.Delays)
	c.Backoff.Zeros = slices.Clone(t.Backoff.Zeros)
	c.Delivery.Headers = maps.Clone(t.Delivery.Headers)
	return &c
}

// WithDefaults returns the topic with every unset field at its default.
func (t Topic) WithDefaults() Topic {
	t.Delivery.Type = cmp.Or(t.Delivery.Type, DeliveryConsumer)
	if t.Delivery.Type == DeliveryWebhook {
		t.Delivery.Timeout = cmp.Or(t.Delivery.Timeout, WebhookTimeoutDefault)
		t.Delivery.Method = cmp.Or(t.Delivery.Method, "POST")
	}
	if t.Delivery.Type == DeliveryNATS {
		t.Delivery.Subject = cmp.Or(t.Delivery.Subject, "delayq.deliver."+t.Name)
	}
	t.TTR = cmp.Or(t.TTR, TTRDefault)
	t.MaxAttempts = cmp.Or(t.MaxAttempts, MaxAttemptsDefault)
	t.Concurrency = cmp.Or(t.Concurrency, ConcurrencyDefault)
	t.Backoff = t.Backoff.WithDefaults()
	t.Rate = t.Rate.WithDefaults()
	return t
}

// Validate checks the fields that core knows; the engine asks the delivery
// transport to check the rest (URL, condition, subject).
func (t *Topic) Validate() error {
	if err := ValidateTopicName(t.Name); err != nil {
		return err
	}
	switch t.Delivery.Type {
	case "", DeliveryConsumer, DeliveryWebhook, DeliveryNATS, DeliveryKafka:
	default:
		return Invalid("delivery.type", "delivery.type must be consumer, webhook, nats or kafka")
	}
	// A field of another delivery type would be kept and never used: a
	// consumer topic with a url is most likely a webhook topic whose type
	// was forgotten.
	typ := cmp.Or(t.Delivery.Type, DeliveryConsumer)
	if t.Delivery.Timeout != 0 && typ == DeliveryConsumer {
		return Invalid("delivery.timeout", "delivery.timeout is only for webhook, nats and kafka delivery, not %s", typ)
	}
	for _, f := range []struct {
		name, typ string
		set       bool
	}{
		{"delivery.url", DeliveryWebhook, t.Delivery.URL != ""},
		{"delivery.secret", DeliveryWebhook, t.Delivery.Secret != ""},
		{"delivery.previous_secret", DeliveryWebhook, t.Delivery.PreviousSecret != ""},
		{"delivery.success", DeliveryWebhook, t.Delivery.Success != ""},
		{"delivery.error_body", DeliveryWebhook, t.Delivery.ErrorBody},
		{"delivery.method", DeliveryWebhook, t.Delivery.Method != ""},
		{"delivery.headers", DeliveryWebhook, len(t.Delivery.Headers) > 0},
		{"delivery.allow_job_url", DeliveryWebhook, t.Delivery.AllowJobURL},
		{"delivery.subject", DeliveryNATS, t.Delivery.Subject != ""},
		{"delivery.kafka_topic", DeliveryKafka, t.Delivery.KafkaTopic != ""},
	} {
		if f.set && typ != f.typ {
			return Invalid(f.name, "%s is only for %s delivery, not %s", f.name, f.typ, typ)
		}
	}
	if typ == DeliveryKafka {
		if err := ValidateKafkaTopic("delivery.kafka_topic", t.Delivery.KafkaTopic); err != nil {
			return err
		}
	}
	switch p := t.Delivery.PreviousSecret; {
	case p != "" && t.Delivery.Secret == "":
		return Invalid("delivery.previous_secret", "delivery.previous_secret needs delivery.secret: it is the secret being rotated out")
	case p != "" && p == t.Delivery.Secret:
		return Invalid("delivery.previous_secret", "delivery.previous_secret must differ from delivery.secret")
	}
	switch t.Delivery.Method {
	case "", "POST", "PUT", "PATCH":
	default:
		return Invalid("delivery.method", "delivery.method must be POST, PUT or PATCH")
	}
	if err := validateHeaders(t.Delivery.Headers); err != nil {
		return err
	}
	if t.Delivery.Timeout < 0 || t.Delivery.Timeout > 5*time.Minute {
		return Invalid("delivery.timeout", "delivery.timeout must be between 0 and 5m")
	}
	if t.TTR != 0 {
		if err := ValidateTTR("ttr", t.TTR); err != nil {
			return err
		}
	}
	if t.MaxAttempts != 0 {
		if err := ValidateMaxAttempts("max_attempts", t.MaxAttempts); err != nil {
			return err
		}
	}
	if t.Delay < 0 {
		return Invalid("delay", "delay must not be negative")
	}
	if t.MaxInFlight < 0 || t.MaxInFlight > MaxInFlightMax {
		return Invalid("max_in_flight", "max_in_flight must be between 1 and %d (0 or absent: no bound)", MaxInFlightMax)
	}
	if t.KeyConcurrency < 0 || t.KeyConcurrency > KeyConcurrencyMax {
		return Invalid("key_concurrency", "key_concurrency must be between 1 and %d (0 or absent: no bound)", KeyConcurrencyMax)
	}
	if err := t.Rate.Validate(); err != nil {
		return err
	}
	if t.ExpiresIn < 0 {
		return Invalid("expires_in", "expires_in must not be negative (0 or absent: jobs never expire)")
	}
	if t.Retention != 0 {
		if err := ValidateRetention("retention", t.Retention); err != nil {
			return err
		}
	}
	if t.OnDead != "" {
		if err := ValidateTopicName(t.OnDead); err != nil {
			return Invalid("on_dead", "on_dead: %s", err)
		}
		if t.OnDead == t.Name {
			return Invalid("on_dead", "on_dead must name another topic: a notice of a notice is never sent")
		}
	}
	if err := t.Events.validate(t.Name); err != nil {
		return err
	}
	switch t.UniqueKeys {
	case "", UniqueKeysReject, UniqueKeysReplace:
	default:
		return Invalid("unique_keys", "unique_keys must be reject or replace")
	}
	if t.Concurrency < 0 || t.Concurrency > ConcurrencyMax {
		return Invalid("concurrency", "concurrency must be between 1 and %d", ConcurrencyMax)
	}
	return t.Backoff.Validate()
}

// KafkaTopicMaxLen is the longest Kafka topic name Kafka accepts.
const KafkaTopicMaxLen = 249

// ValidateKafkaTopic checks that name is a Kafka topic name Kafka accepts:
// 1 to KafkaTopicMaxLen of [a-zA-Z0-9._-], not "." or "..". It returns a
// *FieldError naming field.
func ValidateKafkaTopic(field, name string) error {
	switch {
	case name == "":
		return Invalid(field, "%s is required: the Kafka topic the jobs are produced to", field)
	case len(name) > KafkaTopicMaxLen:
		return Invalid(field, "%s must be at most %d characters", field, KafkaTopicMaxLen)
	case name == "." || name == "..":
		return Invalid(field, "%s must not be %q", field, name)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return Invalid(field, "%s must be made of a-z, A-Z, 0-9, '.', '_' and '-'", field)
		}
	}
	return nil
}

// Ceiling is the longest delay the backoff waits: Max, or the longest of
// Delays when that is longer. A destination's Retry-After is honoured up
// to it.
func (b Backoff) Ceiling() time.Duration {
	c := b.Max
	for _, d := range b.Delays {
		c = max(c, d)
	}
	return c
}

// WithDefaults returns the backoff with every unset field at its default.
func (b Backoff) WithDefaults() Backoff {
	if !b.zero("initial") {
		b.Initial = cmp.Or(b.Initial, time.Second)
	}
	if !b.zero("max") {
		b.Max = cmp.Or(b.Max, time.Hour)
	}
	b.Factor = cmp.Or(b.Factor, 2)
	if !b.zero("jitter") {
		b.Jitter = cmp.Or(b.Jitter, 0.2)
	}
	return b
}

// Validate checks the backoff's ranges.
func (b *Backoff) Validate() error {
	switch {
	case b.Initial < 0 || b.Initial > 24*time.Hour:
		return Invalid("backoff.initial", "backoff.initial must be between 0 and 24h")
	case b.Max < 0 || b.Max > 7*24*time.Hour:
		return Invalid("backoff.max", "backoff.max must be between 0 and 168h")
	case b.Max != 0 && b.Initial > b.Max:
		return Invalid("backoff.initial", "backoff.initial must not exceed backoff.max")
	case b.Factor != 0 && (b.Factor < 1 || b.Factor > 100 || math.IsNaN(b.Factor)):
		return Invalid("backoff.factor", "backoff.factor must be between 1 and 100")
	case b.Jitter > 1 || math.IsNaN(b.Jitter):
		return Invalid("backoff.jitter", "backoff.jitter must be at most 1")
	}
	set := map[string]bool{"initial": b.Initial != 0, "max": b.Max != 0, "jitter": b.Jitter != 0}
	for _, f := range b.Zeros {
		switch {
		case !slices.Contains(BackoffZeroable, f):
			return Invalid("backoff.zeros", "backoff.zeros may name only %s, not %q", strings.Join(BackoffZeroable, ", "), f)
		case set[f]:
			return Invalid("backoff.zeros", "backoff.zeros names %s, which is not 0", f)
		}
	}
	return ValidateDelays("backoff.delays", b.Delays)
}

// ValidateDelays checks a retry schedule named field: at most DelaysMax
// delays, each between 0 and DelayMax.
func ValidateDelays(field string, delays []time.Duration) error {
	if len(delays) > DelaysMax {
		return Invalid(field, "%s may list at most %d delays", field, DelaysMax)
	}
	for i, d := range delays {
		if d < 0 || d > DelayMax {
			return Invalid(fmt.Sprintf("%s[%d]", field, i), "each of %s must be between 0 and 168h", field)
		}
	}
	return nil
}

// Delay returns the wait before retrying after the given failed attempt
// (1-based): Delays[attempt-1] (the last for later attempts) when Delays is
// set, else Initial·Factor^(attempt-1), capped at Max, spread by Jitter.
// The receiver must have its defaults filled.
func (b Backoff) Delay(attempt int) time.Duration {
	if n := len(b.Delays); n > 0 {
		return b.Delays[min(max(attempt, 1), n)-1]
	}
	d := float64(b.Initial) * math.Pow(b.Factor, float64(max(attempt-1, 0)))
	d = min(d, float64(b.Max))
	if b.Jitter > 0 {
		d *= 1 + b.Jitter*(2*rand.Float64()-1)
	}
	return time.Duration(d)
}

// Header limits of a webhook topic.
const (
	// HeadersMax bounds the headers a topic adds to its requests.
	HeadersMax = 20
	// HeaderValueMax bounds one added header's value, in bytes.
	HeaderValueMax = 4096
)

// reservedHeaders are headers a topic may not set: those of the request's
// framing and those delayq sets itself (its own Delayq-* too, checked by
// prefix, and the Standard Webhooks ones).
var reservedHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true, "Transfer-Encoding": true,
	"Host": true, "Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true, "Upgrade": true,
	"Proxy-Authorization": true, "Proxy-Connection": true, "Expect": true,
	"User-Agent": true, "Traceparent": true, "Tracestate": true,
}

// validateHeaders checks the headers a topic adds to its requests: at most
// HeadersMax, each a valid header name that is not reserved, with a valid
// value of at most HeaderValueMax bytes. Errors name the header's field.
func validateHeaders(h map[string]string) error {
	if len(h) > HeadersMax {
		return Invalid("delivery.headers", "delivery.headers may set at most %d headers", HeadersMax)
	}
	seen := make(map[string]string, len(h))
	for name, value := range h {
		field := "delivery.headers." + name
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if other, ok := seen[canon]; ok {
			return Invalid("delivery.headers", "delivery.headers names %s twice (%q, %q)", canon, other, name)
		}
		seen[canon] = name
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			return Invalid("delivery.headers", "delivery.headers: %q is not a header name", name)
		case reservedHeaders[canon] || strings.HasPrefix(canon, "Delayq-") || strings.HasPrefix(canon, "Webhook-"):
			return Invalid(field, "%s is set by delayq or by HTTP itself; a topic may not set it", canon)
		case len(value) > HeaderValueMax:
			return Invalid(field, "%s must be at most %d bytes", field, HeaderValueMax)
		case !httpguts.ValidHeaderFieldValue(value):
			return Invalid(field, "%s has a character a header value may not hold", field)
		}
	}
	return nil
}
