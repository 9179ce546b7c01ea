package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestJobHistory checks that a job's history, changes and trail are read
// from the service's form, and the history and changes written back in an
// export line, an attempt in progress without ended_at.
func TestJobHistory(t *testing.T) {
	t.Parallel()
	const answer = `{"id":"j","topic":"t","key":"","body":null,"run_at":"2030-01-02T03:04:05.000Z","ttr":"30s","max_attempts":5,` +
		`"priority":0,"attempt":2,"state":"reserved","created_at":"2030-01-02T03:04:05.000Z","last_error":"boom",` +
		`"history":[{"attempt":1,"started_at":"2030-01-02T03:04:06.000Z","ended_at":"2030-01-02T03:04:07.500Z","via":"webhook","outcome":"retried","error":"boom"},` +
		`{"attempt":2,"started_at":"2030-01-02T03:05:00.000Z","via":"pull","instance":"host-b","consumer":"10.0.0.1:4000","outcome":""}],` +
		`"changes":[{"at":"2030-01-02T03:04:05.000Z","kind":"created","via":"http","token":"ops"}],` +
		`"trail":[{"at":"2030-01-02T03:04:05.000Z","event":"created","via":"http","token":"ops"},` +
		`{"at":"2030-01-02T03:05:00.000Z","event":"delivered","via":"pull","instance":"host-b","consumer":"10.0.0.1:4000","attempt":2}]}`
	var j Job
	if err := json.Unmarshal([]byte(answer), &j); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 6, 0, time.UTC)
	want := []Attempt{
		{Attempt: 1, StartedAt: at, EndedAt: at.Add(1500 * time.Millisecond), Via: ViaWebhook, Outcome: OutcomeRetried, Error: "boom"},
		{Attempt: 2, StartedAt: at.Add(54 * time.Second), Via: ViaPull, Instance: "host-b", Consumer: "10.0.0.1:4000"},
	}
	if !reflect.DeepEqual(j.History, want) {
		t.Fatalf("history:\n got %+v\nwant %+v", j.History, want)
	}
	created := at.Add(-time.Second)
	if want := []Change{{At: created, Kind: ChangeCreated, Via: "http", Token: "ops"}}; !reflect.DeepEqual(j.Changes, want) {
		t.Fatalf("changes:\n got %+v\nwant %+v", j.Changes, want)
	}
	wantTrail := []TrailEntry{
		{At: created, Event: ChangeCreated, Via: "http", Token: "ops"},
		{At: at.Add(54 * time.Second), Event: TrailDelivered, Via: ViaPull, Instance: "host-b", Consumer: "10.0.0.1:4000", Attempt: 2},
	}
	if !reflect.DeepEqual(j.Trail, wantTrail) {
		t.Fatalf("trail:\n got %+v\nwant %+v", j.Trail, wantTrail)
	}
	line, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	const tail = `"history":[{"attempt":1,"started_at":"2030-01-02T03:04:06Z","ended_at":"2030-01-02T03:04:07.5Z","via":"webhook","outcome":"retried","error":"boom"},` +
		`{"attempt":2,"started_at":"2030-01-02T03:05:00Z","via":"pull","instance":"host-b","consumer":"10.0.0.1:4000","outcome":""}],` +
		`"changes":[{"at":"2030-01-02T03:04:05Z","kind":"created","via":"http","token":"ops"}]}`
	if !strings.HasSuffix(string(line), tail) {
		t.Errorf("export line %s\ndoes not end in %s", line, tail)
	}
}
