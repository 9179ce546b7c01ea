package httptransport

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// MaxRequestBytesDefault bounds a batch request body unless
// Config.MaxRequestBytes says otherwise.
const MaxRequestBytesDefault = 32 << 20

// Config configures a Server.
type Config struct {
	// Engine serves every request. Required.
	Engine *core.Engine
	// Service applies the API's policy (access, quotas, batch rules) over
	// Engine; share one with the other transports.
	//
	// Defaults to a service.Service over Engine with Logger and
	// NATSDeliverySubjects.
	Service *service.Service
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxRequestBytes bounds a batch request body. A single job request is
	// bounded by the engine's Limits().MaxBodyBytes plus room for the
	// envelope.
	//
	// Defaults to MaxRequestBytesDefault (32 MiB).
	MaxRequestBytes int64
	// Tokens, when it holds any, are the API tokens every request but
	// /healthz, /readyz, /v1/openapi.json and /metrics must present as
	// `Authorization: Bearer <token>`, with the scope and topics its route
	// needs (see the package documentation). Nil or empty serves without
	// authentication.
	Tokens *auth.Tokens
	// ProtectMetrics makes GET /metrics need a token with the admin scope
	// when Tokens holds any.
	ProtectMetrics bool
	// NATSDeliverySubjects are NATS subject patterns (`*` one token, a
	// final `>` one or more) that a token restricted to some topics may name
	// as a topic's delivery.subject. Without a match such a token may name
	// only delayq.deliver.<topic> of a topic it may use, so that it cannot
	// publish on subjects that belong to others. Tokens without topic
	// patterns, and the open API, may name any subject the NATS deliverer
	// accepts. Nil allows no other subject. Only the default Service uses
	// it.
	NATSDeliverySubjects []string
	// BodyReadTimeout bounds the read of a request's body, from the start
	// of its handler; a body that has not arrived by then is answered 400
	// and its connection closed. An import's NDJSON stream is bounded by
	// progress instead: each read of it must return within this.
	//
	// Defaults to BodyReadTimeoutDefault (30s).
	BodyReadTimeout time.Duration
	// WriteTimeout bounds the write of an answer, from the start of its
	// handler (past BodyReadTimeout for a request with a body): a claim's
	// from the end of its wait, an export's from each flush. It is no server-wide http.Server.WriteTimeout, which would
	// cut long-polling claims, exports and WebSocket subscribers.
	//
	// Defaults to WriteTimeoutDefault (30s).
	WriteTimeout time.Duration
	// AllowedHosts are the host names (a pattern such as *.example.com
	// matches every name under it; * matches all) or addresses a request's
	// Host header may name, the port aside, so that a DNS rebinding name
	// is refused. Empty: a request that came in on a loopback address may
	// name only localhost or a loopback address, other requests any host.
	// GET /healthz and GET /readyz are served whatever their Host. Refused
	// requests are answered 421 misdirected_request.
	AllowedHosts []string
	// TrustedOrigins are browser origins (scheme://host[:port]) allowed to
	// send cross-origin requests that change state, which
	// http.CrossOriginProtection refuses from any other origin with 403
	// permission_denied.
	TrustedOrigins []string
	// BackupDir is the directory in which GET /v1/backup has Backup write
	// each backup, in a directory of its own that is removed once the
	// backup was sent or failed. It must exist, and should be on the file
	// system of the store's data, where a checkpoint is made of hard links
	// rather than copies, and readable by the service's user alone.
	//
	// Defaults to os.TempDir().
	BackupDir string
	// Backup writes the files of GET /v1/backup's archive into dir, which
	// does not exist yet (its parent, BackupDir, does). An error wrapping
	// errors.ErrUnsupported (core.ErrUnsupported), which must leave dir as
	// it was, answers 501 unimplemented.
	//
	// Defaults to Engine.Checkpoint: the store's checkpoint (see
	// core.Checkpointer) at the archive's root.
	Backup func(ctx context.Context, dir string) error
	// Stats holds the live statistics GET /v1/stats answers (the web UI's
	// overview); the caller runs its sampling. Nil answers no samples.
	Stats *Stats
}

// Defaults of Config.
const (
	// BodyReadTimeoutDefault bounds the read of a request body.
	BodyReadTimeoutDefault = 30 * time.Second
	// WriteTimeoutDefault bounds the write of an answer.
	WriteTimeoutDefault = 30 * time.Second
)

// Validate checks the host patterns and trusted origins and names the bad
// one.
func (c Config) Validate() error {
	for _, h := range c.AllowedHosts {
		if err := validateHostPattern(h); err != nil {
			return fmt.Errorf("httptransport: Config.AllowedHosts: %w", err)
		}
	}
	cop := http.NewCrossOriginProtection()
	for _, o := range c.TrustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return fmt.Errorf("httptransport: Config.TrustedOrigins: %w", err)
		}
	}
	if c.BodyReadTimeout < 0 || c.WriteTimeout < 0 {
		return errors.New("httptransport: Config.BodyReadTimeout and WriteTimeout must not be negative")
	}
	return nil
}

