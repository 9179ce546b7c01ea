package httptransport

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/auth"
)

// TestOpenAPIScopes checks that the security requirements of openapi.json
// name the scopes the server asks of each route (routeAccessTable): none
// for open routes, one requirement per scope otherwise, and for /metrics
// either, by Config.ProtectMetrics.
func TestOpenAPIScopes(t *testing.T) {
	t.Parallel()
	type requirements []map[string][]string
	var doc struct {
		Security requirements                          `json:"security"`
		Paths    map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openAPISpec, &doc))
	scopes := func(reqs requirements) []string {
		var s []string
		for _, r := range reqs {
			s = append(s, r["bearer"]...)
		}
		slices.Sort(s)
		return s
	}
	n := 0
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			var op struct {
				Security *requirements `json:"security"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			sec := doc.Security
			if op.Security != nil {
				sec = *op.Security
			}
			pattern := strings.ToUpper(method) + " " + path
			if path == "/" {
				pattern += "{$}" // the root alone, as the server mounts it
			}
			open := (&Server{}).Op(pattern)
			protected := (&Server{protectMetrics: true}).Op(pattern)
			var want []string
			for _, sc := range protected.Scopes() {
				want = append(want, string(sc))
			}
			slices.Sort(want)
			switch {
			case open.Open() && protected.Open():
				require.Empty(t, sec, "%s is open: its security must be []", pattern)
			case open.Open():
				require.Equal(t, requirements{{}, {"bearer": {string(auth.ScopeAdmin)}}}, sec, "%s is open unless ProtectMetrics", pattern)
			default:
				require.Equal(t, want, scopes(sec), "%s: security of openapi.json", pattern)
				for _, r := range sec {
					require.Len(t, r["bearer"], 1, "%s: one requirement per scope, any of which will do", pattern)
				}
			}
			n++
		}
	}
	require.Greater(t, n, 25)
}
