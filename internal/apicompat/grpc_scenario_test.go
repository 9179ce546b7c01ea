package apicompat_test

import (
	"strings"

	"github.com/delayq/delayq/core"
)

// guardedMethods are the methods with the token each refuses with
// PERMISSION_DENIED and a request it would take: every method gets a call
// without token and one with that token.
var guardedMethods = []struct{ method, forbidden, request string }{
	{"Push", tokenConsume, `{"job":{"topic":"orders.g"}}`},
	{"PushBatch", tokenConsume, `{"jobs":[{"topic":"orders.g"}]}`},
	{"Replace", tokenConsume, `{"job":{"topic":"orders.g","id":"g-1"}}`},
	{"GetJob", tokenOther, `{"id":"g-1"}`},
	{"CancelJob", tokenConsume, `{"id":"g-1"}`},
	{"FindJobs", tokenOther, `{"topic":"orders.g","key":"k"}`},
	{"ListJobs", tokenOther, `{"topic":"orders.g","state":"ready"}`},
	{"CancelByKey", tokenConsume, `{"topic":"orders.g","key":"k"}`},
	{"Claim", tokenPush, `{"topic":"orders.g"}`},
	{"Subscribe", tokenPush, `{"topic":"orders.g"}`},
	{"Ack", tokenPush, `{"id":"g-1","lease":"x"}`},
	{"Nack", tokenPush, `{"id":"g-1","lease":"x"}`},
	{"Touch", tokenPush, `{"id":"g-1","lease":"x"}`},
	{"AckBatch", tokenPush, `{"acks":[{"id":"g-1","lease":"x"}]}`},
	{"NackBatch", tokenPush, `{"nacks":[{"id":"g-1","lease":"x"}]}`},
	{"Requeue", tokenPush, `{"id":"g-1"}`},
	{"ListDead", tokenPush, `{"topic":"orders.g"}`},
	{"GetTopic", tokenOther, `{"name":"orders.g"}`},
	{"ListTopics", "", `{}`},
	{"PutTopic", tokenPush, `{"name":"orders.g","config":{"ttr":"30s"}}`},
	{"UpdateTopic", tokenPush, `{"name":"orders.g","config":{"ttr":"30s"},"updateMask":"ttr"}`},
	{"DeleteTopic", tokenPush, `{"name":"orders.g"}`},
	{"PauseTopic", tokenPush, `{"name":"orders.g"}`},
	{"ResumeTopic", tokenPush, `{"name":"orders.g"}`},
	{"PutSchedule", tokenPush, `{"name":"g","schedule":{"cron":"@hourly","topic":"orders.g"}}`},
	{"GetSchedule", tokenPush, `{"name":"g"}`},
	{"ListSchedules", tokenPush, `{}`},
	{"DeleteSchedule", tokenPush, `{"name":"g"}`},
	{"Export", tokenPush, `{}`},
	{"Import", tokenPush, `{}`},
	{"RequeueDead", tokenPush, `{"topic":"orders.g","filter":{"dryRun":true}}`},
	{"CancelJobs", tokenConsume, `{"topic":"orders.g","filter":{"dryRun":true}}`},
	{"RunSchedule", tokenPush, `{"name":"g"}`},
}

