package httptransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// itemResults decodes the 200 answer of POST /v1/acks or /v1/nacks.
func itemResults(t *testing.T, res *response, n int) []map[string]any {
	t.Helper()
	requireStatus(t, res, http.StatusOK)
	var v struct {
		Results []map[string]any `json:"results"`
	}
	require.NoError(t, json.Unmarshal(res.body, &v), "body: %s", res.body)
	require.Len(t, v.Results, n, "body: %s", res.body)
	return v.Results
}

// requireItemError checks the result of an item that failed: its id and
// its error's code and field.
func requireItemError(t *testing.T, result map[string]any, id, code, field string) {
	t.Helper()
	require.Equal(t, id, result["id"], "result: %v", result)
	e, ok := result["error"].(map[string]any)
	require.True(t, ok, "result: %v", result)
	require.Equal(t, code, e["code"], "result: %v", result)
	require.Equal(t, field, e["field"], "result: %v", result)
	require.NotEmpty(t, e["message"])
}

// claimLeases pushes a ready job of topic t for each id (with the extra
// fields of job, such as a ttr), claims them all, and returns their leases
// by id.
func (b *testBundle) claimLeases(t *testing.T, job string, ids ...string) map[string]string {
	t.Helper()
	for _, id := range ids {
		b.push(t, fmt.Sprintf(`{"topic":"t","id":%q%s}`, id, job))
	}
	leases := map[string]string{}
	for _, d := range b.claim(t, "t", len(ids)) {
		leases[d["id"].(string)] = d["lease"].(string)
	}
	require.Len(t, leases, len(ids))
	return leases
}

