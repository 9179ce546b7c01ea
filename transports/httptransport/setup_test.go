package httptransport_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/keyring"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/httptransport"
)

// testBundle is what a test drives: a real engine over memstore (behind a
// store that can be made to fail) with a fake clock, served over HTTP.
type testBundle struct {
	clock  *coretest.FakeClock
	store  *memstore.Store
	down   *downStore
	engine *core.Engine
	server *httptransport.Server
	srv    *httptest.Server
}

type setupConfig struct {
	limits          core.Limits
	maxRequestBytes int64
	// wrap, when set, wraps the store the engine uses.
	wrap func(core.Store) core.Store
	// tokens, when set, are the server's API tokens.
	tokens *auth.Tokens
	// protectMetrics is Config.ProtectMetrics.
	protectMetrics bool
	// logger, when set, is the server's logger.
	logger *slog.Logger
	// nats registers a deliverer that accepts every NATS topic.
	nats bool
	// natsSubjects is Config.NATSDeliverySubjects.
	natsSubjects []string
	// bodyReadTimeout is Config.BodyReadTimeout.
	bodyReadTimeout time.Duration
	// writeTimeout is Config.WriteTimeout.
	writeTimeout time.Duration
	// allowedHosts is Config.AllowedHosts.
	allowedHosts []string
	// trustedOrigins is Config.TrustedOrigins.
	trustedOrigins []string
	// backupDir and backup are Config.BackupDir and Config.Backup.
	backupDir string
	backup    func(ctx context.Context, dir string) error
	// standIns is set by tests that mount stand-in handlers on routes
	// of other packages (Server.Handle), whose answers are not those
	// openapi.json describes: their requests and answers are not checked.
	standIns bool
	// stats is Config.Stats.
	stats *httptransport.Stats
	// ring, when set, puts the store behind encryption at rest with it,
	// and gives the service the encryption.
	ring *keyring.Ring
}

func setup(t *testing.T, opts ...func(*setupConfig)) *testBundle {
	t.Helper()
	var cfg setupConfig
	for _, o := range opts {
		o(&cfg)
	}
	clock := coretest.NewFakeClock()
	store := memstore.New(memstore.Config{Clock: clock})
	var (
		sealed *keyring.Store
		under  core.Store = store
	)
	if cfg.ring != nil {
		sealed = keyring.New(store, keyring.Config{Ring: cfg.ring, Logger: slog.New(slog.DiscardHandler)})
		under = sealed
	}
	down := &downStore{Store: under}
	var engineStore core.Store = down
	if cfg.wrap != nil {
		engineStore = cfg.wrap(down)
	}
	deliverers := map[string]core.Deliverer{core.DeliveryWebhook: fakeDeliverer{}}
	if cfg.nats {
		deliverers[core.DeliveryNATS] = fakeNATSDeliverer{}
	}
	engine, err := core.NewEngine(core.EngineConfig{
		Store:      engineStore,
		Clock:      clock,
		Logger:     slog.New(slog.DiscardHandler),
		Limits:     cfg.limits,
		Deliverers: deliverers,
	})
	require.NoError(t, err)
	var svc *service.Service
	if sealed != nil {
		svc = service.New(service.Config{Engine: engine, Logger: slog.New(slog.DiscardHandler), NATSDeliverySubjects: cfg.natsSubjects, Encryption: sealed})
	}
	server := httptransport.New(httptransport.Config{
		Engine:          engine,
		Service:         svc,
		Logger:          cmp.Or(cfg.logger, slog.New(slog.DiscardHandler)),
		MaxRequestBytes: cfg.maxRequestBytes,
		Tokens:          cfg.tokens,
		ProtectMetrics:  cfg.protectMetrics,

		NATSDeliverySubjects: cfg.natsSubjects,
		BodyReadTimeout:      cfg.bodyReadTimeout,
		WriteTimeout:         cfg.writeTimeout,
		AllowedHosts:         cfg.allowedHosts,
		TrustedOrigins:       cfg.trustedOrigins,
		BackupDir:            cfg.backupDir,
		Backup:               cfg.backup,
		Stats:                cfg.stats,
	})
	// Every request and answer of a test is checked against openapi.json,
	// but those of stand-ins for the routes of other packages.
	var handler http.Handler = server
	if !cfg.standIns {
		handler = validatingHandler(t, server)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, store.Close())
	})
	return &testBundle{clock: clock, store: store, down: down, engine: engine, server: server, srv: srv}
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// send makes a request without failing the test, so it may run in a
// goroutine. body is sent as is when it is a string or []byte, else as JSON.
// A body goes with the Content-Type a client of the route sends (NDJSON for
// import, JSON otherwise) unless header sets one; an empty header value
// leaves a header out.
func (b *testBundle) send(ctx context.Context, method, path string, body any, header ...string) (*response, error) {
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.srv.URL+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
		if path == "/v1/import" {
			req.Header.Set("Content-Type", "application/x-ndjson")
		}
	}
	for i := 0; i+1 < len(header); i += 2 {
		switch {
		case header[i] == "Host":
			req.Host = header[i+1] // the client sends req.Host, not the header
			continue
		case header[i+1] == "":
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := b.srv.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &response{status: res.StatusCode, header: res.Header, body: data}, nil
}

// do makes a request and fails the test when it cannot be made.
func (b *testBundle) do(t *testing.T, method, path string, body any, header ...string) *response {
	t.Helper()
	res, err := b.send(t.Context(), method, path, body, header...)
	require.NoError(t, err)
	return res
}

// object decodes the answer as a JSON object.
func (r *response) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

// requireStatus checks the status, showing the body when it differs.
func requireStatus(t *testing.T, res *response, status int) {
	t.Helper()
	require.Equal(t, status, res.status, "body: %s", res.body)
}

// requireError checks a non-2xx answer: its status, the JSON error body
// with its code and field, and Retry-After on 503.
func requireError(t *testing.T, res *response, status int, code, field string) map[string]any {
	t.Helper()
	requireStatus(t, res, status)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	m := res.object(t)
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "no error object: %s", res.body)
	require.Equal(t, code, e["code"], "body: %s", res.body)
	require.Equal(t, field, e["field"], "body: %s", res.body)
	require.NotEmpty(t, e["message"])
	if status == http.StatusServiceUnavailable {
		require.NotEmpty(t, res.header.Get("Retry-After"))
	}
	return m
}

