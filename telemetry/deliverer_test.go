package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/telemetry"
)

// countingDeliverer counts the deliveries that reach it.
type countingDeliverer struct{ calls int }

func (*countingDeliverer) ValidateTopic(*core.Topic) error { return nil }

func (c *countingDeliverer) Deliver(context.Context, *core.DeliverParams) error {
	c.calls++
	return nil
}

// TestDelivererNilParams checks that params without a topic or a job are
// refused with ErrInvalidArgument rather than panicking, before a span is
// started or the wrapped deliverer is called.
func TestDelivererNilParams(t *testing.T) {
	t.Parallel()
	inner := &countingDeliverer{}
	d, err := telemetry.NewDeliverer(inner, telemetry.Config{TracerProvider: sdktrace.NewTracerProvider()})
	require.NoError(t, err)
	topic := &core.Topic{Name: "t", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://h.test/"}}
	for _, p := range []*core.DeliverParams{nil, {Job: &core.Job{ID: "j", Topic: "t"}}, {Topic: topic}} {
		require.ErrorIs(t, d.Deliver(t.Context(), p), core.ErrInvalidArgument)
	}
	require.Zero(t, inner.calls)
	require.NoError(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: &core.Job{ID: "j", Topic: "t"}}))
	require.Equal(t, 1, inner.calls)
}

// TestDelivererJobURL: the span of a job with its own URL names that URL's
// host, and a wrapped deliverer that checks no job URLs makes them refused.
func TestDelivererJobURL(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	d, err := telemetry.NewDeliverer(&countingDeliverer{}, telemetry.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	require.NoError(t, err)
	topic := &core.Topic{Name: "t", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://topic.test/", AllowJobURL: true}}
	for _, j := range []*core.Job{{ID: "own", Topic: "t", URL: "https://own.test:8443/cb"}, {ID: "plain", Topic: "t"}} {
		require.NoError(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: j}))
	}
	var hosts []string
	for _, s := range rec.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == "server.address" {
				hosts = append(hosts, a.Value.AsString())
			}
		}
	}
	require.Equal(t, []string{"own.test:8443", "topic.test"}, hosts)
	require.ErrorContains(t, d.ValidateJobURL("https://own.test/"), "not available on this server")
}

// gateDeliverer is a countingDeliverer that refuses every topic for a
// minute, as an open endpoint breaker does.
type gateDeliverer struct{ countingDeliverer }

func (*gateDeliverer) DeliveryAdmits(*core.Topic) (int, time.Duration) { return 0, time.Minute }

// TestDelivererPassesGate: the engine finds the endpoint breakers' gate
// through the telemetry decorator, and a deliverer without one admits all.
func TestDelivererPassesGate(t *testing.T) {
	t.Parallel()
	topic := &core.Topic{Name: "t", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://h.test/"}}
	d, err := telemetry.NewDeliverer(&gateDeliverer{}, telemetry.Config{TracerProvider: sdktrace.NewTracerProvider()})
	require.NoError(t, err)
	n, wait := core.DeliveryAdmits(d, topic)
	require.Zero(t, n)
	require.Equal(t, time.Minute, wait)
	d, err = telemetry.NewDeliverer(&countingDeliverer{}, telemetry.Config{TracerProvider: sdktrace.NewTracerProvider()})
	require.NoError(t, err)
	n, _ = core.DeliveryAdmits(d, topic)
	require.Equal(t, -1, n)
}
