package telemetry

import (
	"cmp"
	"context"
	"errors"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
)

// Deliverer is a core.Deliverer decorator that traces each delivery attempt
// with a consumer span, hands the job on carrying that span's traceparent
// (which the webhook and NATS deliverers send), and records how long the
// attempt took. Create it with NewDeliverer and put it outermost, around
// the endpoint breakers.
type Deliverer struct {
	next   core.Deliverer
	tracer trace.Tracer
	in     *instruments
	clock  core.Clock
}

var _ core.Deliverer = (*Deliverer)(nil)

// NewDeliverer returns d decorated with the traces and metrics of cfg's
// providers. Errors: an instrument the meter provider refused.
func NewDeliverer(d core.Deliverer, cfg Config) (*Deliverer, error) {
	cfg = cfg.WithDefaults()
	in, err := newInstruments(cfg.MeterProvider.Meter(scope))
	if err != nil {
		return nil, err
	}
	return &Deliverer{next: d, tracer: cfg.tracer(), in: in, clock: cfg.Clock}, nil
}

// ValidateTopic implements core.Deliverer by asking the wrapped deliverer.
func (d *Deliverer) ValidateTopic(topic *core.Topic) error { return d.next.ValidateTopic(topic) }

// ValidateJobURL implements core.JobURLValidator by asking the wrapped
// deliverer.
func (d *Deliverer) ValidateJobURL(raw string) error { return core.ValidateJobURL(d.next, raw) }

// DeliveryAdmits implements core.DeliveryGate by asking the wrapped
// deliverer.
func (d *Deliverer) DeliveryAdmits(topic *core.Topic) (int, time.Duration) {
	return core.DeliveryAdmits(d.next, topic)
}

// Deliver implements core.Deliverer: one span "deliver <topic>" per
// attempt, child of the job's traceparent.
func (d *Deliverer) Deliver(ctx context.Context, p *core.DeliverParams) error {
	if p == nil || p.Topic == nil || p.Job == nil {
		return core.Invalid("", "telemetry: deliver: no params (topic and job are required)")
	}
	topic, job := p.Topic, p.Job
	start := d.clock.Now()
	var span trace.Span
	if d.tracer != nil {
		attrs := []attribute.KeyValue{
			systemDelayq, attrMessagingOperation.String("process"), attrMessagingOpName.String("deliver"),
			attrDestination.String(job.Topic), attrMessageID.String(job.ID), attrAttempt.Int(job.Attempt),
			attrDeliveryType.String(topic.Delivery.Type),
		}
		// A job's own URL is where its delivery goes (core.Job.URL).
		if target := cmp.Or(job.URL, topic.Delivery.URL); target != "" {
			if u, err := url.Parse(target); err == nil {
				attrs = append(attrs, attrServerAddress.String(u.Host))
			}
		} else if topic.Delivery.Subject != "" {
			attrs = append(attrs, attrServerAddress.String(topic.Delivery.Subject))
		}
		ctx, span = d.tracer.Start(withTraceParent(ctx, job.TraceParent), "deliver "+job.Topic,
			trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
		if tp := formatTraceParent(span.SpanContext()); tp != "" && tp != job.TraceParent {
			c := *job
			c.TraceParent = tp
			job = &c
			p = &core.DeliverParams{Topic: topic, Job: job}
		}
	}
	err := d.next.Deliver(ctx, p)
	outcome := outcomeOK
	switch {
	case errors.Is(err, breaker.ErrOpen):
		outcome = outcomeBreakerOpen
	case err != nil:
		outcome = outcomeFailed
	}
	d.in.deliveryDuration.Record(ctx, d.clock.Now().Sub(start).Seconds(), metric.WithAttributeSet(attribute.NewSet(
		attrQueue.String(job.Topic), attrTransport.String(topic.Delivery.Type), attrOutcome.String(outcome))))
	if span != nil {
		span.SetAttributes(attrOutcomeSpan.String(outcome))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	return err
}
