package httptransport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestJobThen: a job's then, its next steps, is taken as a job object of
// a push, shown by GET as given, refused with 400 naming the field within
// then when bad (nothing stored), and bound to the topics of a restricted
// token.
func TestJobThen(t *testing.T) {
	t.Parallel()
	b, _ := setupAuth(t)
	tok := bearer(ordersSecret)
	res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "orders.placed", "id": "o-42",
		"then": {"topic": "orders.remind", "delay": "30m", "key": "o-42", "body": {"remind": 42}, "priority": -1,
			"backoff": {"delays": ["1s"]}, "max_attempts": 2, "ttr": 5000,
			"then": {"topic": "orders.cancel", "delay": "24h", "key": "o-42", "then": null}}}`, tok...)
	requireStatus(t, res, http.StatusCreated)
	res = b.do(t, http.MethodGet, "/v1/jobs/o-42", nil, tok...)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, map[string]any{
		"topic": "orders.remind", "delay": "30m0s", "key": "o-42", "body": map[string]any{"remind": float64(42)},
		"priority": float64(-1), "backoff": map[string]any{"delays": []any{"1s"}}, "max_attempts": float64(2), "ttr": "5s",
		"then": map[string]any{"topic": "orders.cancel", "delay": "24h0m0s", "key": "o-42"},
	}, res.object(t)["then"])
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "orders.plain", "id": "plain"}`, tok...), http.StatusCreated)
	res = b.do(t, http.MethodGet, "/v1/jobs/plain", nil, tok...)
	requireStatus(t, res, http.StatusOK)
	require.NotContains(t, res.object(t), "then", "then of a job without one")

	deep := `{"topic": "s"}`
	for range core.ThenDepthMax {
		deep = fmt.Sprintf(`{"topic": "s", "then": %s}`, deep)
	}
	for _, c := range []struct{ then, field string }{
		{`{"topic": "a..b"}`, "then.topic"},
		{`{"topic": "s", "id": "mine"}`, "then.id"},
		{`{"topic": "s", "bogus": 1}`, "then.bogus"},
		{`{"topic": "s", "then": {"topic": "s", "delay": "soon"}}`, "then.then.delay"},
		{`"later"`, "then"},
		{deep, "then" + strings.Repeat(".then", core.ThenDepthMax)},
		{`{"topic": "s", "body": "` + strings.Repeat("x", core.ThenMaxBytes) + `"}`, "then"},
	} {
		res := b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "t", "id": "refused", "then": `+c.then+`}`, bearer(pushSecret)...)
		requireError(t, res, http.StatusBadRequest, "invalid_argument", c.field)
		requireError(t, b.do(t, http.MethodGet, "/v1/jobs/refused", nil, bearer(adminSecret)...), http.StatusNotFound, "not_found", "")
	}

	// A restricted token names only its own topics in then, at any depth.
	res = b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "orders.a", "then": {"topic": "orders.b", "then": {"topic": "mail"}}}`, tok...)
	m := requireError(t, res, http.StatusForbidden, "permission_denied", "")
	require.Contains(t, m["error"].(map[string]any)["message"], `"mail"`)
	res = b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs": [{"topic": "orders.a", "then": {"topic": "mail"}}]}`, tok...)
	requireStatus(t, res, http.StatusOK)
	require.Contains(t, string(res.body), `"code":"permission_denied"`)
}
