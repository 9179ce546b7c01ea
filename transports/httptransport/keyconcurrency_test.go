package httptransport_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeyConcurrency: a topic's key_concurrency, set by PUT and changed by
// PATCH, bounds each key's jobs in flight for pull claims: one of a key at
// a time, in order, the next once the delivery is acked; jobs without a
// key are not bounded; a value out of range is refused naming the field
// and changes nothing.
func TestKeyConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPut, "/v1/topics/perkey", `{"key_concurrency": 1}`)
	requireStatus(t, res, http.StatusOK)
	require.EqualValues(t, 1, res.object(t)["key_concurrency"])
	var ids []string
	for i, key := range []string{"a", "a", "b", ""} {
		ids = append(ids, b.push(t, fmt.Sprintf(`{"topic": "perkey", "key": %q, "body": %d, "delay": "0s"}`, key, i)))
	}
	claimed := func() []string {
		var got []string
		for _, j := range b.claim(t, "perkey", 10) {
			got = append(got, j["id"].(string))
		}
		return got
	}
	first := b.claim(t, "perkey", 10)
	require.Len(t, first, 3, "the first of a, b, and the job without a key")
	require.Equal(t, ids[0], first[0]["id"])
	require.Empty(t, claimed(), "a's second waits")
	require.Equal(t, "ready", b.getJob(t, ids[1])["state"], "waiting is ready")
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+ids[0]+"/ack", map[string]any{"lease": first[0]["lease"]}), http.StatusNoContent)
	require.Equal(t, []string{ids[1]}, claimed(), "a's second, once the first is acked")

	requireError(t, b.do(t, http.MethodPatch, "/v1/topics/perkey", `{"key_concurrency": 10001}`), http.StatusBadRequest, "invalid_argument", "key_concurrency")
	requireError(t, b.do(t, http.MethodPut, "/v1/topics/perkey", `{"key_concurrency": -1}`), http.StatusBadRequest, "invalid_argument", "key_concurrency")
	res = b.do(t, http.MethodGet, "/v1/topics/perkey", nil)
	requireStatus(t, res, http.StatusOK)
	require.EqualValues(t, 1, res.object(t)["key_concurrency"], "unchanged by the refused ones")
	res = b.do(t, http.MethodPatch, "/v1/topics/perkey", `{"key_concurrency": null}`)
	requireStatus(t, res, http.StatusOK)
	require.NotContains(t, res.object(t), "key_concurrency", "dropped: shown only when set")
}
