package client

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestKafkaDeliveryWire checks that a kafka topic's Kafka topic goes out
// in a configuration and comes back in a topic.
func TestKafkaDeliveryWire(t *testing.T) {
	t.Parallel()
	c := TopicConfig{Delivery: DeliveryConfig{Type: "kafka", KafkaTopic: "orders-due", Timeout: 5 * time.Second}}
	if got := string(c.wire()); !strings.Contains(got, `"delivery":{"type":"kafka","kafka_topic":"orders-due","timeout":"5s"}`) {
		t.Fatalf("configuration %s: no kafka delivery", got)
	}
	var tp Topic
	if err := json.Unmarshal([]byte(`{"name":"t","delivery":{"type":"kafka","kafka_topic":"orders-due","timeout":"5s","secret_set":false}}`), &tp); err != nil {
		t.Fatal(err)
	}
	if want := (DeliveryView{Type: "kafka", KafkaTopic: "orders-due", Timeout: 5 * time.Second}); tp.Delivery.Type != want.Type ||
		tp.Delivery.KafkaTopic != want.KafkaTopic || tp.Delivery.Timeout != want.Timeout {
		t.Fatalf("delivery %+v, want %+v", tp.Delivery, want)
	}
}

// TestEventsWire checks that a topic's events go out in a configuration,
// only when set, and come back in a topic.
func TestEventsWire(t *testing.T) {
	t.Parallel()
	c := TopicConfig{Events: EventsConfig{Topic: "orders.audit", On: []string{"done", "dead"}}}
	if got := string(c.wire()); got != `{"events":{"topic":"orders.audit","on":["done","dead"]}}` {
		t.Fatalf("configuration %s", got)
	}
	if got := string((&TopicConfig{}).wire()); got != `{}` {
		t.Fatalf("configuration without events %s", got)
	}
	var tp Topic
	if err := json.Unmarshal([]byte(`{"name":"t","events":{"topic":"orders.audit","on":["expired"]}}`), &tp); err != nil {
		t.Fatal(err)
	}
	if tp.Events.Topic != "orders.audit" || len(tp.Events.On) != 1 || tp.Events.On[0] != "expired" {
		t.Fatalf("events %+v", tp.Events)
	}
}

// TestKeyConcurrencyWire checks that a topic's key_concurrency goes out in
// a configuration, only when set, and comes back in a topic.
func TestKeyConcurrencyWire(t *testing.T) {
	t.Parallel()
	if got := string((&TopicConfig{KeyConcurrency: 1}).wire()); !strings.Contains(got, `"key_concurrency":1`) {
		t.Fatalf("configuration %s: no key_concurrency", got)
	}
	if got := string((&TopicConfig{}).wire()); strings.Contains(got, "key_concurrency") {
		t.Fatalf("configuration %s: key_concurrency though unset", got)
	}
	var tp Topic
	if err := json.Unmarshal([]byte(`{"name":"t","key_concurrency":3}`), &tp); err != nil {
		t.Fatal(err)
	}
	if tp.KeyConcurrency != 3 {
		t.Fatalf("key_concurrency %d, want 3", tp.KeyConcurrency)
	}
}

// TestFairWire checks that a topic's fair goes out in a configuration,
// only when set, and comes back in a topic.
func TestFairWire(t *testing.T) {
	t.Parallel()
	if got := string((&TopicConfig{Fair: true}).wire()); !strings.Contains(got, `"fair":true`) {
		t.Fatalf("configuration %s: no fair", got)
	}
	if got := string((&TopicConfig{}).wire()); strings.Contains(got, "fair") {
		t.Fatalf("configuration %s: fair though unset", got)
	}
	var tp Topic
	if err := json.Unmarshal([]byte(`{"name":"t","fair":true}`), &tp); err != nil {
		t.Fatal(err)
	}
	if !tp.Fair {
		t.Fatal("fair false, want true")
	}
}

// TestRatePerKeyWire checks that a rate's per_key goes out in a
// configuration, only when set, and comes back in a topic.
func TestRatePerKeyWire(t *testing.T) {
	t.Parallel()
	if got := string((&TopicConfig{Rate: RateConfig{Limit: 5, PerKey: true}}).wire()); !strings.Contains(got, `"rate":{"limit":5,"per_key":true}`) {
		t.Fatalf("configuration %s: no per_key", got)
	}
	if got := string((&TopicConfig{Rate: RateConfig{Limit: 5}}).wire()); strings.Contains(got, "per_key") {
		t.Fatalf("configuration %s: per_key though unset", got)
	}
	var tp Topic
	if err := json.Unmarshal([]byte(`{"name":"t","rate":{"limit":5,"period":"1s","burst":5,"per_key":true}}`), &tp); err != nil {
		t.Fatal(err)
	}
	if !tp.Rate.PerKey {
		t.Fatal("per_key false, want true")
	}
}
