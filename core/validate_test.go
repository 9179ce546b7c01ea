package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func TestValidateTopicName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "orders.close", "A-b_c.d-1", strings.Repeat("x", core.MaxTopicLen)} {
		require.NoError(t, core.ValidateTopicName(ok), ok)
	}
	for _, bad := range []string{"", ".", "a.", ".a", "a..b", "a b", "a.*", "a.>", "ü", "a/b", strings.Repeat("x", core.MaxTopicLen+1)} {
		err := core.ValidateTopicName(bad)
		require.ErrorIs(t, err, core.ErrInvalidArgument, bad)
		var fe *core.FieldError
		require.True(t, errors.As(err, &fe))
		require.Equal(t, "topic", fe.Field)
	}
}

func TestValidateID(t *testing.T) {
	t.Parallel()
	require.NoError(t, core.ValidateID(core.NewID()))
	require.NoError(t, core.ValidateID("order-42_x"))
	for _, bad := range []string{"", "a.b", "a b", "a/b", "*", strings.Repeat("x", core.MaxIDLen+1)} {
		require.ErrorIs(t, core.ValidateID(bad), core.ErrInvalidArgument, bad)
	}
}

func TestNewIDSortsByCreation(t *testing.T) {
	t.Parallel()
	prev := core.NewID()
	for range 10000 {
		id := core.NewID()
		require.Greater(t, id, prev)
		prev = id
	}
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := core.Backoff{Initial: time.Second, Max: 10 * time.Second, Factor: 2, Jitter: -1}.WithDefaults()
	require.Equal(t, time.Second, b.Delay(1))
	require.Equal(t, 2*time.Second, b.Delay(2))
	require.Equal(t, 8*time.Second, b.Delay(4))
	require.Equal(t, 10*time.Second, b.Delay(5), "capped at max")
	require.Equal(t, 10*time.Second, b.Delay(500), "no overflow")

	j := core.Backoff{Initial: time.Second, Jitter: 0.5}.WithDefaults()
	seen := map[time.Duration]bool{}
	for range 200 {
		d := j.Delay(1)
		require.GreaterOrEqual(t, d, 500*time.Millisecond)
		require.LessOrEqual(t, d, 1500*time.Millisecond)
		seen[d] = true
	}
	require.Greater(t, len(seen), 100, "jitter spreads delays")

	// A retry schedule: as given, the last repeated, no jitter, no cap.
	s := core.Backoff{Max: time.Second, Jitter: 0.5, Delays: []time.Duration{time.Minute, 3 * time.Minute, 0, 7 * time.Minute}}.WithDefaults()
	for attempt, want := range map[int]time.Duration{1: time.Minute, 2: 3 * time.Minute, 3: 0, 4: 7 * time.Minute, 5: 7 * time.Minute, 99: 7 * time.Minute} {
		require.Equal(t, want, s.Delay(attempt), "after attempt %d", attempt)
	}
	require.Equal(t, 7*time.Minute, s.Ceiling(), "a schedule longer than max")
	require.Equal(t, 10*time.Second, b.Ceiling())
}

