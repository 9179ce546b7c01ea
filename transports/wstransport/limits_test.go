package wstransport_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/transports/wstransport"
)

// upgradeHeaders are the headers of a WebSocket upgrade request.
var upgradeHeaders = []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}

// TestMaxSubscribers checks that an upgrade over Config.MaxSubscribers is
// answered 503 unavailable with Retry-After and the JSON error body.
func TestMaxSubscribers(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *wstransport.Config) { c.MaxSubscribers = 1 })
	first := b.subscribe(t, "q", 1)
	b.push(t, "q", `1`)
	first.nextJob(10 * time.Second) // the first is served

	a := b.get(t, http.MethodGet, "/v1/topics/q/subscribe", upgradeHeaders...)
	requireErrorBody(t, a, http.StatusServiceUnavailable, "unavailable", "")
	require.Equal(t, "1", a.header.Get("Retry-After"))
	require.Contains(t, a.body["error"].(map[string]any)["message"], "at most 1 WebSocket subscribers")
	require.Equal(t, 1, b.ws.Subscribers())
}

// TestSubscribeOrigin checks that a browser's subscribe from a foreign
// origin is refused 403 with the JSON error body, and that the server's own
// origin, a trusted origin and clients without Origin are served.
func TestSubscribeOrigin(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *wstransport.Config) { c.OriginPatterns = []string{"https://app.example.com"} })
	for _, origin := range []string{"https://evil.example", "http://app.example.com", "null"} {
		a := b.get(t, http.MethodGet, "/v1/topics/q/subscribe", append([]string{"Origin", origin}, upgradeHeaders...)...)
		requireErrorBody(t, a, http.StatusForbidden, "permission_denied", "")
		require.Contains(t, a.body["error"].(map[string]any)["message"], "origin")
	}
	require.Zero(t, b.ws.Subscribers())

	for _, origin := range []string{"", "https://app.example.com", b.srv.URL} {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		conn, res, err := websocket.Dial(t.Context(), b.url("q", ""), &websocket.DialOptions{HTTPClient: b.http, HTTPHeader: h})
		require.NoError(t, err, "origin %q", origin)
		require.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
		require.NoError(t, conn.Close(websocket.StatusNormalClosure, ""))
	}
}
