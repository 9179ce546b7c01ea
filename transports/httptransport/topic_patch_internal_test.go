package httptransport

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestTopicRequestJSONRoundTrips checks that a configuration written in
// the form of a PUT body decodes to itself, every setting set: a setting
// added to core.Topic and not to topicRequestJSON would be dropped by
// every PATCH.
func TestTopicRequestJSONRoundTrips(t *testing.T) {
	t.Parallel()
	full := &core.Topic{
		Name: "t",
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "https://svc/hook", Timeout: 5 * time.Second, Secret: "s", PreviousSecret: "p",
			Success: "response.status == 200", Subject: "subj", Method: "PUT", Headers: map[string]string{"x-a": "1"}, ErrorBody: true, AllowJobURL: true},
		TTR: 45 * time.Second, MaxAttempts: 7,
		Backoff:     core.Backoff{Initial: time.Second, Max: time.Hour, Factor: 2.5, Jitter: 0.2, Delays: []time.Duration{time.Second, time.Minute}},
		Concurrency: 3, UniqueKeys: core.UniqueKeysReplace, MaxInFlight: 9,
		Rate:   core.Rate{Limit: 10, Period: time.Minute, Burst: 20},
		OnDead: "dead.t",
	}
	requireAllSet(t, reflect.ValueOf(*full), "Topic", map[string]bool{"Configured": true, "Paused": true, "Counts": true})
	got, err := decodeTopicRequest("t", topicRequestJSON(full))
	require.NoError(t, err)
	require.Equal(t, full, got)

	empty, err := decodeTopicRequest("t", topicRequestJSON(&core.Topic{Name: "t"}))
	require.NoError(t, err)
	require.Equal(t, &core.Topic{Name: "t"}, empty)
	require.JSONEq(t, `{}`, string(topicRequestJSON(&core.Topic{Name: "t"})))
}

// requireAllSet fails for a field of v (a struct, recursively) left at
// its zero value, but those skipped.
func requireAllSet(t *testing.T, v reflect.Value, path string, skip map[string]bool) {
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
		require.False(t, fv.IsZero(), "%s.%s is not set in the test's topic: set it, and write it in topicRequestJSON", path, f.Name)
	}
}
