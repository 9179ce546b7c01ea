package apicompat_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	policy "github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/connecttransport"
	"github.com/delayq/delayq/transports/httptransport"
	"github.com/delayq/delayq/transports/wstransport"
	"github.com/delayq/delayq/ui"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start is the fake clock's time: every time in a transcript derives from
// it.
var start = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// The scenario's tokens. Their secrets appear in the transcripts as they
// are: they are fixed, and a test's.
const (
	tokenAdmin   = "admin-secret-0000000000000001"
	tokenPush    = "push-secret-00000000000000001"  // push, topics orders.*
	tokenConsume = "consume-secret-0000000000001"   // consume, topics orders.*
	tokenQuota   = "quota-secret-00000000000000001" // push, 1 job a day, burst 2
	tokenOther   = "other-secret-00000000000000001" // admin of topics other.*
)

// Limits small enough that the scenario reaches them with small requests.
var limits = core.Limits{MaxBodyBytes: 256, MaxBatch: 4}

// maxRequestBytes bounds a batch request (httptransport.Config's
// MaxRequestBytes): small, so that a step over it sends little.
const maxRequestBytes = 64 << 10

// testBundle is the stack the gate drives: the real engine over memstore
// with a fake clock, the HTTP API with WebSocket subscribers and the gRPC
// API mounted on it as delayq serve mounts them, served on a loopback
// listener with HTTP/1.1 and h2c, an HTTP client and a grpc-go
// connection.
type testBundle struct {
	clock  *coretest.FakeClock
	engine *core.Engine
	srv    *httptest.Server
	client *http.Client
	conn   *grpc.ClientConn
	// api, svc and tokens are the HTTP server, the service both APIs share
	// and the tokens, for the access table test.
	api    *httptransport.Server
	svc    *policy.Service
	tokens *auth.Tokens
}

// setup starts a bundle and stops it at the end of the test, in serve's
// order. It departs from serve's wiring where the scenario needs it, in
// configuration only: small limits, so that 413 is reached with small
// requests; /metrics behind a token (--metrics-auth), so that its 401 and
// 403 are covered; a stand-in for the Prometheus exposition, whose series
// are no part of this API; no live statistics (GET /v1/stats answers no
// samples), which sample the real clock.
func setup(t *testing.T) *testBundle {
	t.Helper()
	clock := coretest.NewFakeClockAt(start)
	log := slog.New(slog.DiscardHandler)
	store := memstore.New(memstore.Config{Clock: clock})
	engine, err := core.NewEngine(core.EngineConfig{
		Store:      store,
		Clock:      clock,
		Logger:     log,
		Limits:     limits,
		Deliverers: map[string]core.Deliverer{core.DeliveryWebhook: acceptDeliverer{}},
	})
	require.NoError(t, err)
	require.NoError(t, engine.Start(t.Context()))

	tokens, err := auth.NewTokens([]auth.Token{
		{Name: "admin", Token: tokenAdmin, Scopes: []auth.Scope{auth.ScopeAdmin}},
		{Name: "pusher", Token: tokenPush, Scopes: []auth.Scope{auth.ScopePush}, Topics: []string{"orders.*"}},
		{Name: "consumer", Token: tokenConsume, Scopes: []auth.Scope{auth.ScopeConsume}, Topics: []string{"orders.*"}},
		{Name: "quota", Token: tokenQuota, Scopes: []auth.Scope{auth.ScopePush}, IntakeRate: 1.0 / 86400, IntakeBurst: 2},
		{Name: "other", Token: tokenOther, Scopes: []auth.Scope{auth.ScopeAdmin}, Topics: []string{"other.*"}},
	})
	require.NoError(t, err)
	tokens.NowFunc = clock.Now

	// One service under both APIs, as serve wires it.
	svc := policy.New(policy.Config{Engine: engine, Logger: log})
	api := httptransport.New(httptransport.Config{
		Engine:          engine,
		Service:         svc,
		Logger:          log,
		Tokens:          tokens,
		ProtectMetrics:  true,
		MaxRequestBytes: maxRequestBytes,
		BackupDir:       t.TempDir(),
	})
	// Stand-in for telemetry's exposition, which is no part of this API:
	// the route, its guard and its content type are.
	api.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = io.WriteString(w, "# TYPE up gauge\nup 1\n")
	}))
	api.Handle("GET "+ui.Prefix, ui.Handler(ui.Config{Auth: true}))
	api.Handle("GET "+strings.TrimSuffix(ui.Prefix, "/"), http.RedirectHandler(ui.Prefix, http.StatusMovedPermanently))
	api.Handle("GET /{$}", http.RedirectHandler(ui.Prefix, http.StatusFound))
	subscribers, err := wstransport.New(wstransport.Config{Engine: engine, Logger: log})
	require.NoError(t, err)
	grpcAPI, err := connecttransport.New(connecttransport.Config{Engine: engine, Service: svc, Logger: log, Tokens: tokens})
	require.NoError(t, err)
	subscribers.Register(api)
	grpcAPI.Register(api)

	srv := httptest.NewUnstartedServer(api)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetHTTP2(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	conn, err := grpc.NewClient("passthrough:///"+srv.Listener.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	client := srv.Client()
	// Redirects are answers to record, not to follow.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = conn.Close()
		require.NoError(t, grpcAPI.Stop(ctx))
		srv.Close()
		require.NoError(t, subscribers.Stop(ctx))
		require.NoError(t, engine.Stop(ctx))
		require.NoError(t, store.Close())
	})
	return &testBundle{clock: clock, engine: engine, srv: srv, client: client, conn: conn, api: api, svc: svc, tokens: tokens}
}

// acceptDeliverer is the webhook deliverer: topics of type webhook can be
// configured, and no delivery is made (the clock does not reach one).
type acceptDeliverer struct{}

func (acceptDeliverer) ValidateTopic(*core.Topic) error                    { return nil }
func (acceptDeliverer) Deliver(context.Context, *core.DeliverParams) error { return nil }
