package coretest

import (
	"reflect"
	"testing"
	"time"

	"github.com/delayq/delayq/core"
)

// FullTopic returns a topic configuration with every setting set (none at
// its zero value), and fails t when core.Topic has a setting it leaves
// unset: a transport's test that writes a configuration in its own form
// and reads it back then covers a setting added later, or fails until it
// does.
func FullTopic(t testing.TB) *core.Topic {
	t.Helper()
	full := &core.Topic{
		Name: "t",
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "https://svc/hook", Timeout: 5 * time.Second, Secret: "s", PreviousSecret: "p",
			Success: "response.status == 200", Subject: "subj", KafkaTopic: "kafka-t", Method: "PUT", Headers: map[string]string{"x-a": "1"}, ErrorBody: true, AllowJobURL: true},
		TTR: 45 * time.Second, MaxAttempts: 7,
		Backoff:     core.Backoff{Initial: time.Second, Max: time.Hour, Factor: 2.5, Jitter: 0.2, Delays: []time.Duration{time.Second, time.Minute}},
		Concurrency: 3, UniqueKeys: core.UniqueKeysReplace, MaxInFlight: 9, KeyConcurrency: 4, Fair: true,
		Rate:      core.Rate{Limit: 10, Period: time.Minute, Burst: 20, PerKey: true},
		OnDead:    "dead.t",
		Events:    core.Events{Topic: "audit.t", On: []string{core.EventDone, core.EventExpired}},
		ExpiresIn: 10 * time.Minute,
		Delay:     90 * time.Second,
		Retention: 36 * time.Hour,
	}
	// The topic's state, not its configuration.
	requireAllSet(t, reflect.ValueOf(*full), "Topic", map[string]bool{"Configured": true, "Paused": true, "Counts": true,
		// Zeros names fields set to 0, which FullTopic sets otherwise:
		// the tests of explicit zeros cover it.
		"Zeros": true})
	return full
}

// requireAllSet fails t for a field of v (a struct, recursively) left at
// its zero value, but those skipped.
func requireAllSet(t testing.TB, v reflect.Value, path string, skip map[string]bool) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if skip[f.Name] || !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Time]() {
			requireAllSet(t, fv, path+"."+f.Name, skip)
			continue
		}
		if fv.IsZero() {
			t.Fatalf("%s.%s is not set by coretest.FullTopic: set it there, and in every transport's form of a topic configuration", path, f.Name)
		}
	}
}
