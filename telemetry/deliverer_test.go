package telemetry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
