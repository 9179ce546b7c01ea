package httptransport_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWhoami checks what GET /v1/whoami tells each token, and that it
// answers every scope without tokens.
func TestWhoami(t *testing.T) {
	t.Parallel()
	open := setup(t)
	res := open.do(t, http.MethodGet, "/v1/whoami", nil)
	requireStatus(t, res, http.StatusOK)
	require.JSONEq(t, `{"auth": false, "scopes": ["push", "consume", "admin"]}`, string(res.body))

	b, _ := setupAuth(t)
	for _, tc := range []struct{ secret, want string }{
		{pushSecret, `{"auth": true, "scopes": ["push"]}`},
		{consumeSecret, `{"auth": true, "scopes": ["consume"]}`},
		{adminSecret, `{"auth": true, "scopes": ["push", "consume", "admin"]}`},
		{ordersSecret, `{"auth": true, "scopes": ["push", "consume"], "topics": ["orders.>"]}`},
	} {
		res := b.do(t, http.MethodGet, "/v1/whoami", nil, bearer(tc.secret)...)
		requireStatus(t, res, http.StatusOK)
		require.JSONEq(t, tc.want, string(res.body))
	}
	// A token is still needed, and must be valid.
	requireError(t, b.do(t, http.MethodGet, "/v1/whoami", nil), http.StatusUnauthorized, "unauthenticated", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/whoami", nil, bearer("not-a-token-0123456789")...), http.StatusUnauthorized, "unauthenticated", "")
}
