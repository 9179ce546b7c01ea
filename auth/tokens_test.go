package auth_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/auth"
)

func TestMatchTopic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, topic string
		want           bool
	}{
		{"orders", "orders", true},
		{"orders", "orders.close", false},
		{"orders.*", "orders.close", true},
		{"orders.*", "orders", false},
		{"orders.*", "orders.eu.close", false},
		{"orders.>", "orders.close", true},
		{"orders.>", "orders.eu.close", true},
		{"orders.>", "orders", false},
		{"*.close", "orders.close", true},
		{"*.close", "orders.open", false},
		{">", "anything.at.all", true},
		{"orders.close", "orders.closed", false},
		{"orders.close.x", "orders.close", false},
	} {
		require.Equal(t, tc.want, auth.MatchTopic(tc.pattern, tc.topic), "%s ~ %s", tc.pattern, tc.topic)
	}
}

func TestValidatePattern(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"orders", "orders.*", "orders.>", "*", ">", "a.*.b"} {
		require.NoError(t, auth.ValidatePattern(p), p)
	}
	for _, p := range []string{"", "orders.", ".x", "orders.>.x", "ord*", "a b"} {
		require.Error(t, auth.ValidatePattern(p), p)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("consumer-secret-0123456789"))
	list, err := auth.ParseTokens([]byte(`
- name: producer
  token: producer-secret-0123456789
  scopes: [push]
  topics: ["orders.*"]
- name: worker
  sha256: ` + hex.EncodeToString(sum[:]) + `
  scopes: [consume]
- name: ops
  token: ops-secret-0123456789abcdef
  scopes: [admin]
`))
	require.NoError(t, err)
	tokens, err := auth.NewTokens(list)
	require.NoError(t, err)
	require.Equal(t, 3, tokens.Len())

	id, ok := tokens.Authenticate("producer-secret-0123456789")
	require.True(t, ok)
	require.Equal(t, "producer", id.Name)
	require.True(t, id.HasScope(auth.ScopePush))
	require.False(t, id.HasScope(auth.ScopeConsume))
	require.True(t, id.AllowsTopic("orders.close"))
	require.False(t, id.AllowsTopic("mail"))

	id, ok = tokens.Authenticate("consumer-secret-0123456789")
	require.True(t, ok)
	require.Equal(t, "worker", id.Name)
	require.True(t, id.HasScope(auth.ScopeConsume))
	require.False(t, id.HasScope(auth.ScopeAdmin))
	require.True(t, id.AllowsTopic("mail"))

	id, ok = tokens.Authenticate("ops-secret-0123456789abcdef")
	require.True(t, ok)
	require.True(t, id.HasScope(auth.ScopePush) && id.HasScope(auth.ScopeConsume) && id.HasScope(auth.ScopeAdmin))

	for _, bad := range []string{"", "producer-secret-012345678", "nope"} {
		_, ok = tokens.Authenticate(bad)
		require.False(t, ok, bad)
	}
	var none *auth.Tokens
	require.Equal(t, 0, none.Len())
	_, ok = none.Authenticate("x")
	require.False(t, ok)
}

func TestTokensJSONFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(path, []byte(`[{"name": "a", "token": "aaaaaaaaaaaaaaaa", "scopes": ["push", "consume"]}]`), 0o600))
	list, err := auth.LoadFile(path)
	require.NoError(t, err)
	require.Len(t, list, 1)
	_, err = auth.NewTokens(list)
	require.NoError(t, err)
}

