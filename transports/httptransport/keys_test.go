package httptransport_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestJobsByKey: GET /v1/topics/{topic}/jobs?key= pages through a topic's
// jobs with a key, DELETE cancels those not reserved and lists both.
func TestJobsByKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := "order 42/é"
	q := "?key=" + url.QueryEscape(key)
	var ids []string
	for range 3 {
		ids = append(ids, b.push(t, `{"topic": "orders", "key": "order 42/é", "delay": "1h"}`))
	}
	due := b.push(t, `{"topic": "orders", "key": "order 42/é"}`)
	ids = append(ids, due)
	b.push(t, `{"topic": "orders", "key": "order 43"}`)
	require.Len(t, b.claim(t, "orders", 1), 1)

	page := func(query string) (ids []string, next string) {
		t.Helper()
		res := b.do(t, http.MethodGet, "/v1/topics/orders/jobs"+query, nil)
		requireStatus(t, res, http.StatusOK)
		var v struct {
			Jobs      []map[string]any `json:"jobs"`
			NextAfter string           `json:"next_after"`
		}
		require.NoError(t, json.Unmarshal(res.body, &v))
		require.NotNil(t, v.Jobs)
		for _, j := range v.Jobs {
			require.Equal(t, key, j["key"])
			require.NotContains(t, j, "lease", "listings do not show leases")
			ids = append(ids, j["id"].(string))
		}
		return ids, v.NextAfter
	}
	first, next := page(q + "&limit=3")
	require.Equal(t, ids[:3], first)
	require.Equal(t, ids[2], next, "a full page says where the next starts")
	rest, next := page(q + "&limit=3&after=" + next)
	require.Equal(t, ids[3:], rest)
	require.Empty(t, next)
	none, _ := page("?key=nobody")
	require.Empty(t, none)

	res := b.do(t, http.MethodDelete, "/v1/topics/orders/jobs"+q, nil)
	requireStatus(t, res, http.StatusOK)
	require.JSONEq(t, `{"cancelled": ["`+ids[0]+`","`+ids[1]+`","`+ids[2]+`"], "reserved": ["`+due+`"]}`, string(res.body))
	require.Equal(t, "cancelled", b.getJob(t, ids[0])["state"])
	require.Equal(t, "reserved", b.getJob(t, due)["state"])

	for path, field := range map[string]string{
		"/v1/topics/orders/jobs":                       "key",
		"/v1/topics/orders/jobs?key=":                  "key",
		"/v1/topics/orders/jobs?key=a&limit=x":         "limit",
		"/v1/topics/orders/jobs?key=a&limit=0":         "limit",
		"/v1/topics/orders/jobs?key=a&limit=1001":      "limit",
		"/v1/topics/orders/jobs?key=a&after=not.an.id": "after",
		"/v1/topics/orders/jobs?key=" + "%01":          "key",
		"/v1/topics/or..ders/jobs?key=a":               "topic",
	} {
		requireError(t, b.do(t, http.MethodGet, path, nil), http.StatusBadRequest, "invalid_argument", field)
	}
	requireError(t, b.do(t, http.MethodDelete, "/v1/topics/orders/jobs", nil), http.StatusBadRequest, "invalid_argument", "key")
}

// TestUniqueKeysOverHTTP: a topic's unique_keys round-trips, a second push
// of a key conflicts (409 with the job) or replaces (200, "replaced").
func TestUniqueKeysOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPut, "/v1/topics/rej", `{"unique_keys": "reject"}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "reject", res.object(t)["unique_keys"])
	requireStatus(t, b.do(t, http.MethodPut, "/v1/topics/rep", `{"unique_keys": "replace"}`), http.StatusOK)
	requireError(t, b.do(t, http.MethodPut, "/v1/topics/bad", `{"unique_keys": "always"}`), http.StatusBadRequest, "invalid_argument", "unique_keys")
	requireError(t, b.do(t, http.MethodPut, "/v1/topics/bad", `{"unique_keys": true}`), http.StatusBadRequest, "invalid_argument", "unique_keys")
	require.NotContains(t, b.do(t, http.MethodGet, "/v1/topics/plain", nil).object(t), "unique_keys")

	id := b.push(t, `{"topic": "rej", "key": "o-1", "body": 1, "delay": "1h"}`)
	require.Equal(t, core.KeyID("rej", "o-1"), id)
	res = b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "rej", "key": "o-1", "body": 2}`)
	m := requireError(t, res, http.StatusConflict, "conflict", "")
	require.Equal(t, id, m["job"].(map[string]any)["id"], "the existing job: %s", res.body)

	first := b.push(t, `{"topic": "rep", "key": "o-1", "body": 1, "delay": "1h"}`)
	res = b.do(t, http.MethodPost, "/v1/jobs", `{"topic": "rep", "key": "o-1", "body": 2}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, map[string]any{"id": first, "topic": "rep", "run_at": res.object(t)["run_at"], "state": "ready", "replaced": true}, res.object(t))
	require.JSONEq(t, `2`, string(mustJSON(t, b.getJob(t, first)["body"])))

	res = b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs": [{"topic": "rep", "key": "o-1", "body": 3}, {"topic": "rej", "key": "o-1"}, {"topic": "rej", "id": "mine", "key": "o-2"}]}`)
	requireStatus(t, res, http.StatusOK)
	var batch struct {
		Results []map[string]any `json:"results"`
	}
	require.NoError(t, json.Unmarshal(res.body, &batch))
	require.Equal(t, true, batch.Results[0]["replaced"])
	require.Equal(t, "conflict", batch.Results[1]["error"].(map[string]any)["code"])
	require.Equal(t, "id", batch.Results[2]["error"].(map[string]any)["field"])
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
