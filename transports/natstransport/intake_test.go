package natstransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/transports/natstransport"
)

const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestIntakePush(t *testing.T) {
	t.Parallel()
	for _, srv := range servers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, srv.dial)
			body := "{ \"order\" : 42 }"
			before := time.Now()
			r := b.push(t, "orders.close", body,
				"Delayq-Delay", "500ms", "Delayq-Id", "order-42-close", "Delayq-TTR", "45s",
				"Delayq-Max-Attempts", "3", "Delayq-Key", "order-42", "traceparent", traceParent,
				"Delayq-Backoff-Delays", "1m, 90000,0s", "Delayq-Priority", "-4")
			require.Equal(t, "order-42-close", r.ID)
			require.Equal(t, "orders.close", r.Topic)
			require.Equal(t, "scheduled", r.State)
			require.WithinDuration(t, before.Add(500*time.Millisecond), r.RunAt, 200*time.Millisecond)

			j := b.job(t, r.ID)
			require.Equal(t, body, string(j.Body), "the payload is kept byte for byte")
			require.Equal(t, 45*time.Second, j.TTR)
			require.Equal(t, 3, j.MaxAttempts)
			require.Equal(t, "order-42", j.Key)
			require.Equal(t, traceParent, j.TraceParent)
			require.Equal(t, []time.Duration{time.Minute, 90 * time.Second, 0}, j.RetryDelays)
			require.Equal(t, -4, j.Priority)
			require.True(t, j.RunAt.Equal(r.RunAt))

			// Header names match in any case; run_at and ms delays work.
			at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
			r = b.push(t, "orders.close", `[]`, "delayq-run-at", at.Format(time.RFC3339Nano))
			require.True(t, at.Equal(r.RunAt), "%s", r.raw)
			r = b.push(t, "orders.close", `[]`, "Delayq-Run-At", strconv.FormatInt(at.Unix(), 10)+".5")
			require.True(t, at.Truncate(time.Second).Add(500*time.Millisecond).Equal(r.RunAt), "Unix seconds: %s", r.raw)
			r = b.push(t, "orders.close", `1`, "DELAYQ-DELAY", "1500")
			require.WithinDuration(t, time.Now().Add(1500*time.Millisecond), r.RunAt, 500*time.Millisecond)
			// An expiry from run_at, or at a time.
			r = b.push(t, "orders.close", `1`, "Delayq-Run-At", at.Format(time.RFC3339Nano), "Delayq-Expires-In", "90m")
			require.True(t, at.Add(90*time.Minute).Equal(b.job(t, r.ID).ExpiresAt), "%s", r.raw)
			r = b.push(t, "orders.close", `1`, "Delayq-Expires-At", at.Format(time.RFC3339Nano))
			require.True(t, at.Equal(b.job(t, r.ID).ExpiresAt), "%s", r.raw)
			// No delay: due now; no payload: a null body.
			r = b.push(t, "orders.close", ``)
			require.Equal(t, "ready", r.State)
			require.Equal(t, "null", string(b.job(t, r.ID).Body))
		})
	}
}

func TestIntakeErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, embeddedDialer(t), func(c *setupConfig) { c.limits.MaxBodyBytes = 100 })
	for _, tc := range []struct {
		topic, body string
		headers     []string
		code, field string
	}{
		{"t", `not json`, nil, "invalid_argument", "payload"},
		{"t", `{"a":`, nil, "invalid_argument", "payload"},
		{"t", `"` + strings.Repeat("x", 200) + `"`, nil, "too_large", "payload"},
		{"t", `{}`, []string{"Delayq-Delay", "soon"}, "invalid_argument", "Delayq-Delay"},
		{"t", `{}`, []string{"Delayq-Delay", "-1s"}, "invalid_argument", "Delayq-Delay"},
		{"t", `{}`, []string{"Delayq-Delay", "9000h"}, "invalid_argument", "Delayq-Delay"},
		{"t", `{}`, []string{"Delayq-Delay", "1s", "Delayq-Run-At", "2030-01-01T00:00:00Z"}, "invalid_argument", "Delayq-Delay"},
		{"t", `{}`, []string{"Delayq-Run-At", "tomorrow"}, "invalid_argument", "Delayq-Run-At"},
		{"t", `{}`, []string{"Delayq-TTR", "0"}, "invalid_argument", "Delayq-TTR"},
		{"t", `{}`, []string{"Delayq-TTR", "1ms"}, "invalid_argument", "Delayq-TTR"},
		{"t", `{}`, []string{"Delayq-Max-Attempts", "many"}, "invalid_argument", "Delayq-Max-Attempts"},
		{"t", `{}`, []string{"Delayq-Max-Attempts", "0"}, "invalid_argument", "Delayq-Max-Attempts"},
		{"t", `{}`, []string{"Delayq-Priority", "urgent"}, "invalid_argument", "Delayq-Priority"},
		{"t", `{}`, []string{"Delayq-Priority", "11"}, "invalid_argument", "Delayq-Priority"},
		{"t", `{}`, []string{"Delayq-Url", ""}, "invalid_argument", "Delayq-Url"},
		{"t", `{}`, []string{"Delayq-Url", "https://svc/own"}, "invalid_argument", "Delayq-Url"}, // not a webhook topic
		{"t", `{}`, []string{"Delayq-Id", "bad id!"}, "invalid_argument", "Delayq-Id"},
		{"t", `{}`, []string{"Delayq-Id", ""}, "invalid_argument", "Delayq-Id"},
		{"t", `{}`, []string{"Delayq-Key", "a\x01b"}, "invalid_argument", "Delayq-Key"},
		{"t", `{}`, []string{"Delayq-Backoff-Delays", "1m,soon"}, "invalid_argument", "Delayq-Backoff-Delays"},
		{"t", `{}`, []string{"Delayq-Backoff-Delays", "1m,-1s"}, "invalid_argument", "Delayq-Backoff-Delays"},
		{"t", `{}`, []string{"Delayq-Backoff-Delays", ""}, "invalid_argument", "Delayq-Backoff-Delays"},
		{"t", `{}`, []string{"Delayq-Expires-In", "soon"}, "invalid_argument", "Delayq-Expires-In"},
		{"t", `{}`, []string{"Delayq-Expires-In", "0s"}, "invalid_argument", "Delayq-Expires-In"},
		{"t", `{}`, []string{"Delayq-Expires-At", "2001-01-01T00:00:00Z"}, "invalid_argument", "Delayq-Expires-At"},
		{"t", `{}`, []string{"Delayq-Expires-At", "2030-01-01T00:00:00Z", "Delayq-Expires-In", "1h"}, "invalid_argument", "Delayq-Expires-In"},
		{"t", `{}`, []string{"Delayq-Delay", "1s", "delayq-delay", "2s"}, "invalid_argument", "Delayq-Delay"},
		{"t", `{}`, []string{"Delayq-Dealy", "1s"}, "invalid_argument", "Delayq-Dealy"},
		{"a$b", `{}`, nil, "invalid_argument", "subject"},
	} {
		r := b.request(t, b.intake.PushSubject(tc.topic), tc.body, tc.headers...)
		requireError(t, r, tc.code, tc.field)
	}
	// An id in use is a conflict, and nothing changes.
	first := b.push(t, "t", `1`, "Delayq-Id", "dup", "Delayq-Delay", "1h")
	r := b.request(t, b.intake.PushSubject("t"), `2`, "Delayq-Id", "dup")
	requireError(t, r, "conflict", "")
	j := b.job(t, "dup")
	require.Equal(t, "1", string(j.Body))
	require.True(t, j.RunAt.Equal(first.RunAt))
	// Other headers are ignored; an invalid traceparent is dropped.
	r = b.push(t, "t", `3`, "X-Custom", "1", "traceparent", "nonsense")
	require.Empty(t, b.job(t, r.ID).TraceParent)
}

func TestIntakeWithoutReply(t *testing.T) {
	t.Parallel()
	b := setup(t, embeddedDialer(t))
	m := nats.NewMsg(b.intake.PushSubject("fire.forget"))
	m.Data = []byte(`{"x":1}`)
	m.Header.Set("Delayq-Id", "ff-1")
	require.NoError(t, b.nc.PublishMsg(m))
	require.Equal(t, "ff-1", b.store.Wait(t, storetest.OutcomePut, 1, 10*time.Second)[0])
	require.Equal(t, `{"x":1}`, string(b.job(t, "ff-1").Body))
}

func TestIntakeManyRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, embeddedDialer(t))
	const n = 2000
	inbox := nats.NewInbox()
	replies := make(chan *nats.Msg, n)
	sub, err := b.nc.ChanSubscribe(inbox, replies)
	require.NoError(t, err)
	defer sub.Unsubscribe()
	for i := range n {
		m := nats.NewMsg(b.intake.PushSubject("many"))
		m.Reply = inbox
		m.Data = []byte(`{"i":` + string(rune('0'+i%10)) + `}`)
		require.NoError(t, b.nc.PublishMsg(m))
	}
	ids := map[string]bool{}
	for range n {
		select {
		case m := <-replies:
			var r reply
			require.NoError(t, json.Unmarshal(m.Data, &r))
			require.Nil(t, r.Error, "%s", m.Data)
			ids[r.ID] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d replies", len(ids), n)
		}
	}
	require.Len(t, ids, n)
	topic, err := b.engine.GetTopic(context.Background(), "many")
	require.NoError(t, err)
	require.Equal(t, int64(n), topic.Counts.Ready)
}

func TestIntakeCancel(t *testing.T) {
	t.Parallel()
	for _, srv := range servers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, srv.dial)
			id := b.push(t, "cancel.me", `{}`, "Delayq-Delay", "1h").ID
			r := b.request(t, b.intake.CancelSubject(), id)
			require.Nil(t, r.Error, "%s", r.raw)
			require.Equal(t, "{}", string(r.raw))
			require.Equal(t, core.StateCancelled, b.job(t, id).State)

			requireError(t, b.request(t, b.intake.CancelSubject(), id), "not_found", "")
			requireError(t, b.request(t, b.intake.CancelSubject(), "no-such-job"), "not_found", "")
			requireError(t, b.request(t, b.intake.CancelSubject(), ""), "invalid_argument", "payload")

			// A job being delivered cannot be cancelled.
			busy := b.push(t, "cancel.busy", `{}`).ID
			jobs, err := b.engine.Claim(context.Background(), &core.ClaimJobsParams{Topic: "cancel.busy", Max: 1})
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			requireError(t, b.request(t, b.intake.CancelSubject(), busy), "conflict", "")
		})
	}
}

func TestIntakeQueueGroupSharesMessages(t *testing.T) {
	t.Parallel()
	dial := embeddedDialer(t)
	b := setup(t, dial)
	// A second instance on the same subjects, in the same queue group, with
	// its own connection and the same engine.
	other, err := natstransport.NewIntake(natstransport.IntakeConfig{
		Conn: dial(t), Engine: b.engine, Prefix: b.prefix, QueueGroup: b.prefix,
	})
	require.NoError(t, err)
	require.NoError(t, other.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, other.Stop(context.Background())) })

	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			m := nats.NewMsg(b.intake.PushSubject("shared"))
			m.Data = []byte(`{}`)
			m.Header.Set("Delayq-Id", "shared-"+string(rune('a'+i%26))+strings.Repeat("x", i/26))
			res, err := b.nc.RequestMsg(m, 10*time.Second)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			if strings.Contains(string(res.Data), `"error"`) {
				t.Errorf("request %d: %s", i, res.Data)
			}
		})
	}
	wg.Wait()
	topic, err := b.engine.GetTopic(context.Background(), "shared")
	require.NoError(t, err)
	require.Equal(t, int64(n), topic.Counts.Ready, "each message made one job")
}

func TestIntakeLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, embeddedDialer(t))
	in, err := natstransport.NewIntake(natstransport.IntakeConfig{Conn: b.server, Engine: b.engine, Prefix: b.prefix + "x"})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, in.Stop(ctx), "Stop before Start")
	require.Error(t, in.Start(ctx), "no Start after Stop")

	require.NoError(t, b.intake.Stop(ctx))
	require.NoError(t, b.intake.Stop(ctx), "Stop is idempotent")
	_, err = b.nc.Request(b.intake.PushSubject("after.stop"), []byte(`{}`), 2*time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders, "a stopped intake no longer listens")

	_, err = natstransport.NewIntake(natstransport.IntakeConfig{Engine: b.engine})
	require.ErrorContains(t, err, "Conn")
	_, err = natstransport.NewIntake(natstransport.IntakeConfig{Conn: b.server, Engine: b.engine, Prefix: "a.b"})
	require.ErrorContains(t, err, "Prefix")
	_, err = natstransport.NewIntake(natstransport.IntakeConfig{Conn: b.server, Engine: b.engine, MaxBatch: 5000})
	require.ErrorContains(t, err, "MaxBatch")
}

