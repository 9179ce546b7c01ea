package httptransport_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFair: a topic's fair, set by PUT and turned off by PATCH, makes pull
// claims take one job of each key in turn, then the plain claim order
// again; a value not a boolean is refused naming the field and changes
// nothing.
func TestFair(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPut, "/v1/topics/fair", `{"fair": true}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, true, res.object(t)["fair"])
	keyOf := map[string]string{} // by job id
	for i, key := range []string{"a", "a", "a", "a", "b", "b"} {
		keyOf[b.push(t, fmt.Sprintf(`{"topic": "fair", "key": %q, "body": %d, "delay": "0s"}`, key, i))] = key
	}
	claimedKeys := func() []string {
		var got []string
		for _, j := range b.claim(t, "fair", 2) {
			got = append(got, keyOf[j["id"].(string)])
		}
		return got
	}
	require.Equal(t, []string{"a", "b"}, claimedKeys(), "one of each key")

	requireError(t, b.do(t, http.MethodPatch, "/v1/topics/fair", `{"fair": "yes"}`), http.StatusBadRequest, "invalid_argument", "fair")
	res = b.do(t, http.MethodGet, "/v1/topics/fair", nil)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, true, res.object(t)["fair"], "unchanged by the refused one")

	res = b.do(t, http.MethodPatch, "/v1/topics/fair", `{"fair": false}`)
	requireStatus(t, res, http.StatusOK)
	require.NotContains(t, res.object(t), "fair", "off: shown only when set")
	require.Equal(t, []string{"a", "a"}, claimedKeys(), "the plain claim order")
}
