package client

import (
	"testing"
	"time"
)

// TestPushEncode checks that a raw body is sent byte for byte and other
// bodies marshalled, with every field in the service's form.
func TestPushEncode(t *testing.T) {
	t.Parallel()
	runAt := time.Date(2030, 1, 2, 3, 4, 5, 250e6, time.FixedZone("x", 3600))
	for _, c := range []struct {
		p    PushParams
		want string
	}{
		{PushParams{Topic: "a", Body: []byte(`{ "b" :  "<x>" }`)}, `{"topic":"a","body":{ "b" :  "<x>" }}`},
		{PushParams{Topic: "a", Body: map[string]int{"n": 1}, Delay: 90 * time.Second}, `{"topic":"a","delay":"1m30s","body":{"n":1}}`},
		{PushParams{Topic: "a", RunAt: runAt, ID: "i", Key: "k", TTR: time.Minute, MaxAttempts: 3, Priority: -2,
			BackoffDelays: []time.Duration{time.Second, time.Minute}},
			`{"topic":"a","run_at":"2030-01-02T02:04:05.25Z","id":"i","key":"k","ttr":"1m0s","max_attempts":3,"priority":-2,"backoff":{"delays":["1s","1m0s"]}}`},
	} {
		got, err := c.p.encode()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("encode:\n got %s\nwant %s", got, c.want)
		}
	}
	if _, err := (&PushParams{Topic: "a", Body: []byte("{")}).encode(); err == nil {
		t.Error("a body that is not JSON was accepted")
	}
	if _, err := (&PushParams{Topic: "a", Delay: time.Second, RunAt: runAt}).encode(); err == nil {
		t.Error("delay and run_at together were accepted")
	}
}