func TestTopicValidate(t *testing.T) {
	t.Parallel()
	good := core.Topic{Name: "t", TTR: time.Minute, MaxAttempts: 3, Concurrency: 4,
		Backoff: core.Backoff{Initial: time.Second, Max: time.Minute, Factor: 3, Jitter: 0.1}}
	require.NoError(t, good.Validate())
	cases := map[string]func(*core.Topic){
		"topic":           func(t *core.Topic) { t.Name = "a..b" },
		"delivery.type":   func(t *core.Topic) { t.Delivery.Type = "carrier-pigeon" },
		"ttr":             func(t *core.Topic) { t.TTR = time.Millisecond },
		"max_attempts":    func(t *core.Topic) { t.MaxAttempts = -1 },
		"concurrency":     func(t *core.Topic) { t.Concurrency = core.ConcurrencyMax + 1 },
		"backoff.initial": func(t *core.Topic) { t.Backoff.Initial = 2 * time.Minute },
		"backoff.factor":  func(t *core.Topic) { t.Backoff.Factor = 0.5 },
		"backoff.jitter":  func(t *core.Topic) { t.Backoff.Jitter = 2 },
		"backoff.delays":  func(t *core.Topic) { t.Backoff.Delays = make([]time.Duration, core.DelaysMax+1) },
		"backoff.delays[1]": func(t *core.Topic) {
			t.Backoff.Delays = []time.Duration{time.Minute, core.DelayMax + 1}
		},
		"backoff.delays[0]": func(t *core.Topic) { t.Backoff.Delays = []time.Duration{-time.Second} },
		"delivery.timeout":  func(t *core.Topic) { t.Delivery.Timeout = time.Hour },
		"retention":         func(t *core.Topic) { t.Retention = 1500 * time.Millisecond },
		"delivery.error_body": func(t *core.Topic) {
			t.Delivery = core.Delivery{Type: core.DeliveryNATS, ErrorBody: true}
		},
		// Fields of another delivery type: a consumer topic whose
		// webhook type was forgotten is refused, not kept as is.
		"delivery.url":     func(t *core.Topic) { t.Delivery.URL = "http://svc/hook" },
		"delivery.secret":  func(t *core.Topic) { t.Delivery = core.Delivery{Type: core.DeliveryNATS, Secret: "s"} },
		"delivery.success": func(t *core.Topic) { t.Delivery.Success = "status == 200" },
		"delivery.subject": func(t *core.Topic) {
			t.Delivery = core.Delivery{Type: core.DeliveryWebhook, URL: "http://svc/", Subject: "a.b"}
		},
		"delivery.kafka_topic": func(t *core.Topic) {
			t.Delivery = core.Delivery{Type: core.DeliveryNATS, KafkaTopic: "orders-due"}
		},
	}
	for field, mutate := range cases {
		bad := good
		mutate(&bad)
		var fe *core.FieldError
		require.True(t, errors.As(bad.Validate(), &fe), field)
		require.Equal(t, field, fe.Field)
	}

	// A timeout bounds a webhook attempt or a NATS publish; a consumer
	// topic has neither.
	publish := good
	publish.Delivery = core.Delivery{Type: core.DeliveryNATS, Timeout: 3 * time.Second}
	require.NoError(t, publish.Validate())
	pulled := good
	pulled.Delivery.Timeout = 3 * time.Second
	var timeoutErr *core.FieldError
	require.ErrorAs(t, pulled.Validate(), &timeoutErr)
	require.Equal(t, "delivery.timeout", timeoutErr.Field)

	// A kafka topic names a Kafka topic Kafka accepts.
	kafka := good
	kafka.Delivery = core.Delivery{Type: core.DeliveryKafka, KafkaTopic: "orders.due_v2-" + strings.Repeat("x", 235), Timeout: time.Second}
	require.NoError(t, kafka.Validate())
	for _, name := range []string{"", ".", "..", "orders due", "orders/due", "ördérs", strings.Repeat("x", 250)} {
		bad := good
		bad.Delivery = core.Delivery{Type: core.DeliveryKafka, KafkaTopic: name}
		var fe *core.FieldError
		require.ErrorAs(t, bad.Validate(), &fe, "%q", name)
		require.Equal(t, "delivery.kafka_topic", fe.Field, "%q", name)
	}

	// A previous secret only beside a different current one, on a
	// webhook topic.
	hook := core.Delivery{Type: core.DeliveryWebhook, URL: "http://svc/", Secret: "new", PreviousSecret: "old"}
	rotating := good
	rotating.Delivery = hook
	require.NoError(t, rotating.Validate())
	for name, d := range map[string]core.Delivery{
		"without secret": {Type: core.DeliveryWebhook, URL: "http://svc/", PreviousSecret: "old"},
		"same as secret": {Type: core.DeliveryWebhook, URL: "http://svc/", Secret: "old", PreviousSecret: "old"},
		"nats topic":     {Type: core.DeliveryNATS, PreviousSecret: "old"},
	} {
		bad := good
		bad.Delivery = d
		var fe *core.FieldError
		require.True(t, errors.As(bad.Validate(), &fe), name)
		require.Equal(t, "delivery.previous_secret", fe.Field, name)
	}
}

// TestValidateRetention: whole seconds from RetentionMin to RetentionMax.
func TestValidateRetention(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{core.RetentionMin, time.Hour, core.RetentionMax} {
		require.NoError(t, core.ValidateRetention("retention", d), d)
	}
	for _, d := range []time.Duration{-time.Second, 0, 500 * time.Millisecond, core.RetentionMax + time.Second, 1500 * time.Millisecond} {
		var fe *core.FieldError
		require.ErrorAs(t, core.ValidateRetention("retention", d), &fe, d)
		require.Equal(t, "retention", fe.Field)
	}
}
