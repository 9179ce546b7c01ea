package httptransport_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/auth"
)

// Secrets of the tokens of setupAuth.
const (
	pushSecret    = "push-secret-0123456789"
	consumeSecret = "consume-secret-0123456789"
	adminSecret   = "admin-secret-0123456789"
	ordersSecret  = "orders-secret-0123456789"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// setupAuth serves with four tokens: push, consume, admin and one with push
// and consume restricted to orders.>, logging at debug level into the
// returned buffer.
func setupAuth(t *testing.T, opts ...func(*setupConfig)) (*testBundle, *syncBuffer) {
	t.Helper()
	tokens, err := auth.NewTokens([]auth.Token{
		{Name: "producer", Token: pushSecret, Scopes: []auth.Scope{auth.ScopePush}},
		{Name: "worker", Token: consumeSecret, Scopes: []auth.Scope{auth.ScopeConsume}},
		{Name: "ops", Token: adminSecret, Scopes: []auth.Scope{auth.ScopeAdmin}},
		{Name: "orders-app", Token: ordersSecret, Scopes: []auth.Scope{auth.ScopePush, auth.ScopeConsume}, Topics: []string{"orders.>"}},
	})
	require.NoError(t, err)
	logs := &syncBuffer{}
	opts = append(opts, func(c *setupConfig) {
		c.tokens = tokens
		c.logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return setup(t, opts...), logs
}

func bearer(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

// TestAuthScopes checks each route against each scope: allowed routes get
// past authentication (whatever they answer then), others get 403.
func TestAuthScopes(t *testing.T) {
	t.Parallel()
	b, logs := setupAuth(t)
	res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "mail", "delay": "1h"}`, bearer(pushSecret)...)
	requireStatus(t, res, http.StatusCreated)
	id, _ := res.object(t)["id"].(string)

	type route struct{ method, path, body string }
	var (
		pushRoutes = []route{
			{"POST", "/v1/jobs", `{"topic": "mail", "delay": "1h"}`},
			{"POST", "/v1/jobs/batch", `{"jobs": [{"topic": "mail", "delay": "1h"}]}`},
			{"PUT", "/v1/jobs/p1", `{"topic": "mail", "delay": "1h"}`},
			{"DELETE", "/v1/jobs/p1", ""},
			{"DELETE", "/v1/topics/mail/jobs?key=k", ""},
			{"POST", "/v1/topics/mail/jobs/cancel", `{"dry_run": true}`},
		}
		consumeRoutes = []route{
			{"POST", "/v1/topics/mail/claim", `{"max": 1}`},
			{"POST", "/v1/jobs/" + id + "/ack", `{"lease": "x"}`},
			{"POST", "/v1/jobs/" + id + "/nack", `{"lease": "x"}`},
			{"POST", "/v1/jobs/" + id + "/touch", `{"lease": "x"}`},
			{"POST", "/v1/acks", `{"acks": [{"id": "` + id + `", "lease": "x"}]}`},
			{"POST", "/v1/nacks", `{"nacks": [{"id": "` + id + `", "lease": "x"}]}`},
		}
		bothRoutes = []route{
			{"GET", "/v1/jobs/" + id, ""}, {"GET", "/v1/topics/mail/jobs?key=k", ""},
			// Reads of the web UI's read-only view: any scope.
			{"GET", "/v1/topics", ""}, {"GET", "/v1/topics/mail", ""}, {"GET", "/v1/stats", ""}, {"GET", "/v1/whoami", ""},
		}
		adminRoutes = []route{
			{"PUT", "/v1/topics/mail", `{"ttr": "30s"}`},
			{"GET", "/v1/topics/mail/dead", ""},
			{"POST", "/v1/jobs/" + id + "/requeue", ""},
			{"POST", "/v1/topics/mail/pause", ""},
			{"POST", "/v1/topics/mail/resume", ""},
			{"DELETE", "/v1/topics/mail", ""},
			{"POST", "/v1/topics/mail/dead/requeue", `{"dry_run": true}`},
		}
	)
	check := func(t *testing.T, rs []route, secret string, allowed bool) {
		t.Helper()
		for _, rt := range rs {
			res := b.do(t, rt.method, rt.path, rt.body, bearer(secret)...)
			if allowed {
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, res.status, "%s %s: %s", rt.method, rt.path, res.body)
				continue
			}
			requireError(t, res, http.StatusForbidden, "permission_denied", "")
		}
	}
	check(t, pushRoutes, pushSecret, true)
	check(t, bothRoutes, pushSecret, true)
	check(t, consumeRoutes, pushSecret, false)
	check(t, adminRoutes, pushSecret, false)

	check(t, consumeRoutes, consumeSecret, true)
	check(t, bothRoutes, consumeSecret, true)
	check(t, pushRoutes, consumeSecret, false)
	check(t, adminRoutes, consumeSecret, false)

	check(t, adminRoutes, adminSecret, true)
	check(t, pushRoutes, adminSecret, true)
	check(t, consumeRoutes, adminSecret, true)

	for _, secret := range []string{pushSecret, consumeSecret, adminSecret, ordersSecret} {
		require.NotContains(t, logs.String(), secret)
	}
	require.Contains(t, logs.String(), `token=producer`)
}

// TestAuthUnauthenticated checks 401 with WWW-Authenticate for a missing,
// malformed or unknown token, and that probes stay open.
func TestAuthUnauthenticated(t *testing.T) {
	t.Parallel()
	b, logs := setupAuth(t)
	for _, header := range [][]string{
		nil,
		{"Authorization", "Basic " + pushSecret},
		{"Authorization", "Bearer"},
		bearer("not-a-token-at-all-0123"),
		bearer(pushSecret + "x"),
	} {
		res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "mail"}`, header...)
		m := requireError(t, res, http.StatusUnauthorized, "unauthenticated", "")
		require.True(t, strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer"), "%v", header)
		require.NotContains(t, string(res.body), pushSecret)
		require.NotNil(t, m["error"])
	}
	// A path without a route needs a token too, so it tells nothing.
	requireError(t, b.do(t, http.MethodGet, "/v1/nothing", nil), http.StatusUnauthorized, "unauthenticated", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/nothing", nil, bearer(pushSecret)...), http.StatusNotFound, "not_found", "")

	// 403 has the JSON body and no WWW-Authenticate challenge.
	res := b.do(t, http.MethodPut, "/v1/topics/mail", `{}`, bearer(pushSecret)...)
	m := requireError(t, res, http.StatusForbidden, "permission_denied", "")
	require.Contains(t, m["error"].(map[string]any)["message"], `token "producer" lacks the admin scope`)
	require.Empty(t, res.header.Get("WWW-Authenticate"))

	requireStatus(t, b.do(t, http.MethodGet, "/healthz", nil), http.StatusOK)
	requireStatus(t, b.do(t, http.MethodGet, "/readyz", nil), http.StatusOK)
	require.NotContains(t, logs.String(), pushSecret)
}

// TestAuthMetrics checks that mounted routes follow the table: /metrics is
// open unless protected, when it needs admin.
func TestAuthMetrics(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("# metrics\n")) })

	open, _ := setupAuth(t)
	open.server.Handle("GET /metrics", metrics)
	requireStatus(t, open.do(t, http.MethodGet, "/metrics", nil), http.StatusOK)

	closed, _ := setupAuth(t, func(c *setupConfig) { c.protectMetrics = true })
	closed.server.Handle("GET /metrics", metrics)
	requireError(t, closed.do(t, http.MethodGet, "/metrics", nil), http.StatusUnauthorized, "unauthenticated", "")
	requireError(t, closed.do(t, http.MethodGet, "/metrics", nil, bearer(consumeSecret)...), http.StatusForbidden, "permission_denied", "")
	requireStatus(t, closed.do(t, http.MethodGet, "/metrics", nil, bearer(adminSecret)...), http.StatusOK)
}