// push creates a job and returns its id.
func (b *testBundle) push(t *testing.T, body string) string {
	t.Helper()
	res := b.do(t, http.MethodPost, "/v1/jobs", body)
	requireStatus(t, res, http.StatusCreated)
	id, _ := res.object(t)["id"].(string)
	require.NotEmpty(t, id)
	return id
}

// getJob answers GET /v1/jobs/{id}, which must exist.
func (b *testBundle) getJob(t *testing.T, id string) map[string]any {
	t.Helper()
	res := b.do(t, http.MethodGet, "/v1/jobs/"+id, nil)
	requireStatus(t, res, http.StatusOK)
	return res.object(t)
}

// claim claims without waiting and returns the deliveries.
func (b *testBundle) claim(t *testing.T, topic string, max int) []map[string]any {
	t.Helper()
	res := b.do(t, http.MethodPost, "/v1/topics/"+topic+"/claim", map[string]any{"max": max})
	requireStatus(t, res, http.StatusOK)
	var v struct {
		Jobs []map[string]any `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(res.body, &v))
	require.NotNil(t, v.Jobs)
	return v.Jobs
}

// rfc3339ms formats a time as the API answers it.
func rfc3339ms(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// downStore wraps a store and fails the calls the tests use while its mode
// says so: modeUnavailable with core.ErrUnavailable, modeBroken with an
// error the table does not know.
type downStore struct {
	core.Store
	mode atomic.Int32
}

const (
	modeUp int32 = iota
	modeUnavailable
	modeBroken
)

// errBroken carries a detail that must never reach a client.
var errBroken = errors.New("disk on fire at 10.0.0.7")

func (d *downStore) fail() error {
	switch d.mode.Load() {
	case modeUnavailable:
		return core.ErrUnavailable
	case modeBroken:
		return errBroken
	}
	return nil
}

func (d *downStore) PutJobs(ctx context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	if err := d.fail(); err != nil {
		return nil, err
	}
	return d.Store.PutJobs(ctx, p)
}

func (d *downStore) GetJob(ctx context.Context, id string) (*core.Job, error) {
	if err := d.fail(); err != nil {
		return nil, err
	}
	return d.Store.GetJob(ctx, id)
}

func (d *downStore) AckJobs(ctx context.Context, p *core.AckJobsParams) ([]core.AckResult, error) {
	if err := d.fail(); err != nil {
		return nil, err
	}
	return d.Store.AckJobs(ctx, p)
}

func (d *downStore) ListTopicStates(ctx context.Context) ([]core.TopicState, error) {
	if err := d.fail(); err != nil {
		return nil, err
	}
	return d.Store.ListTopicStates(ctx)
}

func (d *downStore) Ping(ctx context.Context) error {
	if err := d.fail(); err != nil {
		return err
	}
	return d.Store.Ping(ctx)
}

// fakeDeliverer lets webhook topics be configured; the engine is never
// started, so nothing is delivered.
type fakeDeliverer struct{}

func (fakeDeliverer) ValidateTopic(t *core.Topic) error {
	if t.Delivery.URL == "" {
		return core.Invalid("delivery.url", "delivery.url is required")
	}
	return nil
}

func (fakeDeliverer) Deliver(context.Context, *core.DeliverParams) error { return nil }

// ValidateJobURL refuses a job's url with "denied" in it, as a deny list
// would.
func (fakeDeliverer) ValidateJobURL(raw string) error {
	if strings.Contains(raw, "denied") {
		return core.Invalid("url", "url: webhook destination denied")
	}
	return nil
}

// fakeNATSDeliverer lets NATS topics be configured with any subject; the
// engine is never started, so nothing is delivered.
type fakeNATSDeliverer struct{}

func (fakeNATSDeliverer) ValidateTopic(*core.Topic) error { return nil }

func (fakeNATSDeliverer) Deliver(context.Context, *core.DeliverParams) error { return nil }
