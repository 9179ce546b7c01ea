package client

import (
	"encoding/json"
	"reflect"
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
		{PushParams{Topic: "a", Then: &PushParams{Topic: "b", Delay: time.Hour, Key: "k", Body: []byte(`{ "n": 1 }`), Then: &PushParams{Topic: "c"}}},
			`{"topic":"a","then":{"topic":"b","delay":"1h0m0s","key":"k","then":{"topic":"c"},"body":{"n":1}}}`},
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
	_, err := (&PushParams{Topic: "a", Then: &PushParams{Topic: "b", Then: &PushParams{Topic: "c", Body: []byte("{")}}}).encode()
	if ae, ok := err.(*APIError); !ok || ae.Field != "then.then.body" {
		t.Errorf("a step's bad body: %v, want an error naming then.then.body", err)
	}
}

// TestJobThen checks that a job's next steps are read as the service
// shows them.
func TestJobThen(t *testing.T) {
	t.Parallel()
	var j Job
	err := json.Unmarshal([]byte(`{"id":"o-1","topic":"a","then":{"topic":"b","delay":"30m0s","body":{"n":1},"ttr":"5s",
		"backoff":{"delays":["1s"]},"then":{"topic":"c","key":"k","max_attempts":2}}}`), &j)
	if err != nil {
		t.Fatal(err)
	}
	want := &PushParams{Topic: "b", Delay: 30 * time.Minute, Body: json.RawMessage(`{"n":1}`), TTR: 5 * time.Second,
		BackoffDelays: []time.Duration{time.Second}, Then: &PushParams{Topic: "c", Key: "k", MaxAttempts: 2}}
	if !reflect.DeepEqual(j.Then, want) {
		t.Errorf("then: got %+v (%+v), want %+v (%+v)", j.Then, j.Then.Then, want, want.Then)
	}
	if err := json.Unmarshal([]byte(`{"id":"o-2","topic":"a"}`), &j); err != nil || j.Then != nil {
		t.Errorf("a job without then: %v, then %+v", err, j.Then)
	}
	var p PushParams
	if err := json.Unmarshal([]byte(`{"topic":"b","delay":1500,"then":{"topic":"c"}}`), &p); err != nil ||
		!reflect.DeepEqual(p, PushParams{Topic: "b", Delay: 1500 * time.Millisecond, Then: &PushParams{Topic: "c"}}) {
		t.Errorf("a job object: %v, %+v", err, p)
	}
	if err := json.Unmarshal([]byte(`{"topic":"b","then":{"topic":"c","dealy":"1s"}}`), &p); err == nil {
		t.Error("a job object with an unknown field was read")
	}
}
