package connecttransport_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/gen/delayq/v1/delayqv1connect"
	"github.com/delayq/delayq/transports/connecttransport"
	"github.com/delayq/delayq/transports/httptransport"
)

// testBundle is what a test drives: a real engine over memstore, the HTTP
// API with the gRPC transport mounted on it, served on a loopback listener
// with HTTP/1.1 and HTTP/2 without TLS (h2c) as delayq serve does, and a
// grpc-go connection to it.
type testBundle struct {
	engine *core.Engine
	grpc   *connecttransport.Server
	srv    *httptest.Server
	conn   *grpc.ClientConn
}

// setupConfig changes the bundle's configuration before it starts.
type setupConfig struct {
	grpc   connecttransport.Config
	http   httptransport.Config
	tokens []auth.Token
	limits core.Limits
}

// setup starts a bundle; mods change its configuration.
func setup(t *testing.T, mods ...func(*setupConfig)) *testBundle {
	t.Helper()
	mem := memstore.New(memstore.Config{})
	log := slog.New(slog.DiscardHandler)
	var sc setupConfig
	for _, m := range mods {
		m(&sc)
	}
	engine, err := core.NewEngine(core.EngineConfig{Store: mem, Logger: log, Limits: sc.limits,
		Deliverers: map[string]core.Deliverer{core.DeliveryWebhook: webhookStub{}}})
	require.NoError(t, err)
	tokens, err := auth.NewTokens(sc.tokens)
	require.NoError(t, err)
	cfg := sc.grpc
	cfg.Engine, cfg.Logger, cfg.Tokens = engine, log, tokens
	gs, err := connecttransport.New(cfg)
	require.NoError(t, err)
	hc := sc.http
	hc.Engine, hc.Logger, hc.Tokens = engine, log, tokens
	api := httptransport.New(hc)
	gs.Register(api)
	srv := httptest.NewUnstartedServer(api)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	conn, err := grpc.NewClient("passthrough:///"+srv.Listener.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	b := &testBundle{engine: engine, grpc: gs, srv: srv, conn: conn}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, conn.Close())
		require.NoError(t, gs.Stop(ctx))
		srv.Close()
		require.NoError(t, mem.Close())
	})
	return b
}

// method is the full gRPC method name of a procedure of the service.
func method(name string) string { return "/" + delayqv1connect.DelayqServiceName + "/" + name }

// call invokes a unary method with grpc-go, with token as bearer token
// unless it is "".
func (b *testBundle) call(t *testing.T, token, name string, req, res proto.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return b.conn.Invoke(ctx, method(name), req, res)
}

// must invokes a unary method that must succeed.
func (b *testBundle) must(t *testing.T, name string, req, res proto.Message) {
	t.Helper()
	require.NoError(t, b.call(t, "", name, req, res))
}

// requireStatus checks that err is a gRPC status of code whose
// delayq.v1.Error detail has the HTTP API's errCode and field, and returns
// the detail.
func requireStatus(t *testing.T, err error, code codes.Code, errCode, field string) *delayqv1.Error {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, "not a status: %v", err)
	require.Equal(t, code, st.Code(), st.Message())
	var detail *delayqv1.Error
	for _, d := range st.Details() {
		if e, ok := d.(*delayqv1.Error); ok {
			detail = e
		}
	}
	require.NotNil(t, detail, "no delayq.v1.Error detail in %v", err)
	require.Equal(t, errCode, detail.Code)
	require.Equal(t, field, detail.Field)
	require.Equal(t, st.Message(), detail.Message)
	return detail
}

// push creates a due job with body on topic through the engine and
// returns its id.
func (b *testBundle) push(t *testing.T, topic, body string, mods ...func(*core.PushParams)) string {
	t.Helper()
	p := &core.PushParams{Topic: topic, Body: json.RawMessage(body)}
	for _, m := range mods {
		m(p)
	}
	j, err := b.engine.Push(context.Background(), p)
	require.NoError(t, err)
	return j.ID
}

// job returns a job, which must exist.
func (b *testBundle) job(t *testing.T, id string) *core.Job {
	t.Helper()
	j, err := b.engine.Get(context.Background(), id)
	require.NoError(t, err)
	return j
}

// connectClient returns a client of connect-go for the server with opts
// (connect.WithGRPC(), connect.WithGRPCWeb(); none: the Connect protocol),
// over HTTP/2 without TLS when h2c, else HTTP/1.1.
func (b *testBundle) connectClient(t *testing.T, h2c bool, opts ...connect.ClientOption) delayqv1connect.DelayqServiceClient {
	t.Helper()
	tr := &http.Transport{}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return delayqv1connect.NewDelayqServiceClient(&http.Client{Transport: tr}, b.srv.URL, opts...)
}

func withID(id string) func(*core.PushParams) { return func(p *core.PushParams) { p.ID = id } }

// webhookStub lets webhook topics be configured; it delivers nothing
// anywhere.
type webhookStub struct{}

func (webhookStub) ValidateTopic(*core.Topic) error                    { return nil }
func (webhookStub) Deliver(context.Context, *core.DeliverParams) error { return nil }
func (webhookStub) ValidateJobURL(string) error                        { return nil }
