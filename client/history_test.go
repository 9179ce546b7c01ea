package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestJobHistory checks that a job's history is read from the service's
// form and written back in an export line, an attempt in progress without
// ended_at.
func TestJobHistory(t *testing.T) {
	t.Parallel()
	const answer = `{"id":"j","topic":"t","key":"","body":null,"run_at":"2030-01-02T03:04:05.000Z","ttr":"30s","max_attempts":5,` +
		`"priority":0,"attempt":2,"state":"reserved","created_at":"2030-01-02T03:04:05.000Z","last_error":"boom",` +
		`"history":[{"attempt":1,"started_at":"2030-01-02T03:04:06.000Z","ended_at":"2030-01-02T03:04:07.500Z","via":"webhook","outcome":"retried","error":"boom"},` +
		`{"attempt":2,"started_at":"2030-01-02T03:05:00.000Z","via":"pull","outcome":""}]}`
	var j Job
	if err := json.Unmarshal([]byte(answer), &j); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 6, 0, time.UTC)
	want := []Attempt{
		{Attempt: 1, StartedAt: at, EndedAt: at.Add(1500 * time.Millisecond), Via: ViaWebhook, Outcome: OutcomeRetried, Error: "boom"},
		{Attempt: 2, StartedAt: at.Add(54 * time.Second), Via: ViaPull},
	}
	if !reflect.DeepEqual(j.History, want) {
		t.Fatalf("history:\n got %+v\nwant %+v", j.History, want)
	}
	line, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	const tail = `"history":[{"attempt":1,"started_at":"2030-01-02T03:04:06Z","ended_at":"2030-01-02T03:04:07.5Z","via":"webhook","outcome":"retried","error":"boom"},` +
		`{"attempt":2,"started_at":"2030-01-02T03:05:00Z","via":"pull","outcome":""}]}`
	if !strings.HasSuffix(string(line), tail) {
		t.Errorf("export line %s\ndoes not end in %s", line, tail)
	}
}
