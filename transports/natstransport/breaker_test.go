package natstransport_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// TestBreakerOverEngine delivers through endpoint breakers: a topic whose
// own 1ns timeout fails every publish opens its circuit, not that of
// another topic publishing to the same subject, whose jobs (one attempt
// each) are all delivered; and the jobs of failing topics go dead only on
// an attempt that was sent, never on a refusal of their breaker.
func TestBreakerOverEngine(t *testing.T) {
	t.Parallel()
	var breakers *breaker.Deliverer
	b := setup(t, embeddedDialer(t), started, func(c *setupConfig) {
		c.wrap = func(d core.Deliverer) core.Deliverer {
			breakers = breaker.NewDeliverer(d, breaker.DelivererConfig{Config: breaker.Config{
				ConsecutiveFailures: 2, OpenTimeout: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
			}})
			return breakers
		}
	})
	ctx := context.Background()
	js, err := jetstream.New(b.nc)
	require.NoError(t, err)
	name := strings.ToUpper(b.prefix) + "_FULL"
	full := b.prefix + ".full"
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{full},
		Storage: jetstream.MemoryStorage, MaxMsgs: 1, Discard: jetstream.DiscardNew})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	_, err = js.Publish(ctx, full, []byte("0"))
	require.NoError(t, err)

	shared := b.prefix + ".shared"
	fast := core.Backoff{Initial: time.Millisecond, Max: time.Millisecond, Factor: 1, Jitter: -1}
	for _, tp := range []*core.Topic{
		{Name: "hasty", MaxAttempts: 2, Backoff: fast, Delivery: core.Delivery{Type: core.DeliveryNATS, Subject: shared, Timeout: time.Nanosecond}},
		{Name: "full", MaxAttempts: 2, Backoff: fast, Delivery: core.Delivery{Type: core.DeliveryNATS, Subject: full}},
		{Name: "steady", MaxAttempts: 1, Delivery: core.Delivery{Type: core.DeliveryNATS, Subject: shared}},
	} {
		require.NoError(t, b.engine.PutTopic(ctx, tp))
	}
	var failing []string
	for i := range 4 {
		for _, topic := range []string{"hasty", "full"} {
			failing = append(failing, b.push(t, topic, fmt.Sprint(i)).ID)
		}
	}
	require.Eventually(t, func() bool {
		return breakers.State("hasty", "nats:"+shared) != breaker.StateClosed && breakers.State("full", "nats:"+full) != breaker.StateClosed
	}, 10*time.Second, time.Millisecond)

	var steady []string
	for i := range 10 {
		steady = append(steady, b.push(t, "steady", fmt.Sprint(i)).ID)
	}
	require.ElementsMatch(t, steady, b.store.Wait(t, storetest.OutcomeAck, len(steady), 10*time.Second))
	for _, id := range steady {
		j := b.job(t, id)
		require.Equal(t, core.StateDone, j.State)
		require.Equal(t, 1, j.Attempt)
	}
	require.Equal(t, breaker.StateClosed, breakers.State("steady", "nats:"+shared))

	// Each failing job needs two sent attempts through a circuit that lets
	// one probe through every OpenTimeout; a loaded CI host has taken
	// seconds, so the deadline is generous and a miss says where the job
	// stood.
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range failing {
		j := b.job(t, id)
		for j.State != core.StateDead && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			j = b.job(t, id)
		}
		require.Equal(t, core.StateDead, j.State, "job %s of %s: attempt %d, run_at %s, last error %q, history %+v; circuits %+v",
			id, j.Topic, j.Attempt, j.RunAt, j.LastError, j.History, breakers.States())
		require.NotContains(t, j.LastError, "not sent", "job %s went dead on a sent attempt", id)
		last := j.History[len(j.History)-1]
		require.Equal(t, j.Attempt, last.Attempt)
		require.NotContains(t, last.Error, "not sent")
	}
}
