package apicompat_test

import (
	"net/http"
	"strings"
)

// guarded is a route with a token: the steps every such route gets (401
// without a token, 403 with a token that lacks its scope or topic, and
// for a route with a body 415 for another content type and 413 for a body
// over its bound) are made from it.
type guarded struct {
	method, path string
	// forbidden is a token the route refuses with 403.
	forbidden string
	// body, when set, is a valid body; tooLarge is the size of one over
	// the route's bound.
	body     string
	tooLarge int
}

// Bounds of request bodies (docs/api.md, "Request bounds") under the
// stack's limits.
const (
	overJob   = 256 + 64<<10 + 1 // MaxBodyBytes + the envelope
	overBatch = maxRequestBytes + 1
	overSmall = 256<<10 + 1 // any other request
)

var guardedRoutes = []guarded{
	{http.MethodPost, "/v1/jobs", tokenConsume, `{"topic":"orders.a"}`, overJob},
	{http.MethodPost, "/v1/jobs/batch", tokenConsume, `{"jobs":[{"topic":"orders.a"}]}`, overBatch},
	{http.MethodPut, "/v1/jobs/job-g", tokenConsume, `{"topic":"orders.a"}`, overJob},
	{http.MethodGet, "/v1/jobs/job-1", tokenOther, "", 0},
	{http.MethodDelete, "/v1/jobs/job-1", tokenConsume, "", 0},
	{http.MethodPost, "/v1/jobs/job-1/ack", tokenPush, `{"lease":"x"}`, overSmall},
	{http.MethodPost, "/v1/jobs/job-1/nack", tokenPush, `{"lease":"x"}`, overSmall},
	{http.MethodPost, "/v1/jobs/job-1/touch", tokenPush, `{"lease":"x"}`, overSmall},
	{http.MethodPost, "/v1/jobs/job-1/requeue", tokenPush, "", 0},
	{http.MethodPost, "/v1/acks", tokenPush, `{"acks":[{"id":"job-1","lease":"x"}]}`, overBatch},
	{http.MethodPost, "/v1/nacks", tokenPush, `{"nacks":[{"id":"job-1","lease":"x"}]}`, overBatch},
	{http.MethodGet, "/v1/topics", "", "", 0},
	{http.MethodGet, "/v1/topics/orders.a", tokenOther, "", 0},
	{http.MethodPut, "/v1/topics/orders.a", tokenPush, `{"ttr":"30s"}`, overSmall},
	{http.MethodPatch, "/v1/topics/orders.a", tokenPush, `{"ttr":"30s"}`, overSmall},
	{http.MethodDelete, "/v1/topics/orders.a", tokenPush, "", 0},
	{http.MethodPost, "/v1/topics/orders.a/claim", tokenPush, `{"max":1}`, overSmall},
	{http.MethodPost, "/v1/topics/orders.a/pause", tokenPush, "", 0},
	{http.MethodPost, "/v1/topics/orders.a/resume", tokenPush, "", 0},
	{http.MethodGet, "/v1/topics/orders.a/dead", tokenPush, "", 0},
	{http.MethodGet, "/v1/topics/orders.a/jobs?key=k1", tokenOther, "", 0},
	{http.MethodDelete, "/v1/topics/orders.a/jobs?key=k1", tokenConsume, "", 0},
	{http.MethodGet, "/v1/topics/orders.a/subscribe", tokenPush, "", 0},
	{http.MethodGet, "/v1/schedules", tokenPush, "", 0},
	{http.MethodGet, "/v1/schedules/nightly", tokenPush, "", 0},
	{http.MethodPut, "/v1/schedules/nightly", tokenPush, `{"cron":"0 3 * * *","topic":"orders.s"}`, overSmall},
	{http.MethodDelete, "/v1/schedules/nightly", tokenPush, "", 0},
	{http.MethodGet, "/v1/export", tokenPush, "", 0},
	{http.MethodPost, "/v1/import", tokenPush, "", 0},
	{http.MethodGet, "/v1/backup", tokenOther, "", 0},
	{http.MethodPost, "/v1/rekey", tokenPush, `{"limit":10}`, overSmall},
	{http.MethodGet, "/metrics", tokenPush, "", 0},
	{http.MethodGet, "/v1/whoami", "", "", 0},
	{http.MethodGet, "/v1/version", "", "", 0},
	{http.MethodGet, "/v1/stats", "", "", 0},
	{http.MethodPost, "/v1/topics/orders.d/dead/requeue", tokenPush, `{"dry_run":true}`, overSmall},
	{http.MethodPost, "/v1/topics/orders.b/jobs/cancel", tokenConsume, `{"dry_run":true}`, overSmall},
	{http.MethodPost, "/v1/schedules/nightly/run", tokenPush, "", 0},
}

