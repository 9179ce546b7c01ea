package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Span attributes, after the OTel messaging conventions where they fit.
const (
	attrMessagingSystem    = attribute.Key("messaging.system")
	attrMessagingOperation = attribute.Key("messaging.operation.type")
	attrMessagingOpName    = attribute.Key("messaging.operation.name")
	attrDestination        = attribute.Key("messaging.destination.name")
	attrMessageID          = attribute.Key("messaging.message.id")
	attrBatchCount         = attribute.Key("messaging.batch.message_count")
	attrAttempt            = attribute.Key("delayq.attempt")
	attrTransportSpan      = attribute.Key("delayq.transport")
	attrOutcomeSpan        = attribute.Key("delayq.outcome")
	attrLateness           = attribute.Key("delayq.lateness_ms")
	attrRunAt              = attribute.Key("delayq.run_at")
	attrDeliveryType       = attribute.Key("delayq.delivery.type")
	attrServerAddress      = attribute.Key("server.address")
)

var systemDelayq = attrMessagingSystem.String("delayq")

// traceContext is the W3C trace context propagator; a job's traceparent is
// always in its format.
var traceContext propagation.TraceContext

// withTraceParent returns ctx with the remote span context of a W3C
// traceparent, or ctx as it is when tp does not parse.
func withTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// formatTraceParent returns the W3C traceparent of sc, "" when sc is not
// valid.
func formatTraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = append(b, sc.TraceID().String()...)
	b = append(b, '-')
	b = append(b, sc.SpanID().String()...)
	b = append(b, '-')
	b = append(b, sc.TraceFlags().String()...)
	return string(b)
}

// propagator is the global text map propagator Setup installs.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