func TestNewTokensRejects(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef-secret"
	for name, tc := range map[string]struct {
		list []auth.Token
		want string
	}{
		"no name":       {[]auth.Token{{Token: secret, Scopes: []auth.Scope{"push"}}}, "token 1: name is required"},
		"short":         {[]auth.Token{{Name: "a", Token: "short", Scopes: []auth.Scope{"push"}}}, "at least 16"},
		"both":          {[]auth.Token{{Name: "a", Token: secret, SHA256: "00", Scopes: []auth.Scope{"push"}}}, "not both"},
		"bad sha":       {[]auth.Token{{Name: "a", SHA256: "zz", Scopes: []auth.Scope{"push"}}}, "64 hex digits"},
		"no secret":     {[]auth.Token{{Name: "a", Scopes: []auth.Scope{"push"}}}, "token or sha256 is required"},
		"no scopes":     {[]auth.Token{{Name: "a", Token: secret}}, "scopes are required"},
		"bad scope":     {[]auth.Token{{Name: "a", Token: secret, Scopes: []auth.Scope{"root"}}}, `unknown scope "root"`},
		"bad pattern":   {[]auth.Token{{Name: "a", Token: secret, Scopes: []auth.Scope{"push"}, Topics: []string{"a.>.b"}}}, "last token"},
		"dup name":      {[]auth.Token{{Name: "a", Token: secret, Scopes: []auth.Scope{"push"}}, {Name: "a", Token: secret + "x", Scopes: []auth.Scope{"push"}}}, "used twice"},
		"negative rate": {[]auth.Token{{Name: "a", Token: secret, Scopes: []auth.Scope{"push"}, IntakeRate: -1}}, "intake_rate must be"},
		"burst alone":   {[]auth.Token{{Name: "a", Token: secret, Scopes: []auth.Scope{"push"}, IntakeBurst: 5}}, "intake_burst needs intake_rate"},
		"neg burst":     {[]auth.Token{{Name: "a", Token: secret, Scopes: []auth.Scope{"push"}, IntakeRate: 1, IntakeBurst: -1}}, "intake_burst must be"},
		"dup secret":    {[]auth.Token{{Name: "a", Token: secret, Scopes: []auth.Scope{"push"}}, {Name: "b", Token: secret, Scopes: []auth.Scope{"push"}}}, "same secret"},
	} {
		_, err := auth.NewTokens(tc.list)
		require.ErrorContains(t, err, tc.want, name)
		require.NotContains(t, err.Error(), secret, name)
	}
	_, err := auth.ParseTokens([]byte(`[{"name": "a", "tokn": "x"}]`))
	require.ErrorContains(t, err, "tokn")
}

// TestIntakeQuota checks a token's quota as a tokens file gives it: all or
// nothing, shared by every authentication of the token, not by others.
func TestIntakeQuota(t *testing.T) {
	t.Parallel()
	list, err := auth.ParseTokens([]byte(`
- {name: slow, token: slow-secret-0123456789, scopes: [push], intake_rate: 0.01, intake_burst: 3}
- {name: fast, token: fast-secret-0123456789, scopes: [push], intake_rate: 2.5}
- {name: free, token: free-secret-0123456789, scopes: [push]}
`))
	require.NoError(t, err)
	tokens, err := auth.NewTokens(list)
	require.NoError(t, err)
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tokens.NowFunc = func() time.Time { return now }
	slow, ok := tokens.Authenticate("slow-secret-0123456789")
	require.True(t, ok)
	burst, ok := slow.IntakeBurst()
	require.True(t, ok)
	require.Equal(t, 3, burst)
	_, ok = slow.AllowIntake(2)
	require.True(t, ok)
	// Two more than the quota holds: nothing is taken, and the wait is
	// 100 seconds (one job at 0.01/s).
	wait, ok := slow.AllowIntake(2)
	require.False(t, ok)
	require.Equal(t, 100*time.Second, wait)
	again, _ := tokens.Authenticate("slow-secret-0123456789")
	_, ok = again.AllowIntake(1)
	require.True(t, ok, "the refused request took from the quota")
	_, ok = again.AllowIntake(1)
	require.False(t, ok, "the quota is not shared by the token's requests")
	_, ok = slow.AllowIntake(4)
	require.False(t, ok)
	// The quota refills at its rate on the set's clock.
	now = now.Add(99 * time.Second)
	_, ok = slow.AllowIntake(1)
	require.False(t, ok, "refilled early")
	now = now.Add(time.Second)
	_, ok = slow.AllowIntake(1)
	require.True(t, ok, "not refilled after 100s")

	fast, _ := tokens.Authenticate("fast-secret-0123456789")
	burst, _ = fast.IntakeBurst()
	require.Equal(t, 3, burst, "the default burst is a second's worth, rounded up")
	free, _ := tokens.Authenticate("free-secret-0123456789")
	_, limited := free.IntakeBurst()
	require.False(t, limited)
	_, ok = free.AllowIntake(1_000_000)
	require.True(t, ok)
}