func TestAckBatch(t *testing.T) {
	t.Parallel()

	t.Run("EachItem", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := b.claimLeases(t, "", "a", "b", "c", "d")
		res := b.do(t, http.MethodPost, "/v1/acks", fmt.Sprintf(`{"acks":[
			{"id":"a","lease":%q},
			{"id":"b","lease":"wrong"},
			{"id":5,"lease":"x"},
			{"id":"c"},
			{"id":"unknown","lease":"x"},
			{"id":"bad id","lease":"x"},
			{"id":"a","lease":%q},
			{"id":"c","lease":%q,"nope":1},
			7,
			{"id":"d","lease":%q}
		]}`, l["a"], l["a"], l["c"], l["d"]))
		rs := itemResults(t, res, 10)
		require.Equal(t, map[string]any{"id": "a"}, rs[0])
		// A lost lease in the middle fails alone.
		requireItemError(t, rs[1], "b", "conflict", "")
		require.Contains(t, rs[1]["error"].(map[string]any)["message"], `the lease of job "b" is lost`)
		// Items that fail to decode fail alone, with the id they name.
		requireItemError(t, rs[2], "", "invalid_argument", "id")
		requireItemError(t, rs[3], "c", "invalid_argument", "lease")
		requireItemError(t, rs[4], "unknown", "not_found", "")
		requireItemError(t, rs[5], "bad id", "not_found", "")
		// A repeated id: the first ack settled the delivery.
		requireItemError(t, rs[6], "a", "conflict", "")
		requireItemError(t, rs[7], "c", "invalid_argument", "nope")
		requireItemError(t, rs[8], "", "invalid_argument", "")
		require.Equal(t, map[string]any{"id": "d"}, rs[9])

		for id, state := range map[string]string{"a": "done", "b": "reserved", "c": "reserved", "d": "done"} {
			require.Equal(t, state, b.getJob(t, id)["state"], id)
		}
	})

	t.Run("WellFormed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := b.claimLeases(t, "", "a", "b")
		res := b.do(t, http.MethodPost, "/v1/acks", map[string]any{"acks": []map[string]string{
			{"id": "a", "lease": l["a"]}, {"id": "b", "lease": l["b"]}, {"id": "a", "lease": l["a"]},
		}})
		rs := itemResults(t, res, 3)
		require.Equal(t, map[string]any{"id": "a"}, rs[0])
		require.Equal(t, map[string]any{"id": "b"}, rs[1])
		requireItemError(t, rs[2], "a", "conflict", "")
	})

	t.Run("LeaseExpiredInTheMiddle", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := b.claimLeases(t, `,"ttr":"1m"`, "x", "z")
		l["y"] = b.claimLeases(t, `,"ttr":"5s"`, "y")["y"]
		b.clock.Advance(6 * time.Second)
		res := b.do(t, http.MethodPost, "/v1/acks", fmt.Sprintf(`{"acks":[{"id":"x","lease":%q},{"id":"y","lease":%q},{"id":"z","lease":%q}]}`,
			l["x"], l["y"], l["z"]))
		rs := itemResults(t, res, 3)
		require.Equal(t, map[string]any{"id": "x"}, rs[0])
		requireItemError(t, rs[1], "y", "conflict", "")
		require.Equal(t, map[string]any{"id": "z"}, rs[2])
		require.Equal(t, "ready", b.getJob(t, "y")["state"])
	})

	t.Run("FinishedJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := b.claimLeases(t, "", "a")
		requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/a/ack", map[string]string{"lease": l["a"]}), http.StatusNoContent)
		b.push(t, `{"topic":"t","id":"gone","delay":"1h"}`)
		requireStatus(t, b.do(t, http.MethodDelete, "/v1/jobs/gone", nil), http.StatusNoContent)

		res := b.do(t, http.MethodPost, "/v1/acks", fmt.Sprintf(`{"acks":[{"id":"a","lease":%q},{"id":"gone","lease":"x"}]}`, l["a"]))
		rs := itemResults(t, res, 2)
		requireItemError(t, rs[0], "a", "conflict", "")
		requireItemError(t, rs[1], "gone", "conflict", "")
		require.Equal(t, "done", b.getJob(t, "a")["state"])
	})

	t.Run("Caps", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *setupConfig) { c.limits.MaxBatch = 3 })
		for _, body := range []string{`{"acks":[]}`, `{}`, `{"acks":null}`, `{"acks":{}}`, `{"acks":"a"}`} {
			requireError(t, b.do(t, http.MethodPost, "/v1/acks", body), http.StatusBadRequest, "invalid_argument", "acks")
		}
		requireError(t, b.do(t, http.MethodPost, "/v1/acks", `{"acks":[],"x":1}`), http.StatusBadRequest, "invalid_argument", "x")
		requireError(t, b.do(t, http.MethodPost, "/v1/acks", `[]`), http.StatusBadRequest, "invalid_argument", "")
		requireError(t, b.do(t, http.MethodPost, "/v1/acks", `{"acks":[{"id":"a","lease":"x"}]`), http.StatusBadRequest, "invalid_argument", "")

		l := b.claimLeases(t, "", "a")
		four := `{"acks":[` + strings.Repeat(`{"id":"u","lease":"x"},`, 3) + fmt.Sprintf(`{"id":"a","lease":%q}]}`, l["a"])
		requireError(t, b.do(t, http.MethodPost, "/v1/acks", four), http.StatusRequestEntityTooLarge, "too_large", "acks")
		require.Equal(t, "reserved", b.getJob(t, "a")["state"])

		three := `{"acks":[` + strings.Repeat(`{"id":"u","lease":"x"},`, 2) + fmt.Sprintf(`{"id":"a","lease":%q}]}`, l["a"])
		rs := itemResults(t, b.do(t, http.MethodPost, "/v1/acks", three), 3)
		requireItemError(t, rs[0], "u", "not_found", "")
		require.Equal(t, map[string]any{"id": "a"}, rs[2])
	})

	t.Run("BackendDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := b.claimLeases(t, "", "a", "b")
		body := fmt.Sprintf(`{"acks":[{"id":"a","lease":%q},{"id":"b","lease":%q}]}`, l["a"], l["b"])
		b.down.mode.Store(modeUnavailable)
		// Every ack failed server-side: the request is answered 503 whole.
		requireError(t, b.do(t, http.MethodPost, "/v1/acks", body), http.StatusServiceUnavailable, "unavailable", "")

		// A bad ack fails on its own; the others report the outage.
		res := b.do(t, http.MethodPost, "/v1/acks", fmt.Sprintf(`{"acks":[{"id":"a","lease":%q},{"id":"b"}]}`, l["a"]))
		rs := itemResults(t, res, 2)
		requireItemError(t, rs[0], "a", "unavailable", "")
		requireItemError(t, rs[1], "b", "invalid_argument", "lease")

		b.down.mode.Store(modeBroken)
		res = b.do(t, http.MethodPost, "/v1/acks", body)
		requireError(t, res, http.StatusInternalServerError, "internal", "")
		require.NotContains(t, string(res.body), "disk on fire")

		b.down.mode.Store(modeUp)
		rs = itemResults(t, b.do(t, http.MethodPost, "/v1/acks", body), 2)
		require.Equal(t, []map[string]any{{"id": "a"}, {"id": "b"}}, rs)
	})
}