// runGRPCScenario runs the gRPC scenario: the guard calls, then each
// method's success and errors in an order where each finds the state it
// needs.
func runGRPCScenario(g *grpcRun) {
	const (
		admin   = tokenAdmin
		push    = tokenPush
		consume = tokenConsume
	)
	for _, m := range guardedMethods {
		s := grpcStep{title: "no token", method: m.method, request: m.request}
		if m.method == "Import" {
			s.requests = []string{m.request}
		}
		g.call(s)
		if m.forbidden != "" {
			s.title, s.token = "a token without the scope or topic", m.forbidden
			g.call(s)
		}
	}
	call := func(method, title, token, request string) {
		g.call(grpcStep{title: title, method: method, token: token, request: request})
	}
	call("GetJob", "an unknown token", "not-a-token-of-this-server", `{"id":"x"}`)

	// Topics.
	call("PutTopic", "configure", admin, `{"name":"orders.a","config":{"ttr":"30s","max_attempts":3,"backoff":{"initial":"1s","max":"1m","factor":2}}}`)
	call("PutTopic", "a bad duration", admin, `{"name":"orders.a","config":{"ttr":"soon"}}`)
	call("PutTopic", "last attempt dies", admin, `{"name":"orders.d","config":{"max_attempts":1}}`)
	call("PutTopic", "webhook", admin, `{"name":"orders.w","config":{"delivery":{"type":"webhook","url":"https://hooks.example/x","headers":{"X-A":"1"}}}}`)
	call("PutTopic", "a bad kafka_topic", admin, `{"name":"orders.k","config":{"delivery":{"type":"kafka","kafkaTopic":"orders due"}}}`)
	call("PutTopic", "kafka without --kafka-brokers", admin, `{"name":"orders.k","config":{"delivery":{"type":"kafka","kafkaTopic":"orders-due"}}}`)
	call("PutTopic", "one job of a key at a time", admin, `{"name":"orders.kc","config":{"keyConcurrency":1}}`)
	call("PutTopic", "keys served in turn", admin, `{"name":"orders.fair","config":{"fair":true}}`)
	call("PutTopic", "a rate per key", admin, `{"name":"orders.pkr","config":{"rate":{"limit":10,"perKey":true}}}`)
	call("PutTopic", "per_key without a limit", admin, `{"name":"orders.pkr","config":{"rate":{"perKey":true}}}`)
	call("UpdateTopic", "one setting, the rest kept", admin, `{"name":"orders.w","config":{"delivery":{"timeout":"5s"},"maxAttempts":4},"updateMask":"delivery.timeout,maxAttempts"}`)
	call("UpdateTopic", "no update_mask", admin, `{"name":"orders.w","config":{"maxAttempts":4}}`)
	call("UpdateTopic", "a topic with neither jobs nor configuration", admin, `{"name":"orders.nosuch","config":{"maxAttempts":2},"updateMask":"maxAttempts"}`)
	call("GetTopic", "configured", push, `{"name":"orders.a"}`)
	call("GetTopic", "unknown", admin, `{"name":"orders.none"}`)
	call("ListTopics", "all", admin, `{}`)
	call("ListTopics", "only its topics", tokenOther, `{}`)

	// Producing.
	call("Push", "create", admin, `{"job":{"topic":"orders.a","id":"job-1","body":"{\"n\":1}","priority":-5,"key":"k1"}}`)
	call("Push", "an id in use", admin, `{"job":{"topic":"orders.a","id":"job-1"}}`)
	call("Push", "a generated id, delayed", push, `{"job":{"topic":"orders.a","body":"\"later\"","delay":"1h"}}`)
	call("Push", "a negative delay", admin, `{"job":{"topic":"orders.a","delay":"-1s"}}`)
	call("Push", "a body that is not JSON", admin, `{"job":{"topic":"orders.a","body":"{"}}`)
	call("Push", "a topic the token may not use", push, `{"job":{"topic":"billing.a"}}`)
	call("Push", "a body over --max-body", admin, `{"job":{"topic":"orders.a","body":"\"`+repeat("b", 300)+`\""}}`)
	call("Replace", "create", admin, `{"job":{"topic":"orders.a","id":"job-2","body":"{\"n\":2}","priority":-4,"run_at":"2026-11-21T09:00:00Z"}}`)
	call("Replace", "replace", admin, `{"job":{"topic":"orders.a","id":"job-2","body":"{\"n\":2,\"v\":2}","priority":-4}}`)
	call("Replace", "no id", admin, `{"job":{"topic":"orders.a"}}`)
	call("Replace", "with a key and its own backoff", push, `{"job":{"topic":"orders.a","id":"job-3","key":"k1","priority":-3,"ttr":"10s","max_attempts":2,"backoff":{"delays":["1s","5s"]}}}`)
	call("PushBatch", "each job on its own", admin, `{"jobs":[{"topic":"orders.b","id":"b-1"},{"topic":"orders.b","delay":"soon"},{"topic":"orders.a","id":"job-1"},{"topic":"orders.b","id":"b-1"}]}`)
	call("PushBatch", "over --max-batch", admin, `{"jobs":[{"topic":"orders.b"},{"topic":"orders.b"},{"topic":"orders.b"},{"topic":"orders.b"},{"topic":"orders.b"}]}`)
	call("Push", "create", push, `{"job":{"topic":"orders.b","id":"b-2"}}`)
	call("PushBatch", "no jobs", admin, `{"jobs":[]}`)
	call("PushBatch", "over the quota's burst", tokenQuota, `{"jobs":[{"topic":"orders.q"},{"topic":"orders.q"},{"topic":"orders.q"}]}`)
	call("PushBatch", "within the quota", tokenQuota, `{"jobs":[{"topic":"orders.q","id":"q-1"},{"topic":"orders.q","id":"q-2"}]}`)
	call("Push", "over the quota", tokenQuota, `{"job":{"topic":"orders.q"}}`)

	// Reading.
	call("GetJob", "ready", consume, `{"id":"job-1"}`)
	call("GetJob", "unknown", admin, `{"id":"nope"}`)
	call("FindJobs", "by key, a page", admin, `{"topic":"orders.a","key":"k1","limit":1}`)
	call("FindJobs", "the next page", admin, `{"topic":"orders.a","key":"k1","limit":1,"after":"job-1"}`)
	call("FindJobs", "no key", admin, `{"topic":"orders.a"}`)
	call("ListJobs", "by state", consume, `{"topic":"orders.a","state":"scheduled"}`)
	call("ListJobs", "an unknown state", admin, `{"topic":"orders.a","state":"sleeping"}`)

	// Consuming: job-1, job-2 and job-3 are the most urgent, in that order.
	call("Claim", "a bad max", consume, `{"topic":"orders.a","max":0}`)
	call("Claim", "one", consume, `{"topic":"orders.a","max":1}`)
	call("Touch", "touch", consume, `{"id":"job-1","lease":"<lease-1>"}`)
	call("Touch", "a lost lease", consume, `{"id":"job-1","lease":"not-the-lease"}`)
	call("Touch", "unknown", consume, `{"id":"nope","lease":"x"}`)
	call("Replace", "reserved", admin, `{"job":{"topic":"orders.a","id":"job-1"}}`)
	call("CancelJob", "reserved", admin, `{"id":"job-1"}`)
	call("Ack", "ack", consume, `{"id":"job-1","lease":"<lease-1>"}`)
	call("Ack", "again: the lease is gone", consume, `{"id":"job-1","lease":"<lease-1>"}`)
	call("Ack", "no lease", consume, `{"id":"job-1"}`)
	call("Ack", "unknown", consume, `{"id":"nope","lease":"x"}`)
	call("GetJob", "done, with its history", admin, `{"id":"job-1"}`)
	call("Claim", "two", consume, `{"topic":"orders.a","max":2}`)
	call("Nack", "nack", consume, `{"id":"job-2","lease":"<lease-2>","delay":"10s","error":"try later"}`)
	call("Nack", "again: the lease is gone", consume, `{"id":"job-2","lease":"<lease-2>"}`)
	call("Nack", "a bad delay", consume, `{"id":"job-3","lease":"<lease-3>","delay":"-1s"}`)
	call("AckBatch", "one acked, one again, one unknown, one without lease", consume,
		`{"acks":[{"id":"job-3","lease":"<lease-3>"},{"id":"job-3","lease":"<lease-3>"},{"id":"nope","lease":"x"},{"id":"b-1"}]}`)
	call("AckBatch", "no acks", consume, `{"acks":[]}`)
	call("Claim", "from another topic", consume, `{"topic":"orders.b","max":2}`)
	call("NackBatch", "one nacked, one again, one unknown, one bad delay", consume,
		`{"nacks":[{"id":"b-1","lease":"<lease-4>","delay":"5s","error":"no"},{"id":"b-1","lease":"<lease-4>"},{"id":"nope","lease":"x"},{"id":"b-2","lease":"<lease-5>","delay":"soon"}]}`)
	call("NackBatch", "no nacks", consume, `{"nacks":[]}`)
	call("Claim", "nothing due", consume, `{"topic":"orders.none"}`)

	// Subscribe: two due jobs, then the deliveries acked by Ack.
	call("Push", "for the subscriber", admin, `{"job":{"topic":"orders.ws","id":"ws-1","body":"{\"n\":1}","priority":-2}}`)
	call("Push", "for the subscriber", admin, `{"job":{"topic":"orders.ws","id":"ws-2","body":"[2]","priority":-1}}`)
	g.call(grpcStep{title: "two deliveries, then cancelled", method: "Subscribe", token: consume, request: `{"topic":"orders.ws","prefetch":2}`, receive: 2})
	g.call(grpcStep{title: "a bad prefetch", method: "Subscribe", token: consume, request: `{"topic":"orders.ws","prefetch":-1}`})
	g.call(grpcStep{title: "a bad topic", method: "Subscribe", token: consume, request: `{"topic":"bad..name"}`})
	g.waitState("ws-1", core.StateReady)
	g.waitState("ws-2", core.StateReady)
	call("GetJob", "released when the stream ended", admin, `{"id":"ws-1"}`)

	// Dead jobs.
	call("Push", "create", admin, `{"job":{"topic":"orders.d","id":"job-d","body":"\"doomed\""}}`)
	call("Claim", "one", consume, `{"topic":"orders.d"}`)
	call("Nack", "its last attempt", consume, `{"id":"job-d","lease":"<lease-8>","error":"broken"}`)
	call("ListDead", "dead", admin, `{"topic":"orders.d"}`)
	call("ListDead", "a bad limit", admin, `{"topic":"orders.d","limit":-1}`)
	call("ListDead", "a topic with neither jobs nor configuration", admin, `{"topic":"orders.nosuch"}`)
	call("Requeue", "not dead", admin, `{"id":"job-3"}`)
	call("RequeueDead", "by filter, a dry run", admin, `{"topic":"orders.d","filter":{"errorContains":"broken","dryRun":true}}`)
	call("RequeueDead", "by filter, with a state", admin, `{"topic":"orders.d","filter":{"state":"ready"}}`)
	call("RequeueDead", "by filter, a topic with neither jobs nor configuration", admin, `{"topic":"orders.nosuch"}`)
	call("Requeue", "requeue", admin, `{"id":"job-d"}`)
	call("Requeue", "unknown", admin, `{"id":"nope"}`)

	// Cancelling.
	call("CancelJob", "cancel", push, `{"id":"<id-1>"}`)
	call("CancelJob", "finished", push, `{"id":"<id-1>"}`)
	call("CancelByKey", "by key", push, `{"topic":"orders.b","key":"none"}`)
	call("CancelByKey", "without key", push, `{"topic":"orders.b"}`)
	call("CancelJobs", "by filter", push, `{"topic":"orders.b","filter":{"key":"none","state":"scheduled","until":"2030-01-01T00:00:00Z"}}`)
	call("CancelJobs", "by filter, a bad until", push, `{"topic":"orders.b","filter":{"until":"soon"}}`)

	// Pause and resume.
	call("PauseTopic", "pause", admin, `{"name":"orders.b"}`)
	call("ResumeTopic", "resume", admin, `{"name":"orders.b"}`)
	call("PauseTopic", "a bad name", admin, `{"name":"bad..name"}`)
	call("ResumeTopic", "a bad name", admin, `{"name":"bad..name"}`)

	// Schedules.
	call("PutSchedule", "create", admin, `{"name":"nightly","schedule":{"cron":"0 3 * * *","topic":"orders.s","job":{"body":"{\"report\":1}","ttr":"5m"}},"next":2}`)
	call("PutSchedule", "a bad cron", admin, `{"name":"nightly","schedule":{"cron":"every day","topic":"orders.s"}}`)
	call("PutSchedule", "a topic the token may not use", tokenOther, `{"name":"theirs","schedule":{"cron":"@hourly","topic":"orders.s"}}`)
	call("GetSchedule", "one", admin, `{"name":"nightly","next":2}`)
	call("GetSchedule", "unknown", admin, `{"name":"nope"}`)
	call("ListSchedules", "all", admin, `{}`)
	call("ListSchedules", "a bad next", admin, `{"next":-1}`)
	call("RunSchedule", "run now", admin, `{"name":"nightly"}`)
	call("DeleteSchedule", "delete", admin, `{"name":"nightly"}`)
	call("DeleteSchedule", "unknown", admin, `{"name":"nightly"}`)
	call("RunSchedule", "unknown", admin, `{"name":"nightly"}`)

	// Export and import.
	g.call(grpcStep{title: "every unfinished job", method: "Export", token: admin, request: `{}`})
	g.call(grpcStep{title: "only its topics", method: "Export", token: tokenOther, request: `{}`})
	g.call(grpcStep{title: "new, known and bad jobs", method: "Import", token: admin, requests: []string{
		`{"jobs":[{"id":"imp-1","topic":"other.i","body":"1","run_at":"2026-11-21T11:00:00Z","ttr":"30s","max_attempts":3,"state":"scheduled"}]}`,
		`{"jobs":[{"id":"job-2","topic":"orders.a","run_at":"2026-11-21T11:00:00Z","ttr":"30s","max_attempts":3,"state":"scheduled"},{"id":"imp-2","topic":"other.i","state":"sleeping"}]}`,
	}})

	// Deleting a topic's configuration.
	call("DeleteTopic", "delete", admin, `{"name":"orders.w"}`)
	call("DeleteTopic", "not configured", admin, `{"name":"orders.w"}`)
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }
