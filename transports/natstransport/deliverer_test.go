package natstransport_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/transports/natstransport"
	"github.com/delayq/delayq/transports/wire"
)

func started(c *setupConfig) { c.start = true }

// natsTopic configures topic for NATS delivery on subject ("" for the
// default) with a long backoff, so that a failed attempt is not retried
// during the test.
func (b *testBundle) natsTopic(t *testing.T, topic, subject string) {
	t.Helper()
	require.NoError(t, b.engine.PutTopic(context.Background(), &core.Topic{
		Name:     topic,
		Delivery: core.Delivery{Type: core.DeliveryNATS, Subject: subject},
		Backoff:  core.Backoff{Initial: time.Hour, Max: time.Hour},
	}))
}

// TestPushDeliveredAtItsTime publishes a job with Delayq-Delay: 500ms and
// waits for it on the topic's delivery subject.
func TestPushDeliveredAtItsTime(t *testing.T) {
	t.Parallel()
	for _, srv := range servers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, srv.dial, started)
			topic := b.prefix + ".reminders"
			b.natsTopic(t, topic, "")
			got := make(chan *nats.Msg, 4)
			sub, err := b.nc.ChanSubscribe(natstransport.DefaultSubject(topic), got)
			require.NoError(t, err)
			t.Cleanup(func() { _ = sub.Unsubscribe() })
			require.NoError(t, b.nc.Flush())

			body := `{"call": 7, "remind": true}`
			r := b.push(t, topic, body, "Delayq-Delay", "500ms", "traceparent", traceParent)
			select {
			case m := <-got:
				at := time.Now()
				lateness := at.Sub(r.RunAt)
				t.Logf("delivered %s after run_at", lateness)
				require.False(t, at.Before(r.RunAt), "delivered %s early", -lateness)
				require.Less(t, lateness, 250*time.Millisecond)
				require.Equal(t, "delayq.deliver."+topic, m.Subject)
				require.Equal(t, body, string(m.Data), "the body is the payload, byte for byte")
				require.Equal(t, r.ID, m.Header.Get("Delayq-Id"))
				require.Equal(t, "1", m.Header.Get("Delayq-Attempt"))
				require.Equal(t, r.RunAt.UTC().Format(wire.TimeLayout), m.Header.Get("Delayq-Run-At"))
				require.Equal(t, topic, m.Header.Get("Delayq-Topic"))
				require.Equal(t, traceParent, m.Header.Get("traceparent"))
			case <-time.After(10 * time.Second):
				t.Fatal("no delivery within 10s")
			}
			require.Equal(t, r.ID, b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second)[0], "the core publish completed the delivery")
			require.Equal(t, core.StateDone, b.job(t, r.ID).State)
		})
	}
}

// TestDeliverThroughJetStream checks that a subject a stream holds is
// published through JetStream and completed by the PubAck.
func TestDeliverThroughJetStream(t *testing.T) {
	t.Parallel()
	for _, srv := range servers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, srv.dial, started)
			js, err := jetstream.New(b.nc)
			require.NoError(t, err)
			ctx := context.Background()
			name := strings.ToUpper(b.prefix) + "_OUT"
			stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{b.prefix + ".out.>"}, Storage: jetstream.MemoryStorage})
			require.NoError(t, err)
			t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })

			subject := b.prefix + ".out.orders"
			b.natsTopic(t, "orders", subject)
			r := b.push(t, "orders", `{"n":1}`, "traceparent", traceParent)
			require.Equal(t, r.ID, b.store.Wait(t, storetest.OutcomeAck, 1, 10*time.Second)[0])

			m, err := stream.GetLastMsgForSubject(ctx, subject)
			require.NoError(t, err)
			require.Equal(t, `{"n":1}`, string(m.Data))
			require.Equal(t, r.ID, m.Header.Get("Delayq-Id"))
			require.Equal(t, "1", m.Header.Get("Delayq-Attempt"))
			require.Equal(t, traceParent, m.Header.Get("traceparent"))
		})
	}
}

// TestJetStreamRefusalFailsTheAttempt checks that the PubAck, not the
// publish, decides: a stream that refuses the message fails the attempt.
func TestJetStreamRefusalFailsTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, embeddedDialer(t), started)
	js, err := jetstream.New(b.nc)
	require.NoError(t, err)
	ctx := context.Background()
	name := strings.ToUpper(b.prefix) + "_FULL"
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{b.prefix + ".full"}, Storage: jetstream.MemoryStorage,
		MaxMsgs: 1, Discard: jetstream.DiscardNew,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	b.natsTopic(t, "full", b.prefix+".full")

	first := b.push(t, "full", `1`)
	require.Equal(t, first.ID, b.store.Wait(t, storetest.OutcomeAck, 1, 10*time.Second)[0])
	second := b.push(t, "full", `2`)
	require.Equal(t, second.ID, b.store.Wait(t, storetest.OutcomeRetry, 1, 10*time.Second)[0])
	j := b.job(t, second.ID)
	require.Equal(t, core.StateScheduled, j.State)
	require.Contains(t, j.LastError, "maximum messages")
}

// TestDeliverWithoutJetStream delivers through a server that has no
// JetStream: a core publish completes the delivery.
func TestDeliverWithoutJetStream(t *testing.T) {
	t.Parallel()
	b := setup(t, urlDialer(sharedExternal(t, false).URL()), started)
	b.natsTopic(t, "plain", "plain.deliveries")
	got := make(chan *nats.Msg, 1)
	sub, err := b.nc.ChanSubscribe("plain.deliveries", got)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, b.nc.Flush())
	r := b.push(t, "plain", `"hi"`)
	select {
	case m := <-got:
		require.Equal(t, `"hi"`, string(m.Data))
		require.Equal(t, r.ID, m.Header.Get("Delayq-Id"))
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
	}
	require.Equal(t, r.ID, b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second)[0])
}

