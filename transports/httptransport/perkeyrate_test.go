package httptransport_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPerKeyRate: a topic's rate.per_key, set by PUT and turned off by
// PATCH, gives pull claims a token per key (two keys at one a minute go out
// at once, then none), then the topic's one bucket again; a value not a
// boolean is refused naming the field and changes nothing.
func TestPerKeyRate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPut, "/v1/topics/pkr", `{"rate": {"limit": 1, "period": "1m", "per_key": true}}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, map[string]any{"limit": 1.0, "period": "1m0s", "burst": 1.0, "per_key": true}, res.object(t)["rate"])
	for i, key := range []string{"a", "b", "a", "b"} {
		b.push(t, fmt.Sprintf(`{"topic": "pkr", "key": %q, "body": %d, "delay": "0s"}`, key, i))
	}
	require.Len(t, b.claim(t, "pkr", 4), 2, "a token of each key")
	res = b.do(t, http.MethodPost, "/v1/topics/pkr/claim", `{"max": 4, "wait": "0s"}`)
	requireStatus(t, res, http.StatusOK)
	require.Empty(t, res.object(t)["jobs"], "each key at its rate")

	requireError(t, b.do(t, http.MethodPatch, "/v1/topics/pkr", `{"rate": {"per_key": "yes"}}`), http.StatusBadRequest, "invalid_argument", "rate.per_key")
	res = b.do(t, http.MethodGet, "/v1/topics/pkr", nil)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, true, res.object(t)["rate"].(map[string]any)["per_key"], "unchanged by the refused one")

	res = b.do(t, http.MethodPatch, "/v1/topics/pkr", `{"rate": {"per_key": false, "limit": 5}}`)
	requireStatus(t, res, http.StatusOK)
	require.NotContains(t, res.object(t)["rate"], "per_key", "off: shown only when set")
	require.Len(t, b.claim(t, "pkr", 4), 2, "per_key off: the topic's one bucket of 5 gives the two left")
}