// TestIntakeStopAnswersReceived checks that Stop answers every message the
// intake had received before it stopped.
func TestIntakeStopAnswersReceived(t *testing.T) {
	t.Parallel()
	b := setup(t, embeddedDialer(t))
	const n = 500
	inbox := nats.NewInbox()
	replies := make(chan *nats.Msg, n)
	sub, err := b.nc.ChanSubscribe(inbox, replies)
	require.NoError(t, err)
	defer sub.Unsubscribe()
	for range n {
		m := nats.NewMsg(b.intake.PushSubject("drain"))
		m.Reply = inbox
		require.NoError(t, b.nc.PublishMsg(m))
	}
	require.NoError(t, b.nc.Flush())
	// The first reply means the intake has the messages in hand.
	first := <-replies
	require.NotContains(t, string(first.Data), "error")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.intake.Stop(ctx))
	topic, err := b.engine.GetTopic(context.Background(), "drain")
	require.NoError(t, err)
	stored := int(topic.Counts.Ready)
	// Replies sent by then reach the client before a round trip of its own.
	require.NoError(t, b.server.Flush())
	require.NoError(t, b.nc.Flush())
	answered := 1 + len(replies)
	require.Equal(t, stored, answered, "every stored job was answered")
	t.Logf("%d of %d messages were taken before Stop", stored, n)
}

// TestIntakeDropsReplyToOwnSubjects checks that a message whose reply
// subject is one of delayq's own (the intake prefix, where the store's
// subjects are, a $ API subject, the connection's own inbox) is dropped
// unanswered and makes no job, so that a producer cannot make delayq write
// its answer there.
func TestIntakeDropsReplyToOwnSubjects(t *testing.T) {
	t.Parallel()
	// One worker handles the messages in order: once the answer to a later
	// request arrives, an answer to the dropped one would have too.
	b := setup(t, embeddedDialer(t), func(c *setupConfig) { c.workers = 1 })
	for i, reply := range []string{b.prefix + ".job.forged", b.prefix, "$JS.API.STREAM.DELETE.X", "$KV.B.k", natsstore.OwnInboxPrefix + ".x.y"} {
		sub, err := b.nc.SubscribeSync(reply)
		require.NoError(t, err)
		m := nats.NewMsg(b.intake.PushSubject("forged"))
		m.Reply = reply
		m.Data = []byte(`{}`)
		id := fmt.Sprintf("forged-%d", i)
		m.Header.Set("Delayq-Id", id)
		require.NoError(t, b.nc.PublishMsg(m))
		b.push(t, "forged", `{}`)
		require.NoError(t, b.nc.Flush())
		require.Zero(t, pending(t, sub), "no answer on %s", reply)
		_, err = b.engine.Get(context.Background(), id)
		require.ErrorIs(t, err, core.ErrNotFound, "no job from a message answered on %s", reply)
		require.NoError(t, sub.Unsubscribe())
	}
}

func pending(t *testing.T, sub *nats.Subscription) int {
	t.Helper()
	n, _, err := sub.Pending()
	require.NoError(t, err)
	return n
}

// TestIntakeJobURL: Delayq-Url sets a job's own webhook URL on a topic that
// allows one, and is refused, naming the header, on one that does not.
func TestIntakeJobURL(t *testing.T) {
	t.Parallel()
	b := setup(t, servers(t)[0].dial)
	ctx := context.Background()
	require.NoError(t, b.engine.PutTopic(ctx, &core.Topic{Name: "hooks",
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "https://svc/hook", AllowJobURL: true}}))
	r := b.push(t, "hooks", `{}`, "Delayq-Url", "https://tenant.example/cb?o=1", "Delayq-Delay", "1h")
	require.Equal(t, "https://tenant.example/cb?o=1", b.job(t, r.ID).URL)
	requireError(t, b.request(t, b.intake.PushSubject("t"), `{}`, "delayq-url", "https://tenant.example/cb"), "invalid_argument", "Delayq-Url")
}

// TestIntakeRefusesDerivedIDs: a NATS producer may not choose the id of a
// schedule's slot, a dead-letter notice or another topic's unique key,
// which would block the slot, notice or key: invalid_argument on
// Delayq-Id, and nothing is stored.
func TestIntakeRefusesDerivedIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, embeddedDialer(t))
	slot := time.Now().Add(time.Hour)
	for _, id := range []string{core.ScheduleID("nightly", slot), core.NoticeID("job-1", slot), core.KeyID("other", "k")} {
		r := b.request(t, b.intake.PushSubject("t"), `{}`, "Delayq-Id", id, "Delayq-Delay", "1h")
		requireError(t, r, "invalid_argument", "Delayq-Id")
		_, err := b.engine.Get(t.Context(), id)
		require.ErrorIs(t, err, core.ErrNotFound, "nothing stored")
	}
}
