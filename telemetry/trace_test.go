package telemetry_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/telemetry"
)

// TestTracePushToWebhook follows one job from a push request that carries a
// traceparent to its webhook delivery: the push, claim and deliver spans
// are one trace under the request's span, and the webhook receives a
// traceparent of that trace naming the deliver span.
func TestTracePushToWebhook(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	b := setup(t, telemetry.Config{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider()}, nil)

	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	id := b.push(t, `{"topic":"orders.close","body":{"order":42},"delay":"50ms"}`, http.Header{"Traceparent": {client}})
	var got http.Header
	select {
	case got = <-b.received:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook delivery")
	}
	require.Equal(t, id, got.Get("Delayq-Id"))
	require.Equal(t, []string{id}, b.waitAcked(t, 1)) // the deliver span has ended

	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byName[strings.Fields(s.Name)[0]] = s
	}
	push, claim, deliver := byName["push"], byName["claim"], byName["deliver"]
	require.Equal(t, "push orders.close", push.Name)
	require.Equal(t, "claim orders.close", claim.Name)
	require.Equal(t, "deliver orders.close", deliver.Name)
	require.Equal(t, trace.SpanKindProducer, push.SpanKind)
	require.Equal(t, trace.SpanKindConsumer, deliver.SpanKind)

	traceID := push.SpanContext.TraceID()
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", traceID.String(), "the push joins the request's trace")
	require.Equal(t, "00f067aa0ba902b7", push.Parent.SpanID().String())
	require.Equal(t, push.SpanContext.SpanID(), claim.Parent.SpanID())
	require.Equal(t, claim.SpanContext.SpanID(), deliver.Parent.SpanID())
	for _, s := range []tracetest.SpanStub{claim, deliver} {
		require.Equal(t, traceID, s.SpanContext.TraceID())
	}
	want := fmt.Sprintf("00-%s-%s-01", traceID, deliver.SpanContext.SpanID())
	require.Equal(t, want, got.Get("traceparent"), "the webhook's traceparent names the deliver span of the push's trace")
	require.False(t, claim.StartTime.Before(push.StartTime))
	require.Contains(t, push.Attributes, attr("messaging.message.id", id))
	require.Contains(t, deliver.Attributes, attr("messaging.message.id", id))

	job, err := b.engine.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("00-%s-%s-01", traceID, push.SpanContext.SpanID()), job.TraceParent, "the stored traceparent is the push span's")

	t.Logf("client traceparent %s", client)
	for _, s := range []tracetest.SpanStub{push, claim, deliver} {
		t.Logf("%-22s kind=%-8s trace=%s span=%s parent=%s %s", s.Name, s.SpanKind, s.SpanContext.TraceID(), s.SpanContext.SpanID(),
			s.Parent.SpanID(), s.EndTime.Sub(s.StartTime).Round(time.Microsecond))
	}
	t.Logf("webhook received traceparent %s", got.Get("traceparent"))
}