// TestAuthTopics checks a token restricted to orders.>: body topics, path
// topics, the topic of a job given by id, batches job by job, and the list
// of topics.
func TestAuthTopics(t *testing.T) {
	t.Parallel()
	b, logs := setupAuth(t)
	tok := bearer(ordersSecret)

	res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "orders.close", "id": "o1"}`, tok...)
	requireStatus(t, res, http.StatusCreated)
	res = b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "orders.eu.close"}`, tok...)
	requireStatus(t, res, http.StatusCreated)
	res = b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "mail", "id": "m1"}`, tok...)
	m := requireError(t, res, http.StatusForbidden, "permission_denied", "")
	require.Contains(t, m["error"].(map[string]any)["message"], `may not use topic "mail"`)
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "orders"}`, tok...), http.StatusForbidden, "permission_denied", "")

	// A job of another topic, by id: refused whatever the route.
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "mail", "id": "m1", "delay": "1h"}`, bearer(pushSecret)...), http.StatusCreated)
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/v1/jobs/m1", ""},
		{"DELETE", "/v1/jobs/m1", ""},
		{"POST", "/v1/jobs/m1/ack", `{"lease": "x"}`},
		{"PUT", "/v1/jobs/m1", `{"topic": "orders.close"}`}, // would move it
	} {
		requireError(t, b.do(t, rt.method, rt.path, rt.body, tok...), http.StatusForbidden, "permission_denied", "")
	}
	requireStatus(t, b.do(t, http.MethodGet, "/v1/jobs/o1", nil, tok...), http.StatusOK)
	requireError(t, b.do(t, http.MethodGet, "/v1/jobs/unknown", nil, tok...), http.StatusNotFound, "not_found", "")

	// Path topics.
	requireStatus(t, b.do(t, http.MethodPost, "/v1/topics/orders.close/claim", `{"max": 1}`, tok...), http.StatusOK)
	requireError(t, b.do(t, http.MethodPost, "/v1/topics/mail/claim", `{"max": 1}`, tok...), http.StatusForbidden, "permission_denied", "")

	// A batch fails job by job.
	res = b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs": [{"topic": "orders.close"}, {"topic": "mail"}]}`, tok...)
	requireStatus(t, res, http.StatusOK)
	var batch struct {
		Results []map[string]any `json:"results"`
	}
	require.NoError(t, json.Unmarshal(res.body, &batch))
	require.Len(t, batch.Results, 2)
	require.NotEmpty(t, batch.Results[0]["id"])
	require.Equal(t, "permission_denied", batch.Results[1]["error"].(map[string]any)["code"])

	// The admin sees every topic.
	res = b.do(t, http.MethodGet, "/v1/topics", nil, bearer(adminSecret)...)
	requireStatus(t, res, http.StatusOK)
	require.Contains(t, string(res.body), `"mail"`)
	require.Contains(t, string(res.body), `"orders.close"`)

	require.NotContains(t, logs.String(), ordersSecret)
	require.Contains(t, logs.String(), "token=orders-app")
}