// Server serves the HTTP API of docs/api.md over a core.Engine. It
// implements http.Handler and sets the read and write deadlines of each
// request itself (see Config), so mount it on an http.Server without
// ReadTimeout and WriteTimeout.
type Server struct {
	engine          *core.Engine
	svc             *service.Service
	log             *slog.Logger
	maxRequestBytes int64
	maxJobBytes     int64
	mux             *http.ServeMux
	tokens          *auth.Tokens
	protectMetrics  bool
	bodyReadTimeout time.Duration
	writeTimeout    time.Duration
	allowedHosts    []string
	crossOrigin     *http.CrossOriginProtection
	backupDir       string
	backup          func(ctx context.Context, dir string) error
	backupRunning   atomic.Bool // one backup at a time
	liveStats       *Stats
	// ownAuth holds the patterns mounted with HandleOwnAuth.
	ownAuth sync.Map

	routesMu sync.Mutex
	routes   []string // patterns mounted by route and Handle, in order
}

var _ http.Handler = (*Server)(nil)

// New returns a Server with every route of docs/api.md but WebSocket subscribe,
// which its transport mounts with Handle. It panics when cfg.Engine is nil
// or cfg.Validate fails.
func New(cfg Config) *Server {
	if cfg.Engine == nil {
		panic("httptransport: Config.Engine is required")
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cop := http.NewCrossOriginProtection()
	for _, o := range cfg.TrustedOrigins {
		_ = cop.AddTrustedOrigin(o) // checked by Validate
	}
	s := &Server{
		engine:          cfg.Engine,
		log:             cmp.Or(cfg.Logger, slog.Default()),
		maxRequestBytes: cmp.Or(cfg.MaxRequestBytes, MaxRequestBytesDefault),
		maxJobBytes:     int64(cfg.Engine.Limits().MaxBodyBytes) + wire.EnvelopeBytes,
		mux:             http.NewServeMux(),
		tokens:          cfg.Tokens,
		protectMetrics:  cfg.ProtectMetrics,
		bodyReadTimeout: cmp.Or(cfg.BodyReadTimeout, BodyReadTimeoutDefault),
		writeTimeout:    cmp.Or(cfg.WriteTimeout, WriteTimeoutDefault),
		allowedHosts:    normalizeHostPatterns(cfg.AllowedHosts),
		crossOrigin:     cop,
		backupDir:       cmp.Or(cfg.BackupDir, os.TempDir()),
		backup:          cfg.Backup,
		liveStats:       cfg.Stats,
	}
	if s.svc = cfg.Service; s.svc == nil {
		s.svc = service.New(service.Config{Engine: cfg.Engine, Logger: s.log, NATSDeliverySubjects: cfg.NATSDeliverySubjects})
	}
	if s.backup == nil {
		s.backup = s.engine.Checkpoint
	}
	s.route("POST /v1/jobs", s.createJob)
	s.route("POST /v1/jobs/batch", s.createBatch)
	s.route("PUT /v1/jobs/{id}", s.putJob)
	s.route("GET /v1/jobs/{id}", s.getJob)
	s.route("DELETE /v1/jobs/{id}", s.cancelJob)
	s.route("POST /v1/jobs/{id}/ack", s.ackJob)
	s.route("POST /v1/jobs/{id}/nack", s.nackJob)
	s.route("POST /v1/jobs/{id}/touch", s.touchJob)
	s.route("POST /v1/acks", s.ackBatch)
	s.route("POST /v1/nacks", s.nackBatch)
	s.route("POST /v1/jobs/{id}/requeue", s.requeueJob)
	s.route("POST /v1/topics/{topic}/claim", s.claim)
	s.route("GET /v1/topics", s.listTopics)
	s.route("GET /v1/topics/{topic}", s.getTopic)
	s.route("PUT /v1/topics/{topic}", s.putTopic)
	s.route("PATCH /v1/topics/{topic}", s.patchTopic)
	s.route("DELETE /v1/topics/{topic}", s.deleteTopic)
	s.route("POST /v1/topics/{topic}/pause", s.pauseTopic)
	s.route("POST /v1/topics/{topic}/resume", s.resumeTopic)
	s.route("GET /v1/topics/{topic}/dead", s.listDead)
	s.route("POST /v1/topics/{topic}/dead/requeue", s.requeueDead)
	s.route("GET /v1/topics/{topic}/jobs", s.findJobs)
	s.route("DELETE /v1/topics/{topic}/jobs", s.cancelByKey)
	s.route("POST /v1/topics/{topic}/jobs/cancel", s.cancelJobs)
	s.route("GET /v1/schedules", s.listSchedules)
	s.route("GET /v1/schedules/{name}", s.getSchedule)
	s.route("PUT /v1/schedules/{name}", s.putSchedule)
	s.route("DELETE /v1/schedules/{name}", s.deleteSchedule)
	s.route("POST /v1/schedules/{name}/run", s.runSchedule)
	s.route("GET /v1/export", s.exportJobs)
	s.route("POST /v1/import", s.importJobs)
	s.route("GET /v1/backup", s.backupArchive)
	s.route("POST /v1/rekey", s.rekey)
	s.route("GET /v1/whoami", s.whoami)
	s.route("GET /v1/stats", s.stats)
	s.route("GET /v1/version", s.version)
	s.route("GET /healthz", s.healthz)
	s.route("GET /readyz", s.readyz)
	s.route("GET /v1/openapi.json", s.serveOpenAPI)
	return s
}

// Handle mounts an extra route, such as "GET /v1/topics/{topic}/subscribe"
// or "GET /metrics", with a net/http ServeMux pattern. The handler gets the
// request as is (path values set, nothing wrapped), so it may hijack the
// connection. With tokens, the request was authenticated first and, when
// the pattern has a {topic} or {id} wildcard, its topic checked against the
// token's. It panics, as ServeMux does, when pattern is invalid or
// conflicts with a route already mounted. It is safe to call while serving.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.guard(pattern, h))
	s.addRoute(pattern)
}