func TestNackBatch(t *testing.T) {
	t.Parallel()

	t.Run("RetryAndBury", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := b.claimLeases(t, `,"max_attempts":3`, "r", "p")
		l["dd"] = b.claimLeases(t, `,"max_attempts":1`, "dd")["dd"]
		now := b.clock.Now()
		res := b.do(t, http.MethodPost, "/v1/nacks", fmt.Sprintf(`{"nacks":[
			{"id":"r","lease":%q,"delay":"10s","error":"boom"},
			{"id":"dd","lease":%q,"error":"gave up"},
			{"id":"r","lease":%q},
			{"id":"p","lease":%q,"delay":"soon"},
			{"id":"p","lease":%q,"delay":-1},
			{"id":"p","lease":%q,"delay":"8800h"},
			{"id":"p","lease":%q,"error":5},
			{"id":"unknown","lease":"x"},
			{"id":"p"},
			null,
			{"id":"p","lease":%q,"delay":0}
		]}`, l["r"], l["dd"], l["r"], l["p"], l["p"], l["p"], l["p"], l["p"]))
		rs := itemResults(t, res, 11)
		require.Equal(t, map[string]any{"id": "r"}, rs[0])
		require.Equal(t, map[string]any{"id": "dd"}, rs[1])
		// The first nack ended the delivery.
		requireItemError(t, rs[2], "r", "conflict", "")
		requireItemError(t, rs[3], "p", "invalid_argument", "delay")
		requireItemError(t, rs[4], "p", "invalid_argument", "delay")
		requireItemError(t, rs[5], "p", "invalid_argument", "delay")
		requireItemError(t, rs[6], "p", "invalid_argument", "error")
		requireItemError(t, rs[7], "unknown", "not_found", "")
		requireItemError(t, rs[8], "p", "invalid_argument", "lease")
		requireItemError(t, rs[9], "", "invalid_argument", "")
		require.Equal(t, map[string]any{"id": "p"}, rs[10])

		r := b.getJob(t, "r")
		require.Equal(t, "scheduled", r["state"])
		require.Equal(t, "boom", r["last_error"])
		require.Equal(t, rfc3339ms(now.Add(10*time.Second)), r["run_at"])
		dd := b.getJob(t, "dd")
		require.Equal(t, "dead", dd["state"])
		require.Equal(t, "gave up", dd["last_error"])
		require.Equal(t, "ready", b.getJob(t, "p")["state"])

		// p is due at once, r after its delay, each on its second attempt.
		d := b.claim(t, "t", 10)
		require.Len(t, d, 1)
		require.Equal(t, "p", d[0]["id"])
		b.clock.Advance(10 * time.Second)
		d = b.claim(t, "t", 10)
		require.Len(t, d, 1)
		require.Equal(t, "r", d[0]["id"])
		require.Equal(t, float64(2), d[0]["attempt"])
	})

	t.Run("LeaseLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := b.claimLeases(t, `,"ttr":"5s"`, "a")
		b.clock.Advance(6 * time.Second)
		rs := itemResults(t, b.do(t, http.MethodPost, "/v1/nacks", fmt.Sprintf(`{"nacks":[{"id":"a","lease":%q}]}`, l["a"])), 1)
		requireItemError(t, rs[0], "a", "conflict", "")
	})

	t.Run("Caps", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *setupConfig) { c.limits.MaxBatch = 2 })
		for _, body := range []string{`{"nacks":[]}`, `{}`, `{"nacks":{}}`} {
			requireError(t, b.do(t, http.MethodPost, "/v1/nacks", body), http.StatusBadRequest, "invalid_argument", "nacks")
		}
		requireError(t, b.do(t, http.MethodPost, "/v1/nacks", `{"acks":[]}`), http.StatusBadRequest, "invalid_argument", "acks")
		l := b.claimLeases(t, "", "a")
		three := fmt.Sprintf(`{"nacks":[{"id":"a","lease":%q},{"id":"u","lease":"x"},{"id":"u","lease":"x"}]}`, l["a"])
		requireError(t, b.do(t, http.MethodPost, "/v1/nacks", three), http.StatusRequestEntityTooLarge, "too_large", "nacks")
		require.Equal(t, "reserved", b.getJob(t, "a")["state"])
	})

	t.Run("BackendDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := b.claimLeases(t, "", "a", "b")
		b.down.mode.Store(modeUnavailable)
		body := fmt.Sprintf(`{"nacks":[{"id":"a","lease":%q},{"id":"b","lease":%q}]}`, l["a"], l["b"])
		requireError(t, b.do(t, http.MethodPost, "/v1/nacks", body), http.StatusServiceUnavailable, "unavailable", "")
		rs := itemResults(t, b.do(t, http.MethodPost, "/v1/nacks", fmt.Sprintf(`{"nacks":[{"id":"a","lease":%q},{"id":"b","delay":"x"}]}`, l["a"])), 2)
		requireItemError(t, rs[0], "a", "unavailable", "")
		requireItemError(t, rs[1], "b", "invalid_argument", "delay")
	})
}