// TestAuthOpenWithoutTokens checks that a server without tokens serves as
// before, ignoring any Authorization header.
func TestAuthOpenWithoutTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "mail"}`), http.StatusCreated)
	requireStatus(t, b.do(t, http.MethodPut, "/v1/topics/mail", `{}`, bearer("whatever-0123456789")...), http.StatusOK)
}

// TestAuthConflictHidesForeignJobs checks that a token restricted to some
// topics never reads a job of another topic, body included, through a
// conflict: a create, a batch item or a replace naming the id of a foreign
// job gets 409 without the job, and no answer names the foreign topic. A job
// of its own topics still comes back with its conflict.
func TestAuthConflictHidesForeignJobs(t *testing.T) {
	t.Parallel()
	b, _ := setupAuth(t)
	tok := bearer(ordersSecret)
	const secretBody = `{"salary": 123456}`
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs",
		`{"topic": "payroll.salaries", "id": "pay-1", "delay": "1h", "body": `+secretBody+`}`, bearer(pushSecret)...), http.StatusCreated)

	leaks := func(t *testing.T, body []byte) {
		t.Helper()
		require.NotContains(t, string(body), "payroll")
		require.NotContains(t, string(body), "123456")
	}

	res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "orders.a", "id": "pay-1"}`, tok...)
	m := requireError(t, res, http.StatusConflict, "conflict", "")
	require.NotContains(t, m, "job")
	leaks(t, res.body)

	res = b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs": [{"topic": "orders.a", "id": "pay-1"}]}`, tok...)
	requireStatus(t, res, http.StatusOK)
	var batch struct {
		Results []map[string]any `json:"results"`
	}
	require.NoError(t, json.Unmarshal(res.body, &batch))
	require.Len(t, batch.Results, 1)
	require.Equal(t, "conflict", batch.Results[0]["error"].(map[string]any)["code"])
	require.NotContains(t, batch.Results[0], "job")
	leaks(t, res.body)

	// Routes given the foreign job's id are refused without naming its topic.
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/v1/jobs/pay-1", ""},
		{"PUT", "/v1/jobs/pay-1", `{"topic": "orders.a"}`},
		{"DELETE", "/v1/jobs/pay-1", ""},
		{"POST", "/v1/jobs/pay-1/nack", `{"lease": "x"}`},
	} {
		res := b.do(t, rt.method, rt.path, rt.body, tok...)
		requireError(t, res, http.StatusForbidden, "permission_denied", "")
		leaks(t, res.body)
	}

	// The stored job is unchanged.
	res = b.do(t, http.MethodGet, "/v1/jobs/pay-1", nil, bearer(adminSecret)...)
	requireStatus(t, res, http.StatusOK)
	job := res.object(t)
	require.Equal(t, "payroll.salaries", job["topic"])
	require.Equal(t, "scheduled", job["state"])

	// A conflict on a job of the token's own topics still shows that job.
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "orders.a", "id": "o-1", "delay": "1h"}`, tok...), http.StatusCreated)
	m = requireError(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "orders.b", "id": "o-1"}`, tok...), http.StatusConflict, "conflict", "")
	require.Equal(t, "orders.a", m["job"].(map[string]any)["topic"])
}