// Routes returns the patterns of every route mounted so far, by New and by
// Handle, in the order they were mounted: what the OpenAPI description
// (OpenAPI) must describe.
func (s *Server) Routes() []string {
	s.routesMu.Lock()
	defer s.routesMu.Unlock()
	return slices.Clone(s.routes)
}

// addRoute records a mounted pattern for Routes.
func (s *Server) addRoute(pattern string) {
	s.routesMu.Lock()
	defer s.routesMu.Unlock()
	s.routes = append(s.routes, pattern)
}

// HandleOwnAuth mounts h for pattern as Handle does, but leaves
// authentication to h, which answers in a protocol of its own: the gRPC
// transport, whose calls carry their token in metadata and are refused with
// gRPC statuses. The request still gets the Host and cross-origin checks
// (answered with the JSON error body) and the deadlines of every request,
// which h may move with http.NewResponseController. It panics as Handle
// does; it is safe to call while serving.
func (s *Server) HandleOwnAuth(pattern string, h http.Handler) {
	s.ownAuth.Store(pattern, true)
	s.mux.Handle(pattern, h)
}

// ServeHTTP implements http.Handler. It sets the request's deadlines, then
// answers, with the JSON error body: 421 a Host it does not serve (see
// Config.AllowedHosts); 403 a browser's cross-origin request that is not
// a GET, HEAD or OPTIONS and not from a trusted origin; with tokens, 401 a
// request for a route that is not open without a valid bearer token and 403
// when the token lacks the route's scope; 404 a path without a route, and
// 405 with Allow a method the path has no route for.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.setDeadlines(w, r)
	_, pattern := s.mux.Handler(r)
	if err := s.checkHost(r, pattern); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.crossOrigin.Check(r); err != nil {
		s.log.Info("httptransport: cross-origin request refused", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"), "err", err)
		s.writeError(w, r, wire.WithMessage(
			"cross-origin request refused: a browser page may change state only from its own origin or a trusted one (--trusted-origins): "+err.Error(),
			wire.ErrPermissionDenied))
		return
	}
	ar, err := s.authenticate(w, r, pattern)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	r = ar
	if pattern == "" {
		s.serveUnrouted(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// serveUnrouted lets the mux answer a request that matched no pattern into
// a recorder, then turns its 404 or 405 into the JSON error body; other
// answers (redirects of unclean paths) pass through.
func (s *Server) serveUnrouted(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	h.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		s.writeError(w, r, wire.WithMessage(fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path), core.ErrNotFound))
	case http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		s.writeError(w, r, wire.WithMessage(
			fmt.Sprintf("method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow),
			errMethodNotAllowed,
		))
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
	}
}

// setDeadlines bounds the request: its body, when it has one, must arrive
// within the body read timeout (readBody lifts the deadline once it has
// read it, so that a long-polling claim is not cut), and its answer be
// written within the write timeout, past the body's time (routes that
// answer later move it), so that a body cut by its deadline still gets its
// answer. net/http keeps a connection's write deadline from one request to
// the next, so every request sets it.
func (s *Server) setDeadlines(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	now := time.Now() // socket deadlines are on the real clock, not the engine's
	if r.ContentLength == 0 {
		_ = rc.SetWriteDeadline(now.Add(s.writeTimeout))
		return
	}
	_ = rc.SetReadDeadline(now.Add(s.bodyReadTimeout))
	_ = rc.SetWriteDeadline(now.Add(s.bodyReadTimeout + s.writeTimeout))
}

// recorder is a minimal http.ResponseWriter that keeps an answer.
type recorder struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// handlerFunc is a route's handler; a returned error is answered by
// writeError, so it must not have written anything.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route mounts one of the server's own routes: errors become the JSON error
// body and a panic becomes 500 internal instead of a dropped connection.
func (s *Server) route(pattern string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeError(w, r, fmt.Errorf("httptransport: panic serving %s: %v\n%s", pattern, v, debug.Stack()))
			}
		}()
		// Store decorators label metrics and spans with the transport.
		r = r.WithContext(core.WithTransport(r.Context(), core.TransportHTTP))
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
	s.addRoute(pattern)
}
