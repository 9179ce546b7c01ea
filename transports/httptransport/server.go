package httptransport

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// MaxRequestBytesDefault bounds a batch request body unless
// Config.MaxRequestBytes says otherwise.
const MaxRequestBytesDefault = 32 << 20

// Request bounds other than the batch's.
const (
	// envelopeBytes is the room a single job request has beyond the
	// engine's body limit, for its other fields and whitespace.
	envelopeBytes = 64 << 10
	// smallRequestBytes bounds requests without a job body: claim, ack,
	// nack, touch and topic configuration.
	smallRequestBytes = 256 << 10
)

// Config configures a Server.
type Config struct {
	// Engine serves every request. Required.
	Engine *core.Engine
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxRequestBytes bounds a batch request body. A single job request is
	// bounded by the engine's Limits().MaxBodyBytes plus room for the
	// envelope.
	//
	// Defaults to MaxRequestBytesDefault (32 MiB).
	MaxRequestBytes int64
	// Tokens, when it holds any, are the API tokens every request but
	// /healthz, /readyz and /metrics must present as
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
	// accepts. Nil allows no other subject.
	NATSDeliverySubjects []string
}

// Server serves the HTTP API of shared/API.md over a core.Engine. It
// implements http.Handler; mount it on an http.Server whose WriteTimeout
// exceeds core.ClaimWaitLimit.
type Server struct {
	engine          *core.Engine
	log             *slog.Logger
	maxRequestBytes int64
	maxJobBytes     int64
	mux             *http.ServeMux
	tokens          *auth.Tokens
	protectMetrics  bool
	natsSubjects    []string
}

var _ http.Handler = (*Server)(nil)

// New returns a Server with every route of API.md but WebSocket subscribe,
// which its transport mounts with Handle. It panics when cfg.Engine is nil.
func New(cfg Config) *Server {
	if cfg.Engine == nil {
		panic("httptransport: Config.Engine is required")
	}
	s := &Server{
		engine:          cfg.Engine,
		log:             cmp.Or(cfg.Logger, slog.Default()),
		maxRequestBytes: cmp.Or(cfg.MaxRequestBytes, MaxRequestBytesDefault),
		maxJobBytes:     int64(cfg.Engine.Limits().MaxBodyBytes) + envelopeBytes,
		mux:             http.NewServeMux(),
		tokens:          cfg.Tokens,
		protectMetrics:  cfg.ProtectMetrics,
		natsSubjects:    cfg.NATSDeliverySubjects,
	}
	s.route("POST /v1/jobs", s.createJob)
	s.route("POST /v1/jobs/batch", s.createBatch)
	s.route("PUT /v1/jobs/{id}", s.putJob)
	s.route("GET /v1/jobs/{id}", s.getJob)
	s.route("DELETE /v1/jobs/{id}", s.cancelJob)
	s.route("POST /v1/jobs/{id}/ack", s.ackJob)
	s.route("POST /v1/jobs/{id}/nack", s.nackJob)
	s.route("POST /v1/jobs/{id}/touch", s.touchJob)
	s.route("POST /v1/jobs/{id}/requeue", s.requeueJob)
	s.route("POST /v1/topics/{topic}/claim", s.claim)
	s.route("GET /v1/topics", s.listTopics)
	s.route("GET /v1/topics/{topic}", s.getTopic)
	s.route("PUT /v1/topics/{topic}", s.putTopic)
	s.route("DELETE /v1/topics/{topic}", s.deleteTopic)
	s.route("GET /v1/topics/{topic}/dead", s.listDead)
	s.route("GET /v1/export", s.exportJobs)
	s.route("POST /v1/import", s.importJobs)
	s.route("GET /healthz", s.healthz)
	s.route("GET /readyz", s.readyz)
	return s
}

// Handle mounts an extra route, such as "GET /v1/topics/{topic}/subscribe"
// or "GET /metrics", with a net/http ServeMux pattern. The handler gets the
// request as is (path values set, nothing wrapped), so it may hijack the
// connection. With tokens, the request was authenticated first and, when
// the pattern has a {topic} or {id} wildcard, its topic checked against the
// token's. It panics, as ServeMux does, when pattern is invalid or
// conflicts with a route already mounted. It is safe to call while serving.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, s.guard(pattern, h)) }

// ServeHTTP implements http.Handler. With tokens, a request that is not for
// an open route is answered 401 without a valid bearer token and 403 when
// the token lacks the route's scope. A path without a route is answered
// 404, and a method the path has no route for 405 with Allow, both with the
// JSON error body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := s.mux.Handler(r)
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
		err := s.allowPathTopics(r, pattern)
		if err == nil {
			err = h(w, r)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// traceParent returns the request's W3C traceparent header when it is well
// formed, else "".
func traceParent(r *http.Request) string {
	h := strings.TrimSpace(r.Header.Get("traceparent"))
	if validTraceParent(h) {
		return h
	}
	return ""
}