// ordersAdmin is the secret of adminTokens' admin restricted to orders.>.
const ordersAdmin = "orders-admin-secret-0123456789"

// adminTokens returns two admin tokens: "ops" (adminSecret) for every
// topic, and "orders-admin" (ordersAdmin) for orders.>.
func adminTokens(t *testing.T) *auth.Tokens {
	t.Helper()
	tokens, err := auth.NewTokens([]auth.Token{
		{Name: "ops", Token: adminSecret, Scopes: []auth.Scope{auth.ScopeAdmin}},
		{Name: "orders-admin", Token: ordersAdmin, Scopes: []auth.Scope{auth.ScopeAdmin}, Topics: []string{"orders.>"}},
	})
	require.NoError(t, err)
	return tokens
}

// TestAuthNATSDeliverySubject checks that an admin token restricted to
// orders.> may name as delivery.subject only delayq.deliver.<topic> of its
// topics or a subject of Config.NATSDeliverySubjects, and that an
// unrestricted admin is not bound by either.
func TestAuthNATSDeliverySubject(t *testing.T) {
	t.Parallel()
	tokens := adminTokens(t)
	b := setup(t, func(c *setupConfig) {
		c.tokens, c.nats, c.natsSubjects = tokens, true, []string{"billing.>", "audit.*.log"}
	})
	put := func(secret, topic, subject string) *response {
		delivery := map[string]any{"type": "nats"}
		if subject != "" {
			delivery["subject"] = subject
		}
		return b.do(t, http.MethodPut, "/v1/topics/"+topic, map[string]any{"delivery": delivery}, bearer(secret)...)
	}
	for _, subject := range []string{"", "delayq.deliver.orders.a", "delayq.deliver.orders.eu.b", "billing.commands.refund", "audit.orders.log"} {
		requireStatus(t, put(ordersAdmin, "orders.a", subject), http.StatusOK)
	}
	requireStatus(t, put(ordersAdmin, "orders.a", "delayq.deliver.orders.a"), http.StatusOK)
	for _, subject := range []string{
		"delayq.deliver.mail",       // another topic's subject
		"delayq.deliver.orders",     // orders.> does not match orders
		"delayq.deliver.orders.a.>", // not a topic name
		"billing",                   // billing.> needs a token more
		"audit.orders.eu.log",       // * is one token
		"payments.capture",          // not listed
		"delayq.push.orders.a",      // reserved, and not this token's to name
		"_INBOX.abc",
	} {
		res := put(ordersAdmin, "orders.a", subject)
		e, _ := requireError(t, res, http.StatusForbidden, "permission_denied", "")["error"].(map[string]any)
		msg, _ := e["message"].(string)
		require.NotContains(t, msg, subject, "the message does not echo the subject")
		require.NotContains(t, msg, "mail", "the message names no other topic")
	}
	var view struct {
		Delivery struct {
			Subject string `json:"subject"`
		} `json:"delivery"`
	}
	res := b.do(t, http.MethodGet, "/v1/topics/orders.a", nil, bearer(ordersAdmin)...)
	requireStatus(t, res, http.StatusOK)
	require.NoError(t, json.Unmarshal(res.body, &view))
	require.Equal(t, "delayq.deliver.orders.a", view.Delivery.Subject, "a refused put changes nothing")

	// An unrestricted admin may name any subject the deliverer accepts.
	requireStatus(t, put(adminSecret, "orders.a", "payments.capture"), http.StatusOK)
	requireStatus(t, put(adminSecret, "mail", "delayq.deliver.orders.a"), http.StatusOK)
}

// TestAuthErrorBodyNeedsUnrestrictedAdmin checks that only a token that may
// use every topic sets delivery.error_body: with it, a topic-restricted
// admin could point its webhook at an internal service and read that
// service's answers through its jobs' last_error.
func TestAuthErrorBodyNeedsUnrestrictedAdmin(t *testing.T) {
	t.Parallel()
	tokens := adminTokens(t)
	b := setup(t, func(c *setupConfig) { c.tokens = tokens })
	put := func(secret string, errorBody bool) *response {
		return b.do(t, http.MethodPut, "/v1/topics/orders.a", map[string]any{"delivery": map[string]any{
			"type": "webhook", "url": "http://127.0.0.1:9/hook", "error_body": errorBody,
		}}, bearer(secret)...)
	}
	requireStatus(t, put(ordersAdmin, false), http.StatusOK)
	m := requireError(t, put(ordersAdmin, true), http.StatusForbidden, "permission_denied", "")
	require.Contains(t, m["error"].(map[string]any)["message"], "delivery.error_body")
	topic, err := b.engine.GetTopic(t.Context(), "orders.a")
	require.NoError(t, err)
	require.False(t, topic.Delivery.ErrorBody, "the refused put changed nothing")

	res := put(adminSecret, true)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, true, res.object(t)["delivery"].(map[string]any)["error_body"])
}

