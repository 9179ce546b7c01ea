package wstransport_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/httptransport"
	"github.com/delayq/delayq/transports/wstransport"
)

// TestSubscribeAuth checks the subscribe route behind API tokens: 401
// without a token, 403 without the consume scope or outside the token's
// topics, an open subscription otherwise.
func TestSubscribeAuth(t *testing.T) {
	t.Parallel()
	mem := memstore.New(memstore.Config{})
	log := slog.New(slog.DiscardHandler)
	engine, err := core.NewEngine(core.EngineConfig{Store: mem, Logger: log})
	require.NoError(t, err)
	ws, err := wstransport.New(wstransport.Config{Engine: engine, Logger: log})
	require.NoError(t, err)
	tokens, err := auth.NewTokens([]auth.Token{
		{Name: "producer", Token: "push-secret-0123456789", Scopes: []auth.Scope{auth.ScopePush}},
		{Name: "worker", Token: "consume-secret-0123456789", Scopes: []auth.Scope{auth.ScopeConsume}, Topics: []string{"orders.*"}},
	})
	require.NoError(t, err)
	api := httptransport.New(httptransport.Config{Engine: engine, Logger: log, Tokens: tokens})
	ws.Register(api)
	srv := httptest.NewServer(api)
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, ws.Stop(ctx))
		srv.Close()
		hc.CloseIdleConnections()
		require.NoError(t, mem.Close())
	})

	dial := func(topic, secret string) (*websocket.Conn, int) {
		t.Helper()
		h := http.Header{}
		if secret != "" {
			h.Set("Authorization", "Bearer "+secret)
		}
		conn, res, err := websocket.Dial(t.Context(), "ws"+srv.URL[len("http"):]+"/v1/topics/"+topic+"/subscribe", &websocket.DialOptions{HTTPClient: hc, HTTPHeader: h})
		if err != nil {
			require.NotNil(t, res, "dial: %v", err)
			return nil, res.StatusCode
		}
		return conn, res.StatusCode
	}

	_, status := dial("orders.close", "")
	require.Equal(t, http.StatusUnauthorized, status)
	_, status = dial("orders.close", "push-secret-0123456789")
	require.Equal(t, http.StatusForbidden, status)
	_, status = dial("mail", "consume-secret-0123456789")
	require.Equal(t, http.StatusForbidden, status)

	_, err = engine.Push(t.Context(), &core.PushParams{Topic: "orders.close", Body: []byte(`1`)})
	require.NoError(t, err)
	conn, status := dial("orders.close", "consume-secret-0123456789")
	require.Equal(t, http.StatusSwitchingProtocols, status)
	defer conn.CloseNow()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, data, err := conn.Read(ctx)
	require.NoError(t, err)
	require.Contains(t, string(data), `"type":"job"`)
	require.NoError(t, conn.Close(websocket.StatusNormalClosure, ""))
}
