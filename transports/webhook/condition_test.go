package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// intList is the CEL list literal [0, 1, ..., n-1].
func intList(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i))
	}
	b.WriteByte(']')
	return b.String()
}

// TestConditionLimits checks the reproductions of the security review,
// which took 15.7s and 735 MB (nested iterations) and 256 MB (string
// concatenation) of one delivery: each ends at once with a clear error,
// refused when the topic is set where the cost estimate tells, else cut
// by the cost or memory limit while the delivery runs.
func TestConditionLimits(t *testing.T) {
	t.Parallel()
	concat := `let s = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; ` +
		`let s = s + s + s + s + s + s + s + s; let s = s + s + s + s + s + s + s + s; ` +
		`let s = s + s + s + s + s + s + s + s; let s = s + s + s + s + s + s + s + s; len(s) > 0`

	t.Run("RefusedAtPut", func(t *testing.T) {
		t.Parallel()
		d := New(Config{})
		t.Cleanup(d.CloseIdleConnections)
		for src, msg := range map[string]string{
			// The review's expr conditions are not CEL.
			"let a = 1..1000; all(a, all(a, all(a, true)))": "reserved identifier: let",
			concat: "reserved identifier: let",
			// Their CEL forms cost too much by the estimate.
			intList(100) + ".all(a, " + intList(100) + ".all(b, " + intList(100) + ".all(c, " + intList(100) + ".all(d, true))))": "more than the limit of 100000000",
			"body.items.all(a, body.items.all(b, a == b))":  "may cost up to",
			"body.items.map(i, i.s + i.s + i.s).size() > 0": "may cost up to",
		} {
			err := d.ValidateTopic(&core.Topic{Name: "t", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "https://svc/hook", Success: src}})
			var fe *core.FieldError
			require.ErrorAs(t, err, &fe, src)
			require.Equal(t, "delivery.success", fe.Field)
			require.Contains(t, fe.Message, msg)
		}
	})

	t.Run("CutAtRunTime", func(t *testing.T) {
		t.Parallel()
		big := `{"s": "` + strings.Repeat("y", 60<<10) + `"}`
		b := setup(t, answerWith(http.StatusOK, big))
		l := intList(120)
		for src, msg := range map[string]string{
			// Within the estimate, past the cost limit: 120³ iterations.
			l + ".all(a, " + l + ".all(b, " + l + ".all(c, a + b + c >= 0)))": "condition stopped: it reached the cost limit of 1000000",
			// Strings of 240 KiB, 120 times over.
			l + ".map(i, body.s + body.s + body.s + body.s).size() > 0": "condition stopped: it reached the",
		} {
			topic := b.topic()
			topic.Delivery.Success = src
			require.NoError(t, b.d.ValidateTopic(topic))
			// The message is the cost limit's: the evaluation was cut
			// short, not run to its end.
			err := b.d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: testJob()})
			require.ErrorContains(t, err, msg)
			var ce *ConditionError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, http.StatusOK, ce.Status)
		}
	})

	t.Run("InterruptedByContext", func(t *testing.T) {
		t.Parallel()
		c := &conditions{maxAnswer: MaxAnswerBytesDefault}
		l := intList(100)
		p, err := c.compile(l + ".all(a, " + l + ".all(b, true))")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err = eval(ctx, p, &answer{Status: 200})
		require.ErrorIs(t, err, context.Canceled)
	})

}

// TestConditionLargeAnswer runs conditions over an answer of
// MaxAnswerBytes: iterating over all of it stays within the limits.
func TestConditionLargeAnswer(t *testing.T) {
	t.Parallel()
	var items []string
	for i := 0; ; i++ {
		item := `{"id":` + strconv.Itoa(i) + `,"ok":true,"tag":"t` + strconv.Itoa(i) + `"}`
		if 20+len(strings.Join(items, ","))+len(item) > MaxAnswerBytesDefault {
			break
		}
		items = append(items, item)
	}
	body := `{"code":0,"items":[` + strings.Join(items, ",") + `]}`
	require.LessOrEqual(t, len(body), MaxAnswerBytesDefault)
	require.True(t, json.Valid([]byte(body)))
	b := setup(t, answerWith(http.StatusOK, body))
	for _, src := range []string{
		"body.code == 0 && body.items.all(i, i.ok)",
		"size(body.items) == " + strconv.Itoa(len(items)),
		`body.items.exists(i, i.tag == "t` + strconv.Itoa(len(items)-1) + `")`,
		"body.items.filter(i, int(i.id) % 2 == 0).size() > 500",
	} {
		topic := b.topic()
		topic.Delivery.Success = src
		require.NoError(t, b.d.ValidateTopic(topic), src)
		require.NoError(t, b.d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: testJob()}), src)
	}
}

// TestStaleCondition checks a topic stored with a condition that is not
// CEL (written for the expr-lang evaluator of earlier versions): its
// deliveries fail without a request, with a last_error saying to set the
// topic again, logged once at warn level.
func TestStaleCondition(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	b := setup(t, answerWith(http.StatusOK, `{"ok": true}`))
	d := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	t.Cleanup(d.CloseIdleConnections)
	topic := b.topic()
	topic.Delivery.Success = "status == 200 and body.ok"

	for range 3 {
		err := d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: testJob()})
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.ErrorContains(t, err, "delivery.success does not compile as CEL")
		require.ErrorContains(t, err, "set the topic again")
	}
	require.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	require.Contains(t, logs.String(), "topic=orders.close")
	require.Empty(t, b.reqs, "a request was sent")
}

// FuzzCondition compiles and evaluates arbitrary conditions over arbitrary
// answers: nothing panics, and what compiles evaluates within the limits,
// without the delivery's context to cut it.
func FuzzCondition(f *testing.F) {
	for _, src := range []string{
		"status == 200 && body.code == 0",
		`headers["X-Ok"] == "1" || status in [200, 202]`,
		"body.items.all(i, i.ok)",
		"body.?code.orValue(1) == 0",
		"size(body) > 2 && body[0] == 'a'",
		intList(100) + ".all(a, " + intList(100) + ".all(b, a != b || a == b))",
		"[1,2,3].map(i, body.s + body.s).size() == 3",
		"body.s.matches('^(a+)+$')",
		"let a = 1..1000; all(a, all(a, all(a, true)))",
		"int(body.n) / 0 == 1",
		"timestamp(body.t) > timestamp('2020-01-01T00:00:00Z')",
	} {
		f.Add(src, []byte(`{"code":0,"items":[{"ok":true}],"s":"aaaa","n":"1","t":"x"}`))
	}
	f.Add("body == null", []byte("not json"))
	c := &conditions{maxAnswer: MaxAnswerBytesDefault}
	f.Fuzz(func(t *testing.T, src string, body []byte) {
		p, err := c.compile(src)
		if err != nil {
			require.NotContains(t, err.Error(), "\n")
			return
		}
		a := &answer{Status: 200, Headers: map[string]string{"X-Ok": "1"}}
		if len(body) <= MaxAnswerBytesDefault && json.Valid(body) {
			_ = json.Unmarshal(body, &a.Body)
		}
		start := time.Now()
		_, err = eval(context.Background(), p, a)
		if err != nil {
			require.NotContains(t, err.Error(), "\n")
		}
		require.Less(t, time.Since(start), 5*time.Second, "condition %q", src)
	})
}