// TestAuthSuccessNeedsUnrestrictedAdmin checks that only a token that may
// set delivery.error_body sets delivery.success: a condition's verdict,
// seen in each job's outcome, tells a bit of the answer, so a
// topic-restricted admin with many topics read a secret of an internal
// service's answer through them.
func TestAuthSuccessNeedsUnrestrictedAdmin(t *testing.T) {
	t.Parallel()
	tokens := adminTokens(t)
	b := setup(t, func(c *setupConfig) { c.tokens = tokens })
	url, jobURLs := "http://127.0.0.1:9/hook", false
	put := func(secret, success string) *response {
		delivery := map[string]any{"type": "webhook", "url": url, "allow_job_url": jobURLs}
		if success != "" {
			delivery["success"] = success
		}
		return b.do(t, http.MethodPut, "/v1/topics/orders.a", map[string]any{"delivery": delivery, "concurrency": 3}, bearer(secret)...)
	}
	requireStatus(t, put(ordersAdmin, ""), http.StatusOK)
	m := requireError(t, put(ordersAdmin, `body.secret.matches("^a")`), http.StatusForbidden, "permission_denied", "")
	require.Contains(t, m["error"].(map[string]any)["message"], "delivery.success")
	topic, err := b.engine.GetTopic(t.Context(), "orders.a")
	require.NoError(t, err)
	require.Empty(t, topic.Delivery.Success, "the refused put changed nothing")

	res := put(adminSecret, "status == 200")
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "status == 200", res.object(t)["delivery"].(map[string]any)["success"])
	requireError(t, put(ordersAdmin, "status == 201"), http.StatusForbidden, "permission_denied", "")
	url = "http://127.0.0.1:9/other"
	requireError(t, put(ordersAdmin, "status == 200"), http.StatusForbidden, "permission_denied", "")
	url, jobURLs = "http://127.0.0.1:9/hook", true
	requireError(t, put(ordersAdmin, "status == 200"), http.StatusForbidden, "permission_denied", "")
	jobURLs = false
	topic, err = b.engine.GetTopic(t.Context(), "orders.a")
	require.NoError(t, err)
	require.Equal(t, "status == 200", topic.Delivery.Success, "nor a put of another condition, or of the same one to another destination")
	require.Equal(t, "http://127.0.0.1:9/hook", topic.Delivery.URL)

	// The condition kept as it is, to the same destination, with another
	// field changed (a form that sends the whole topic back): allowed.
	res = put(ordersAdmin, "status == 200")
	requireStatus(t, res, http.StatusOK)
	require.EqualValues(t, 3, res.object(t)["concurrency"])
	require.Equal(t, "status == 200", res.object(t)["delivery"].(map[string]any)["success"])
}

// TestAuthOnDeadTopic checks that a topic-restricted admin may name as
// on_dead only a topic it may use: the notices are jobs of that topic.
func TestAuthOnDeadTopic(t *testing.T) {
	t.Parallel()
	tokens := adminTokens(t)
	b := setup(t, func(c *setupConfig) { c.tokens = tokens })
	put := func(secret, onDead string) *response {
		return b.do(t, http.MethodPut, "/v1/topics/orders.a", map[string]any{"on_dead": onDead}, bearer(secret)...)
	}
	res := put(ordersAdmin, "orders.dead")
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "orders.dead", res.object(t)["on_dead"])
	m := requireError(t, put(ordersAdmin, "mail.dead"), http.StatusForbidden, "permission_denied", "")
	require.NotContains(t, m["error"].(map[string]any)["message"], "mail", "the message names no other topic")
	topic, err := b.engine.GetTopic(t.Context(), "orders.a")
	require.NoError(t, err)
	require.Equal(t, "orders.dead", topic.OnDead, "the refused put changed nothing")
	requireStatus(t, put(adminSecret, "mail.dead"), http.StatusOK)
	requireError(t, put(adminSecret, "orders.a"), http.StatusBadRequest, "invalid_argument", "on_dead")
}
