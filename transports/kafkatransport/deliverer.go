package kafkatransport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// DeliverTimeoutDefault bounds one delivery, from handing the record to the
// client to the brokers' acknowledgement, unless the topic sets
// delivery.timeout.
const DeliverTimeoutDefault = 10 * time.Second

// Headers of a delivered record. Kafka header names are case-sensitive:
// these are lower case, as the traceparent of W3C Trace Context.
const (
	// HeaderID is the job's id.
	HeaderID = "delayq-id"
	// HeaderTopic is the job's delayq topic.
	HeaderTopic = "delayq-topic"
	// HeaderAttempt is the 1-based attempt of the delivery.
	HeaderAttempt = "delayq-attempt"
	// HeaderRunAt is the job's run_at, RFC 3339 with milliseconds in UTC.
	HeaderRunAt = "delayq-run-at"
	// HeaderTraceParent carries the W3C trace context of the push.
	HeaderTraceParent = "traceparent"
)

// ProducerOpts are the producer options of a delivery client, to pass to
// kafkaclient.Config.NewClient: acknowledgement by every in-sync replica,
// franz-go's default, stated because a delivery's success must mean the
// record is kept (idempotent writes, the other half, are on unless
// kgo.DisableIdempotentWrite is given, which this package never does);
// and no linger, since the engine bounds the deliveries in flight per
// topic (its concurrency), so waiting for more records to fill a batch
// only delays them: records that come while a request is in flight are
// batched into the next one anyway (docs/benchmarks.md has both).
func ProducerOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	}
}

// DelivererConfig configures a Deliverer. Zero fields take their defaults.
type DelivererConfig struct {
	// Client produces the records. Required; made with ProducerOpts.
	Client *kgo.Client
	// Timeout bounds one delivery unless the topic sets delivery.timeout.
	//
	// Defaults to DeliverTimeoutDefault (10s).
	Timeout time.Duration
	// Refused are Kafka topics no delayq topic may deliver to: the topics
	// of this server's Kafka intake, whose records would come back as
	// pushes, a job delivered again and again.
	Refused []string
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c DelivererConfig) WithDefaults() DelivererConfig {
	c.Timeout = cmp.Or(c.Timeout, DeliverTimeoutDefault)
	return c
}

// Validate checks the configuration, defaults filled, and names the bad
// field.
func (c DelivererConfig) Validate() error {
	switch {
	case c.Client == nil:
		return errors.New("kafkatransport: DelivererConfig.Client is required")
	case c.Timeout <= 0:
		return errors.New("kafkatransport: DelivererConfig.Timeout must be positive")
	}
	return nil
}

// Deliverer produces the due jobs of kafka topics to their Kafka topics.
// It implements core.Deliverer for core.DeliveryKafka and is safe for
// concurrent use. Its topics all reach one cluster, which is down for all
// of them at once: it is a breaker.SharedEndpoint, so that an endpoint
// breaker around it keeps one circuit for the cluster, not one per topic.
type Deliverer struct {
	client   *kgo.Client
	timeout  time.Duration
	refused  []string
	endpoint string
}

var _ core.Deliverer = (*Deliverer)(nil)

// NewDeliverer returns a Deliverer configured by cfg. Errors: an invalid
// configuration.
func NewDeliverer(cfg DelivererConfig) (*Deliverer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	seeds, _ := cfg.Client.OptValue(kgo.SeedBrokers).([]string)
	return &Deliverer{client: cfg.Client, timeout: cfg.Timeout, refused: cfg.Refused, endpoint: "kafka:" + strings.Join(seeds, ",")}, nil
}

// SharedEndpoint implements breaker.SharedEndpoint: "kafka:" and the
// cluster's seed brokers, whatever the topic.
func (d *Deliverer) SharedEndpoint(*core.Topic) string { return d.endpoint }

// ValidateTopic checks that t is a kafka topic with a Kafka topic name
// Kafka accepts (core.ValidateKafkaTopic; Topic.Validate refuses the other
// types' fields). It returns a *core.FieldError.
func (d *Deliverer) ValidateTopic(t *core.Topic) error {
	if t.Delivery.Type != core.DeliveryKafka {
		return core.Invalid("delivery.type", "delivery.type must be %s for a kafka topic", core.DeliveryKafka)
	}
	if err := core.ValidateKafkaTopic("delivery.kafka_topic", t.Delivery.KafkaTopic); err != nil {
		return err
	}
	if slices.Contains(d.refused, t.Delivery.KafkaTopic) {
		return core.Invalid("delivery.kafka_topic", "delivery.kafka_topic %q is this server's Kafka intake topic: its records would come back as pushes", t.Delivery.KafkaTopic)
	}
	return nil
}

// Deliver produces job as one record to the topic's Kafka topic and waits
// for the brokers' acknowledgement, within the topic's delivery.timeout.
// The client batches the records of concurrent deliveries. Any error fails
// the attempt; a delivery that times out while its record is in flight may
// still be written, and then is written again by the retry (at least once,
// as every delivery). A refusal the brokers answered for this record or
// its Kafka topic alone (the topic unknown once the client's retries are
// spent, or an error Kafka does not retry: the topic not writable, the
// record too large) also matches core.ErrInvalidArgument, the topic's own
// fault: it opens no breaker of the cluster (breaker.IsEndpointFailure),
// which the other topics share.
func (d *Deliverer) Deliver(ctx context.Context, p *core.DeliverParams) error {
	if p == nil || p.Topic == nil || p.Job == nil {
		return core.Invalid("", "kafkatransport: deliver: no params (topic and job are required)")
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(p.Topic.Delivery.Timeout, d.timeout))
	defer cancel()
	rec := Record(p.Topic.Delivery.KafkaTopic, p.Job)
	done := make(chan error, 1)
	d.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		if err == nil {
			return nil
		}
		topicFault := errors.Is(err, kerr.UnknownTopicOrPartition) || errors.As(err, new(*kerr.Error)) && !kerr.IsRetriable(err)
		if err = fmt.Errorf("kafkatransport: produce to %s: %w", rec.Topic, err); topicFault {
			return topicError{err}
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("kafkatransport: produce to %s: no acknowledgement: %w", rec.Topic, context.Cause(ctx))
	}
}

// topicError is a produce error that is the topic's, not the cluster's:
// it matches core.ErrInvalidArgument too.
type topicError struct{ err error }

func (e topicError) Error() string        { return e.err.Error() }
func (e topicError) Unwrap() error        { return e.err }
func (e topicError) Is(target error) bool { return target == core.ErrInvalidArgument }

// Record returns the record that delivers job to the Kafka topic
// kafkaTopic: key, value and headers as the package documentation says.
func Record(kafkaTopic string, job *core.Job) *kgo.Record {
	value := []byte(job.Body)
	if len(value) == 0 {
		value = []byte("null")
	}
	headers := make([]kgo.RecordHeader, 0, 5)
	headers = append(headers,
		kgo.RecordHeader{Key: HeaderID, Value: []byte(job.ID)},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(job.Topic)},
		kgo.RecordHeader{Key: HeaderAttempt, Value: []byte(strconv.Itoa(job.Attempt))},
		kgo.RecordHeader{Key: HeaderRunAt, Value: job.RunAt.UTC().AppendFormat(nil, wire.TimeLayout)},
	)
	if job.TraceParent != "" {
		headers = append(headers, kgo.RecordHeader{Key: HeaderTraceParent, Value: []byte(job.TraceParent)})
	}
	return &kgo.Record{
		Topic:   kafkaTopic,
		Key:     []byte(cmp.Or(job.Key, job.ID)),
		Value:   value,
		Headers: headers,
	}
}
