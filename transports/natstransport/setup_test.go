package natstransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/transports/natstransport"
)

// dialer opens a connection to a test's NATS server with opts, closed at
// cleanup.
type dialer func(t *testing.T, opts ...nats.Option) *nats.Conn

// server says where a test's NATS server is.
type server struct {
	name string
	dial dialer
}

// servers returns the embedded server and a separate nats-server process,
// both with JetStream, for tests that run against each.
func servers(t *testing.T) []server {
	t.Helper()
	return []server{
		{"embedded", embeddedDialer(t)},
		{"external", urlDialer(sharedExternal(t, true).URL())},
	}
}

// embeddedDialer connects to the package's embedded server as delayq's own
// user: the tests use subject prefixes of their own, which the client user
// may not use.
func embeddedDialer(t *testing.T) dialer {
	t.Helper()
	e := sharedEmbedded(t)
	return func(t *testing.T, opts ...nats.Option) *nats.Conn {
		t.Helper()
		nc, err := e.Connect(append([]nats.Option{nats.ReconnectWait(20 * time.Millisecond)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		return nc
	}
}

// urlDialer connects to url.
func urlDialer(url string) dialer {
	return func(t *testing.T, opts ...nats.Option) *nats.Conn { return connect(t, url, opts...) }
}

var prefixSeq atomic.Int64

// clientInbox gives the client's connection the inboxes of a client, apart
// from those of the transports' connection (the embedded server's own
// user has inboxes of its own).
var clientInbox = nats.CustomInboxPrefix("_INBOX")

// testBundle is what a test drives: a real engine over memstore that
// delivers nats topics with this package's Deliverer, the intake on its own
// subject prefix, and a client connection.
type testBundle struct {
	store     *storetest.SignalStore
	engine    *core.Engine
	intake    *natstransport.Intake
	deliverer *natstransport.Deliverer
	// nc is the client's connection; server's the transport's.
	nc, server *nats.Conn
	prefix     string
}

type setupConfig struct {
	limits core.Limits
	// start runs the engine's dispatchers.
	start bool
	// workers is IntakeConfig.Workers.
	workers int
	// wrap, when set, wraps the NATS deliverer the engine uses.
	wrap func(core.Deliverer) core.Deliverer
}

// setup starts a bundle on the server dial connects to.
func setup(t *testing.T, dial dialer, mods ...func(*setupConfig)) *testBundle {
	t.Helper()
	var cfg setupConfig
	for _, m := range mods {
		m(&cfg)
	}
	log := slog.New(slog.DiscardHandler)
	mem := memstore.New(memstore.Config{})
	store := &storetest.SignalStore{Store: mem, Outcomes: make(chan storetest.Outcome, 100_000),
		Kinds: []storetest.OutcomeKind{storetest.OutcomePut, storetest.OutcomeAck, storetest.OutcomeRetry}}
	serverConn := dial(t)
	d, err := natstransport.NewDeliverer(natstransport.DelivererConfig{Conn: serverConn, Logger: log})
	require.NoError(t, err)
	var nd core.Deliverer = d
	if cfg.wrap != nil {
		nd = cfg.wrap(d)
	}
	engine, err := core.NewEngine(core.EngineConfig{
		Store:        store,
		Logger:       log,
		Limits:       cfg.limits,
		Deliverers:   map[string]core.Deliverer{core.DeliveryNATS: nd, core.DeliveryWebhook: webhookStub{}},
		TopicRefresh: time.Hour,
	})
	require.NoError(t, err)
	prefix := fmt.Sprintf("t%d", prefixSeq.Add(1))
	in, err := natstransport.NewIntake(natstransport.IntakeConfig{Conn: serverConn, Engine: engine, Logger: log, Prefix: prefix, QueueGroup: prefix, Workers: cfg.workers})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, in.Start(ctx))
	if cfg.start {
		require.NoError(t, engine.Start(ctx))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, in.Stop(ctx))
		require.NoError(t, engine.Stop(ctx))
		require.NoError(t, mem.Close())
	})
	return &testBundle{store: store, engine: engine, intake: in, deliverer: d, nc: dial(t, clientInbox), server: serverConn, prefix: prefix}
}

// connect connects to url with opts, closed at cleanup.
func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// reply is an intake answer.
type reply struct {
	ID    string    `json:"id"`
	Topic string    `json:"topic"`
	RunAt time.Time `json:"run_at"`
	State string    `json:"state"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
	raw []byte
}

// request sends a message with headers (name, value pairs) to subject and
// returns the decoded answer.
func (b *testBundle) request(t *testing.T, subject string, body string, headers ...string) reply {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	for i := 0; i+1 < len(headers); i += 2 {
		m.Header.Add(headers[i], headers[i+1])
	}
	res, err := b.nc.RequestMsg(m, 10*time.Second)
	require.NoError(t, err)
	var r reply
	require.NoError(t, json.Unmarshal(res.Data, &r), "%s", res.Data)
	r.raw = res.Data
	return r
}

// push requests a push on topic and requires success.
func (b *testBundle) push(t *testing.T, topic, body string, headers ...string) reply {
	t.Helper()
	r := b.request(t, b.intake.PushSubject(topic), body, headers...)
	require.Nil(t, r.Error, "%s", r.raw)
	require.NotEmpty(t, r.ID, "%s", r.raw)
	return r
}

// requireError requires an error answer with code and field.
func requireError(t *testing.T, r reply, code, field string) {
	t.Helper()
	require.NotNil(t, r.Error, "%s", r.raw)
	require.Equal(t, code, r.Error.Code, "%s", r.raw)
	require.Equal(t, field, r.Error.Field, "%s", r.raw)
	require.NotEmpty(t, r.Error.Message)
}

func (b *testBundle) job(t *testing.T, id string) *core.Job {
	t.Helper()
	j, err := b.engine.Get(context.Background(), id)
	require.NoError(t, err)
	return j
}

// webhookStub lets webhook topics, and jobs' own URLs on them, be
// configured; it delivers nothing anywhere.
type webhookStub struct{}

func (webhookStub) ValidateTopic(*core.Topic) error                    { return nil }
func (webhookStub) Deliver(context.Context, *core.DeliverParams) error { return nil }
func (webhookStub) ValidateJobURL(string) error                        { return nil }