// TestAuthAckBatch checks the batch routes with a token restricted to
// orders.>: an item whose job is of another topic fails alone, with the
// error of the route given its job id, and its job is left as it was.
func TestAuthAckBatch(t *testing.T) {
	t.Parallel()
	b, logs := setupAuth(t)
	tok := bearer(ordersSecret)
	for _, j := range []string{`{"topic":"orders.close","id":"o1"}`, `{"topic":"orders.close","id":"o2"}`, `{"topic":"mail","id":"m1"}`} {
		requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", j, bearer(pushSecret)...), http.StatusCreated)
	}
	leases := map[string]string{}
	for _, c := range []struct{ topic, secret string }{{"orders.close", ordersSecret}, {"mail", consumeSecret}} {
		res := b.do(t, http.MethodPost, "/v1/topics/"+c.topic+"/claim", `{"max": 10}`, bearer(c.secret)...)
		requireStatus(t, res, http.StatusOK)
		var v struct{ Jobs []map[string]any }
		require.NoError(t, json.Unmarshal(res.body, &v))
		for _, d := range v.Jobs {
			leases[d["id"].(string)] = d["lease"].(string)
		}
	}
	require.Len(t, leases, 3)

	// The single route's answer for the foreign job, which each item matches.
	single := b.do(t, http.MethodPost, "/v1/jobs/m1/ack", map[string]string{"lease": leases["m1"]}, tok...)
	want := requireError(t, single, http.StatusForbidden, "permission_denied", "")["error"]

	res := b.do(t, http.MethodPost, "/v1/acks", fmt.Sprintf(`{"acks":[{"id":"o1","lease":%q},{"id":"m1","lease":%q},{"id":"unknown","lease":"x"}]}`,
		leases["o1"], leases["m1"]), tok...)
	rs := itemResults(t, res, 3)
	require.Equal(t, map[string]any{"id": "o1"}, rs[0])
	require.Equal(t, map[string]any{"id": "m1", "error": want}, rs[1])
	requireItemError(t, rs[2], "unknown", "not_found", "")
	require.NotContains(t, string(res.body), "mail")

	res = b.do(t, http.MethodPost, "/v1/nacks", fmt.Sprintf(`{"nacks":[{"id":"m1","lease":%q},{"id":"o2","lease":%q,"error":"no"}]}`,
		leases["m1"], leases["o2"]), tok...)
	rs = itemResults(t, res, 2)
	require.Equal(t, map[string]any{"id": "m1", "error": want}, rs[0])
	require.Equal(t, map[string]any{"id": "o2"}, rs[1])
	require.NotContains(t, string(res.body), "mail")

	get := func(id string) map[string]any {
		res := b.do(t, http.MethodGet, "/v1/jobs/"+id, nil, bearer(adminSecret)...)
		requireStatus(t, res, http.StatusOK)
		return res.object(t)
	}
	require.Equal(t, "reserved", get("m1")["state"])
	require.Equal(t, "done", get("o1")["state"])
	require.Equal(t, "no", get("o2")["last_error"])

	// An unrestricted consumer settles it; a producer may not.
	body := fmt.Sprintf(`{"acks":[{"id":"m1","lease":%q}]}`, leases["m1"])
	requireError(t, b.do(t, http.MethodPost, "/v1/acks", body, bearer(pushSecret)...), http.StatusForbidden, "permission_denied", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/nacks", `{"nacks":[{"id":"m1","lease":"x"}]}`, bearer(pushSecret)...), http.StatusForbidden, "permission_denied", "")
	rs = itemResults(t, b.do(t, http.MethodPost, "/v1/acks", body, bearer(consumeSecret)...), 1)
	require.Equal(t, map[string]any{"id": "m1"}, rs[0])

	require.NotContains(t, logs.String(), ordersSecret)
}