func TestValidateTopic(t *testing.T) {
	t.Parallel()
	b := setup(t, embeddedDialer(t))
	for subject, field := range map[string]string{
		"":                        "",
		"orders.due":              "",
		"delayq.deliver.x":        "",
		"delayq.deliver.a.b.c":    "",
		"a-b_c.D9":                "",
		"orders.*":                "delivery.subject",
		"orders.>":                "delivery.subject",
		">":                       "delivery.subject",
		"a..b":                    "delivery.subject",
		".a":                      "delivery.subject",
		"a.":                      "delivery.subject",
		"a b":                     "delivery.subject",
		"a\tb":                    "delivery.subject",
		"$JS.API.STREAM.NAMES":    "delivery.subject",
		"delayq.push.loop":        "delivery.subject",
		"delayq.cancel":           "delivery.subject",
		"delayq.d.x.y":            "delivery.subject",
		"delayq.s.x.y":            "delivery.subject",
		"$KV.DELAYQ_TOPICS.x":     "delivery.subject",
		"$SYS.REQ.SERVER.PING":    "delivery.subject",
		"_INBOX":                  "delivery.subject",
		"_INBOX.abc.1":            "delivery.subject",
		"_INBOX_x.1":              "",
		strings.Repeat("a", 1000): "delivery.subject",
	} {
		err := b.engine.PutTopic(context.Background(), &core.Topic{Name: "v", Delivery: core.Delivery{Type: core.DeliveryNATS, Subject: subject}})
		if field == "" {
			require.NoError(t, err, "subject %q", subject)
			continue
		}
		requireFieldError(t, err, field, subject)
	}
	err := b.engine.PutTopic(context.Background(), &core.Topic{Name: "v", Delivery: core.Delivery{Type: core.DeliveryNATS, URL: "http://x"}})
	requireFieldError(t, err, "delivery.url", "")
	err = b.engine.PutTopic(context.Background(), &core.Topic{Name: "v", Delivery: core.Delivery{Type: core.DeliveryNATS, Secret: "s"}})
	requireFieldError(t, err, "delivery.secret", "")
	// A timeout bounds each publish with its confirmation.
	require.NoError(t, b.engine.PutTopic(context.Background(), &core.Topic{Name: "v", Delivery: core.Delivery{Type: core.DeliveryNATS, Timeout: 3 * time.Second}}))
	stored, err := b.engine.GetTopic(context.Background(), "v")
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, stored.Delivery.Timeout)
	require.Error(t, b.deliverer.ValidateTopic(&core.Topic{Name: "v", Delivery: core.Delivery{Type: core.DeliveryWebhook}}))
}

func requireFieldError(t *testing.T, err error, field, subject string) {
	t.Helper()
	require.Error(t, err, "subject %q", subject)
	fe, ok := errors.AsType[*core.FieldError](err)
	require.True(t, ok, "%T %v", err, err)
	require.Equal(t, field, fe.Field, "subject %q: %v", subject, err)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
}

func TestDelivererConfig(t *testing.T) {
	t.Parallel()
	_, err := natstransport.NewDeliverer(natstransport.DelivererConfig{})
	require.ErrorContains(t, err, "Conn")
	require.Equal(t, "delayq.deliver.orders.close", natstransport.DefaultSubject("orders.close"))
}

// TestValidateTopicOwnInbox checks that a delivery cannot publish into the
// custom inbox prefix of the deliverer's own connection, where the answers
// to its JetStream requests travel.
func TestValidateTopicOwnInbox(t *testing.T) {
	t.Parallel()
	nc, err := sharedEmbedded(t).Connect(nats.CustomInboxPrefix("_OWN_INBOX"))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	d, err := natstransport.NewDeliverer(natstransport.DelivererConfig{Conn: nc})
	require.NoError(t, err)
	for subject, field := range map[string]string{
		"_OWN_INBOX.abc.1": "delivery.subject",
		"_OWN_INBOX":       "delivery.subject",
		"_INBOX.abc":       "delivery.subject",
		"_OWN_INBOXES.x":   "",
	} {
		err := d.ValidateTopic(&core.Topic{Name: "v", Delivery: core.Delivery{Type: core.DeliveryNATS, Subject: subject}})
		if field == "" {
			require.NoError(t, err, "subject %q", subject)
			continue
		}
		requireFieldError(t, err, field, subject)
	}
}

// TestDeliverNilParams checks that Deliver refuses params without a topic
// or a job with ErrInvalidArgument rather than panicking.
func TestDeliverNilParams(t *testing.T) {
	t.Parallel()
	nc, err := sharedEmbedded(t).Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	d, err := natstransport.NewDeliverer(natstransport.DelivererConfig{Conn: nc})
	require.NoError(t, err)
	topic := &core.Topic{Name: "t", Delivery: core.Delivery{Type: core.DeliveryNATS}}
	for _, p := range []*core.DeliverParams{nil, {Job: &core.Job{ID: "j", Topic: "t"}}, {Topic: topic}} {
		require.ErrorIs(t, d.Deliver(t.Context(), p), core.ErrInvalidArgument)
	}
}