// runGuardSteps runs the steps made from guardedRoutes.
func runGuardSteps(h *httpRun) {
	for _, g := range guardedRoutes {
		h.do(httpStep{title: "no token", method: g.method, path: g.path, body: g.body})
		if g.forbidden != "" {
			h.do(httpStep{title: "a token without the scope or topic", method: g.method, path: g.path, token: g.forbidden, body: g.body})
		}
		if g.body != "" {
			h.do(httpStep{title: "not JSON", method: g.method, path: g.path, token: tokenAdmin, body: g.body, contentType: "text/plain"})
			// A string field that takes the body over its bound.
			pad := strings.Repeat("x", g.tooLarge)
			big := g.body[:len(g.body)-1] + `,"pad":"` + pad + `"}`
			h.do(httpStep{title: "over the bound", method: g.method, path: g.path, token: tokenAdmin, body: big})
		}
	}
}

// runHTTPScenario runs the HTTP scenario: the open routes, cross-cutting
// refusals, the guard steps, then each route's success and errors in an
// order where each finds the state it needs.
func runHTTPScenario(h *httpRun) {
	const (
		admin   = tokenAdmin
		push    = tokenPush
		consume = tokenConsume
	)
	get := func(title, path, token string) (int, []byte) {
		return h.do(httpStep{title: title, method: http.MethodGet, path: path, token: token})
	}
	send := func(title, method, path, token, body string) (int, []byte) {
		return h.do(httpStep{title: title, method: method, path: path, token: token, body: body})
	}

	// Open routes.
	get("open", "/healthz", "")
	get("open", "/readyz", "")
	get("open", "/v1/openapi.json", "")
	get("redirect", "/ui", "")
	get("the root, to the UI", "/", "")
	get("page", "/ui/", "")
	get("no such file", "/ui/nope.js", "")

	// Cross-cutting refusals.
	get("an unknown token", "/v1/whoami", "not-a-token-of-this-server")
	h.do(httpStep{title: "a host this server does not serve", method: http.MethodGet, path: "/v1/whoami", token: admin, header: []string{"Host", "evil.example"}})
	h.do(httpStep{title: "a browser's cross-origin write", method: http.MethodPost, path: "/v1/jobs", token: admin, body: `{"topic":"orders.a"}`,
		header: []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}})
	get("a path without a route", "/v1/nope", admin)
	h.do(httpStep{title: "a method the path has no route for", method: http.MethodPatch, path: "/v1/jobs/job-1", token: admin})
	runGuardSteps(h)

	get("any valid token", "/v1/version", push)
	get("admin", "/v1/whoami", admin)
	get("restricted", "/v1/whoami", push)
	get("no samples", "/v1/stats", admin)
	get("admin", "/metrics", admin)

	// Topics.
	send("configure", http.MethodPut, "/v1/topics/orders.a", admin, `{"ttr":"30s","max_attempts":3,"backoff":{"initial":"1s","max":"1m","factor":2,"jitter":0}}`)
	send("an unknown field", http.MethodPut, "/v1/topics/orders.a", admin, `{"ttl":"30s"}`)
	send("a bad duration", http.MethodPut, "/v1/topics/orders.a", admin, `{"ttr":"soon"}`)
	send("last attempt dies", http.MethodPut, "/v1/topics/orders.d", admin, `{"max_attempts":1}`)
	send("webhook", http.MethodPut, "/v1/topics/orders.w", admin, `{"delivery":{"type":"webhook","url":"https://hooks.example/x"}}`)
	send("a bad kafka_topic", http.MethodPut, "/v1/topics/orders.k", admin, `{"delivery":{"type":"kafka","kafka_topic":"orders due"}}`)
	send("kafka without --kafka-brokers", http.MethodPut, "/v1/topics/orders.k", admin, `{"delivery":{"type":"kafka","kafka_topic":"orders-due"}}`)
	send("one job of a key at a time", http.MethodPut, "/v1/topics/orders.kc", admin, `{"key_concurrency":1}`)
	send("a bad key_concurrency", http.MethodPut, "/v1/topics/orders.kc", admin, `{"key_concurrency":10001}`)
	send("keys served in turn", http.MethodPut, "/v1/topics/orders.fair", admin, `{"fair":true}`)
	send("a rate per key", http.MethodPut, "/v1/topics/orders.pkr", admin, `{"rate":{"limit":10,"per_key":true}}`)
	send("per_key without a limit", http.MethodPut, "/v1/topics/orders.pkr", admin, `{"rate":{"per_key":true}}`)
	h.do(httpStep{title: "one setting, the rest kept", method: http.MethodPatch, path: "/v1/topics/orders.w", token: admin,
		body: `{"delivery":{"timeout":"5s"},"max_attempts":4}`, contentType: "application/merge-patch+json"})
	send("a setting dropped", http.MethodPatch, "/v1/topics/orders.w", admin, `{"max_attempts":null}`)
	send("a patch that is not an object", http.MethodPatch, "/v1/topics/orders.w", admin, `[{"op":"remove","path":"/ttr"}]`)
	send("a topic with neither jobs nor configuration", http.MethodPatch, "/v1/topics/orders.nosuch", admin, `{"max_attempts":2}`)
	get("configured", "/v1/topics/orders.a", admin)
	get("any scope reads", "/v1/topics/orders.a", push)
	get("unknown", "/v1/topics/orders.none", admin)
	get("a bad name", "/v1/topics/bad..name", admin)
	get("all", "/v1/topics", admin)
	get("only its topics", "/v1/topics", tokenOther)

	// Producing.
	send("create", http.MethodPost, "/v1/jobs", admin, `{"topic":"orders.a","id":"job-1","body":{"n":1},"priority":-5,"key":"k1"}`)
	send("an id in use", http.MethodPost, "/v1/jobs", admin, `{"topic":"orders.a","id":"job-1"}`)
	send("a generated id, delayed", http.MethodPost, "/v1/jobs", push, `{"topic":"orders.a","body":"later","delay":"1h"}`)
	send("a negative delay", http.MethodPost, "/v1/jobs", admin, `{"topic":"orders.a","delay":"-1s"}`)
	send("no topic", http.MethodPost, "/v1/jobs", admin, `{"body":1}`)
	send("trailing data", http.MethodPost, "/v1/jobs", admin, `{"topic":"orders.a"} {}`)
	send("a derived id", http.MethodPost, "/v1/jobs", admin, `{"topic":"orders.a","id":"k-0123456789abcdef0123456789abcdef"}`)
	send("a topic the token may not use", http.MethodPost, "/v1/jobs", push, `{"topic":"billing.a"}`)
	send("a body over --max-body", http.MethodPost, "/v1/jobs", admin, `{"topic":"orders.a","body":"`+strings.Repeat("b", 300)+`"}`)
	send("create", http.MethodPut, "/v1/jobs/job-2", admin, `{"topic":"orders.a","body":{"n":2},"priority":-4,"run_at":"2026-11-21T09:00:00Z"}`)
	send("replace", http.MethodPut, "/v1/jobs/job-2", admin, `{"topic":"orders.a","body":{"n":2,"v":2},"priority":-4}`)
	send("an id other than the path's", http.MethodPut, "/v1/jobs/job-2", admin, `{"topic":"orders.a","id":"job-3"}`)
	send("a topic the token may not use", http.MethodPut, "/v1/jobs/job-2", push, `{"topic":"billing.a"}`)
	send("with a key and its own backoff", http.MethodPut, "/v1/jobs/job-3", push, `{"topic":"orders.a","key":"k1","priority":-3,"ttr":"10s","max_attempts":2,"backoff":{"delays":["1s","5s"]}}`)
	send("with its next steps", http.MethodPost, "/v1/jobs", push, `{"topic":"orders.t","id":"job-then","then":{"topic":"orders.t","delay":"30m","key":"k9","then":{"topic":"orders.t","delay":"24h","key":"k9"}}}`)
	send("a next step's bad field", http.MethodPost, "/v1/jobs", push, `{"topic":"orders.t","then":{"topic":"orders.t","delay":"soon"}}`)
	send("a next step on a topic the token may not use", http.MethodPost, "/v1/jobs", push, `{"topic":"orders.t","then":{"topic":"billing.t"}}`)
	get("with its next steps", "/v1/jobs/job-then", push)
	send("each job on its own", http.MethodPost, "/v1/jobs/batch", admin,
		`{"jobs":[{"topic":"orders.b","id":"b-1"},{"topic":"orders.b","delay":"soon"},{"topic":"orders.a","id":"job-1"},{"topic":"orders.b","id":"b-1"}]}`)
	send("no jobs", http.MethodPost, "/v1/jobs/batch", admin, `{"jobs":[]}`)
	send("over --max-batch", http.MethodPost, "/v1/jobs/batch", admin, `{"jobs":[{"topic":"orders.b"},{"topic":"orders.b"},{"topic":"orders.b"},{"topic":"orders.b"},{"topic":"orders.b"}]}`)
	send("a topic the token may not use fails alone", http.MethodPost, "/v1/jobs/batch", push, `{"jobs":[{"topic":"orders.b","id":"b-2"},{"topic":"billing.b"}]}`)
	// The quota: 2 jobs at once, one a day after.
	send("over the quota's burst", http.MethodPost, "/v1/jobs/batch", tokenQuota, `{"jobs":[{"topic":"orders.q"},{"topic":"orders.q"},{"topic":"orders.q"}]}`)
	send("within the quota", http.MethodPost, "/v1/jobs/batch", tokenQuota, `{"jobs":[{"topic":"orders.q","id":"q-1"},{"topic":"orders.q","id":"q-2"}]}`)
	send("over the quota", http.MethodPost, "/v1/jobs", tokenQuota, `{"topic":"orders.q"}`)
	send("over the quota", http.MethodPut, "/v1/jobs/q-3", tokenQuota, `{"topic":"orders.q"}`)
	send("over the quota", http.MethodPost, "/v1/jobs/batch", tokenQuota, `{"jobs":[{"topic":"orders.q"}]}`)

	// Reading.
	get("ready", "/v1/jobs/job-1", admin)
	get("restricted token, its topic", "/v1/jobs/job-1", consume)
	get("unknown", "/v1/jobs/nope", admin)
	get("by key", "/v1/topics/orders.a/jobs?key=k1", admin)
	get("by key, a page", "/v1/topics/orders.a/jobs?key=k1&limit=1", admin)
	get("by key, the next page", "/v1/topics/orders.a/jobs?key=k1&limit=1&after=job-1", admin)
	get("by state", "/v1/topics/orders.a/jobs?state=scheduled", consume)
	get("an unknown state", "/v1/topics/orders.a/jobs?state=sleeping", admin)
	get("neither key nor state", "/v1/topics/orders.a/jobs", admin)

	// Consuming: job-1, job-2 and job-3 are the most urgent, in that order.
	send("a bad max", http.MethodPost, "/v1/topics/orders.a/claim", consume, `{"max":0}`)
	send("a bad wait", http.MethodPost, "/v1/topics/orders.a/claim", consume, `{"wait":"2m"}`)
	send("one", http.MethodPost, "/v1/topics/orders.a/claim", consume, `{"max":1}`)
	send("touch", http.MethodPost, "/v1/jobs/job-1/touch", consume, `{"lease":"<lease-1>"}`)
	send("a lost lease", http.MethodPost, "/v1/jobs/job-1/touch", consume, `{"lease":"not-the-lease"}`)
	send("no lease", http.MethodPost, "/v1/jobs/job-1/touch", consume, `{}`)
	send("unknown", http.MethodPost, "/v1/jobs/nope/touch", consume, `{"lease":"x"}`)
	send("reserved", http.MethodPut, "/v1/jobs/job-1", admin, `{"topic":"orders.a"}`)
	send("reserved", http.MethodDelete, "/v1/jobs/job-1", admin, "")
	send("running neither true nor false", http.MethodDelete, "/v1/jobs/job-1?running=maybe", admin, "")
	send("ack", http.MethodPost, "/v1/jobs/job-1/ack", consume, `{"lease":"<lease-1>"}`)
	send("again: the lease is gone", http.MethodPost, "/v1/jobs/job-1/ack", consume, `{"lease":"<lease-1>"}`)
	send("no lease", http.MethodPost, "/v1/jobs/job-1/ack", consume, `{"lease":""}`)
	send("unknown", http.MethodPost, "/v1/jobs/nope/ack", consume, `{"lease":"x"}`)
	get("done, with its history", "/v1/jobs/job-1", admin)
	send("two, empty body", http.MethodPost, "/v1/topics/orders.a/claim?", consume, `{"max":2}`)
	send("nack", http.MethodPost, "/v1/jobs/job-2/nack", consume, `{"lease":"<lease-2>","delay":"10s","error":"try later"}`)
	send("again: the lease is gone", http.MethodPost, "/v1/jobs/job-2/nack", consume, `{"lease":"<lease-2>"}`)
	send("a bad delay", http.MethodPost, "/v1/jobs/job-3/nack", consume, `{"lease":"<lease-3>","delay":"-1s"}`)
	send("unknown", http.MethodPost, "/v1/jobs/nope/nack", consume, `{"lease":"x"}`)
	send("one acked, one again, one unknown, one without lease", http.MethodPost, "/v1/acks", consume,
		`{"acks":[{"id":"job-3","lease":"<lease-3>"},{"id":"job-3","lease":"<lease-3>"},{"id":"nope","lease":"x"},{"id":"b-1","lease":""}]}`)
	send("no acks", http.MethodPost, "/v1/acks", consume, `{"acks":[]}`)
	send("over --max-batch", http.MethodPost, "/v1/acks", consume, `{"acks":[{"id":"a","lease":"x"},{"id":"a","lease":"x"},{"id":"a","lease":"x"},{"id":"a","lease":"x"},{"id":"a","lease":"x"}]}`)
	send("from another topic", http.MethodPost, "/v1/topics/orders.b/claim", consume, `{"max":2}`)
	send("one nacked, one again, one unknown, one bad delay", http.MethodPost, "/v1/nacks", consume,
		`{"nacks":[{"id":"b-1","lease":"<lease-4>","delay":"5s","error":"no"},{"id":"b-1","lease":"<lease-4>"},{"id":"nope","lease":"x"},{"id":"b-2","lease":"<lease-5>","delay":"soon"}]}`)
	send("no nacks", http.MethodPost, "/v1/nacks", consume, `{"nacks":[]}`)
	send("over --max-batch", http.MethodPost, "/v1/nacks", consume, `{"nacks":[{"id":"a","lease":"x"},{"id":"a","lease":"x"},{"id":"a","lease":"x"},{"id":"a","lease":"x"},{"id":"a","lease":"x"}]}`)
	send("nothing due", http.MethodPost, "/v1/topics/orders.none/claim", consume, "")
	get("not a WebSocket upgrade", "/v1/topics/orders.a/subscribe", consume)
	h.do(httpStep{title: "a bad prefetch", method: http.MethodGet, path: "/v1/topics/orders.a/subscribe?prefetch=0", token: consume,
		header: []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}})

	// Dead jobs.
	send("create", http.MethodPost, "/v1/jobs", admin, `{"topic":"orders.d","id":"job-d","body":"doomed"}`)
	send("one", http.MethodPost, "/v1/topics/orders.d/claim", consume, "")
	send("its last attempt", http.MethodPost, "/v1/jobs/job-d/nack", consume, `{"lease":"<lease-6>","error":"broken"}`)
	get("dead", "/v1/topics/orders.d/dead", admin)
	get("a bad limit", "/v1/topics/orders.d/dead?limit=many", admin)
	get("a topic with neither jobs nor configuration", "/v1/topics/orders.nosuch/dead", admin)
	send("not dead", http.MethodPost, "/v1/jobs/job-3/requeue", admin, "")
	send("by filter, a dry run", http.MethodPost, "/v1/topics/orders.d/dead/requeue", admin, `{"error_contains":"broken","dry_run":true}`)
	send("by filter, with a state", http.MethodPost, "/v1/topics/orders.d/dead/requeue", admin, `{"state":"ready"}`)
	send("by filter, a topic with neither jobs nor configuration", http.MethodPost, "/v1/topics/orders.nosuch/dead/requeue", admin, "")
	send("requeue", http.MethodPost, "/v1/jobs/job-d/requeue", admin, "")
	send("by filter, none left", http.MethodPost, "/v1/topics/orders.d/dead/requeue", admin, `{"error_contains":"broken"}`)
	send("unknown", http.MethodPost, "/v1/jobs/nope/requeue", admin, "")

	// Cancelling.
	send("cancel", http.MethodDelete, "/v1/jobs/<id-1>", push, "")
	send("finished", http.MethodDelete, "/v1/jobs/<id-1>", push, "")
	send("by key", http.MethodDelete, "/v1/topics/orders.b/jobs?key=none", push, "")
	send("without key", http.MethodDelete, "/v1/topics/orders.b/jobs", push, "")
	send("by filter", http.MethodPost, "/v1/topics/orders.b/jobs/cancel", push, `{"key":"none","state":"scheduled","until":"2030-01-01T00:00:00Z"}`)
	send("by filter, a bad state", http.MethodPost, "/v1/topics/orders.b/jobs/cancel", push, `{"state":"dead"}`)
	send("by filter, a topic with neither jobs nor configuration", http.MethodPost, "/v1/topics/orders.nosuch/jobs/cancel", push, "")

	// Pause and resume.
	send("pause", http.MethodPost, "/v1/topics/orders.b/pause", admin, "")
	send("resume", http.MethodPost, "/v1/topics/orders.b/resume", admin, "")
	send("a bad name", http.MethodPost, "/v1/topics/bad..name/pause", admin, "")
	send("a bad name", http.MethodPost, "/v1/topics/bad..name/resume", admin, "")
	send("a topic the token may not use", http.MethodPost, "/v1/topics/orders.b/pause", tokenOther, "")

	// Schedules.
	send("create", http.MethodPut, "/v1/schedules/nightly", admin, `{"cron":"0 3 * * *","topic":"orders.s","job":{"body":{"report":1},"ttr":"5m"}}`)
	send("a bad cron", http.MethodPut, "/v1/schedules/nightly", admin, `{"cron":"every day","topic":"orders.s"}`)
	send("a topic the token may not use", http.MethodPut, "/v1/schedules/theirs", tokenOther, `{"cron":"@hourly","topic":"orders.s"}`)
	send("another topic's schedule", http.MethodPut, "/v1/schedules/nightly", tokenOther, `{"cron":"@hourly","topic":"other.s"}`)
	get("one", "/v1/schedules/nightly?next=2", admin)
	get("a bad next", "/v1/schedules/nightly?next=many", admin)
	get("its last runs, none yet", "/v1/schedules/nightly?runs=2&next=0", admin)
	get("a bad runs", "/v1/schedules/nightly?runs=101", admin)
	send("run now", http.MethodPost, "/v1/schedules/nightly/run", admin, "")
	get("unknown", "/v1/schedules/nope", admin)
	get("all", "/v1/schedules", admin)
	get("a bad next", "/v1/schedules?next=-1", admin)
	send("delete", http.MethodDelete, "/v1/schedules/nightly", admin, "")
	send("unknown", http.MethodDelete, "/v1/schedules/nightly", admin, "")
	send("unknown", http.MethodPost, "/v1/schedules/nightly/run", admin, "")

	// Export, import, backup.
	get("every unfinished job", "/v1/export", admin)
	get("only its topics", "/v1/export", tokenOther)
	h.do(httpStep{title: "new, known and bad lines", method: http.MethodPost, path: "/v1/import", token: admin, contentType: "application/x-ndjson",
		body: `{"id":"imp-1","topic":"other.i","body":1,"run_at":"2026-11-21T11:00:00Z","ttr":"30s","max_attempts":3,"state":"scheduled"}` + "\n" +
			`{"id":"job-2","topic":"orders.a","run_at":"2026-11-21T11:00:00Z","ttr":"30s","max_attempts":3,"state":"scheduled"}` + "\n" +
			`{"id":"imp-2","topic":"other.i","state":"sleeping"}` + "\n" + `not json` + "\n"})
	h.do(httpStep{title: "not NDJSON", method: http.MethodPost, path: "/v1/import", token: admin, body: `{}`})
	get("memstore has no checkpoint", "/v1/backup", admin)
	get("a bad plaintext", "/v1/export?plaintext=yes", admin)
	send("restricted to topics", http.MethodPost, "/v1/rekey", tokenOther, "")
	send("a bad limit", http.MethodPost, "/v1/rekey", admin, `{"limit":"many"}`)
	send("encryption at rest is off", http.MethodPost, "/v1/rekey", admin, "")

	// Deleting a topic's configuration.
	send("delete", http.MethodDelete, "/v1/topics/orders.w", admin, "")
	send("not configured", http.MethodDelete, "/v1/topics/orders.w", admin, "")
	get("after", "/v1/topics/orders.a", admin)
}
