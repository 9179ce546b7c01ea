package connecttransport

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/gen/delayq/v1/delayqv1connect"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// Defaults of Config.
const (
	// MaxRequestBytesDefault bounds one request message, as the HTTP API
	// bounds a batch request.
	MaxRequestBytesDefault = 32 << 20
	// WriteTimeoutDefault bounds the answer of a unary call from its
	// start (a claim's from the end of its wait), as the HTTP API's.
	WriteTimeoutDefault = 30 * time.Second
	// SendTimeoutDefault bounds the send of one delivery of Subscribe, or
	// of one batch of Export.
	SendTimeoutDefault = 10 * time.Second
	// ReceiveTimeoutDefault bounds the arrival of each message of Import.
	ReceiveTimeoutDefault = 30 * time.Second
	// ClaimWaitDefault is how long one claim of a subscription waits.
	ClaimWaitDefault = 30 * time.Second
	// RecheckDefault is how often a subscription reads back the jobs it
	// has held that long, to learn of settlements and cancels made
	// elsewhere.
	RecheckDefault = 2 * time.Second
	// OpTimeoutDefault bounds the release of a subscription's deliveries.
	OpTimeoutDefault = 10 * time.Second
	// MaxSubscribersDefault bounds the Subscribe streams served at once.
	MaxSubscribersDefault = 1024
)

// Prefetch bounds of SubscribeRequest.prefetch, those of WebSocket
// subscribers.
const (
	// PrefetchDefault is the prefetch of a request that gives none.
	PrefetchDefault = core.SubscriptionPrefetchDefault
	// PrefetchMax is the largest prefetch.
	PrefetchMax = core.SubscriptionPrefetchMax
)

// Config configures a Server. Zero fields take their defaults.
type Config struct {
	// Engine serves every call. Required.
	Engine *core.Engine
	// Service applies the API's policy (access, quotas, batch rules) over
	// Engine; share one with the other transports.
	//
	// Defaults to a service.Service over Engine with Logger and
	// NATSDeliverySubjects.
	Service *service.Service
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Tokens, when it holds any, are the API tokens every call must present
	// as the metadata `authorization: Bearer <token>`, with the scope and
	// topics of the HTTP route it mirrors. Nil or empty serves without
	// authentication.
	Tokens *auth.Tokens
	// NATSDeliverySubjects are the NATS subject patterns a token restricted
	// to some topics may name as a topic's delivery.subject, as
	// httptransport.Config.NATSDeliverySubjects; only the default Service
	// uses it.
	NATSDeliverySubjects []string
	// MaxRequestBytes bounds one request message; a larger one is answered
	// ResourceExhausted.
	//
	// Defaults to MaxRequestBytesDefault (32 MiB).
	MaxRequestBytes int
	// WriteTimeout bounds the answer of a unary call, from its start; a
	// Claim's from the end of its wait.
	//
	// Defaults to WriteTimeoutDefault (30s).
	WriteTimeout time.Duration
	// SendTimeout bounds the send of one delivery of Subscribe, or of one
	// batch of Export: a subscriber that does not take it in time loses
	// the stream, and its deliveries are released.
	//
	// Defaults to SendTimeoutDefault (10s).
	SendTimeout time.Duration
	// ReceiveTimeout bounds the arrival of each message of an Import
	// stream, however long the whole import takes.
	//
	// Defaults to ReceiveTimeoutDefault (30s).
	ReceiveTimeout time.Duration
	// ClaimWait is how long one claim of a subscription waits for due jobs
	// before it claims again.
	//
	// Defaults to ClaimWaitDefault (30s); at most core.ClaimWaitLimit.
	ClaimWait time.Duration
	// Recheck is how often a subscription reads back the deliveries it
	// has held for that long (core.SubscriptionParams.Recheck): one whose
	// job was cancelled through another instance gets its cancelled
	// message, and one settled through another instance gives its credit
	// back before its lease ends.
	//
	// Defaults to RecheckDefault (2s).
	Recheck time.Duration
	// OpTimeout bounds the release of each delivery of a subscription
	// that ended.
	//
	// Defaults to OpTimeoutDefault (10s).
	OpTimeout time.Duration
	// MaxSubscribers bounds the Subscribe streams served at once; over it
	// a Subscribe is answered Unavailable.
	//
	// Defaults to MaxSubscribersDefault (1024).
	MaxSubscribers int
	// SubscribersFunc, when set, is told of every subscription that opens
	// (+1) and closes (-1), by topic: the hook of a subscribers gauge.
	SubscribersFunc func(topic string, delta int)
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c Config) WithDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, MaxRequestBytesDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeoutDefault)
	c.SendTimeout = cmp.Or(c.SendTimeout, SendTimeoutDefault)
	c.ReceiveTimeout = cmp.Or(c.ReceiveTimeout, ReceiveTimeoutDefault)
	c.ClaimWait = cmp.Or(c.ClaimWait, ClaimWaitDefault)
	c.Recheck = cmp.Or(c.Recheck, RecheckDefault)
	c.OpTimeout = cmp.Or(c.OpTimeout, OpTimeoutDefault)
	c.MaxSubscribers = cmp.Or(c.MaxSubscribers, MaxSubscribersDefault)
	return c
}

// Validate checks the configuration, defaults filled, and names the bad
// field.
func (c Config) Validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("connecttransport: Config.Engine is required")
	case c.MaxRequestBytes < 0:
		return errors.New("connecttransport: Config.MaxRequestBytes must not be negative")
	case c.WriteTimeout < 0, c.SendTimeout < 0, c.ReceiveTimeout < 0, c.Recheck < 0, c.OpTimeout < 0:
		return errors.New("connecttransport: Config.WriteTimeout, SendTimeout, ReceiveTimeout, Recheck and OpTimeout must not be negative")
	case c.ClaimWait < 0 || c.ClaimWait > core.ClaimWaitLimit:
		return errors.New("connecttransport: Config.ClaimWait must be between 0 and " + core.ClaimWaitLimit.String())
	case c.MaxSubscribers < 0:
		return errors.New("connecttransport: Config.MaxSubscribers must not be negative")
	}
	return nil
}

// Server serves delayq.v1.DelayqService (proto/delayq/v1/delayq.proto) over
// a core.Engine, and gRPC server reflection of it. Mount it with Register on
// the HTTP API (or each of Routes on a mux of its own). It is safe for
// concurrent use.
type Server struct {
	engine *core.Engine
	svc    *service.Service
	log    *slog.Logger
	cfg    Config
	tokens *auth.Tokens

	mu       sync.Mutex
	subs     map[*subscriber]struct{}
	stopping bool
	handlers sync.WaitGroup
}

var _ delayqv1connect.DelayqServiceHandler = (*Server)(nil)

// New returns a Server configured by cfg. Errors: an invalid configuration.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	svc := cfg.Service
	if svc == nil {
		svc = service.New(service.Config{Engine: cfg.Engine, Logger: cfg.Logger, NATSDeliverySubjects: cfg.NATSDeliverySubjects})
	}
	return &Server{engine: cfg.Engine, svc: svc, log: cfg.Logger, cfg: cfg, tokens: cfg.Tokens, subs: map[*subscriber]struct{}{}}, nil
}

// readLimit returns the most bytes one message of procedure may hold once
// decompressed: Config.MaxRequestBytes for batches and import, the
// engine's body limit and an envelope for a message of one job (a push, a
// replace, a schedule's template), wire.SmallRequestBytes for the rest. A
// bound per procedure keeps a small call from inflating a compressed body
// to the batch limit.
func (s *Server) readLimit(procedure string) int {
	switch procedure {
	case delayqv1connect.DelayqServicePushBatchProcedure,
		delayqv1connect.DelayqServiceImportProcedure,
		delayqv1connect.DelayqServiceAckBatchProcedure,
		delayqv1connect.DelayqServiceNackBatchProcedure:
		return s.cfg.MaxRequestBytes
	case delayqv1connect.DelayqServicePushProcedure,
		delayqv1connect.DelayqServiceReplaceProcedure,
		delayqv1connect.DelayqServicePutScheduleProcedure:
		return min(s.engine.Limits().MaxBodyBytes+wire.EnvelopeBytes, s.cfg.MaxRequestBytes)
	}
	return min(wire.SmallRequestBytes, s.cfg.MaxRequestBytes)
}

// Routes returns the URL path prefixes the server answers, each with its
// handler: the service's and those of gRPC reflection (v1 and v1alpha, for
// grpcurl and grpcui). Every handler checks the call's token before it
// reads the request's body (see authenticateFirst).
func (s *Server) Routes() map[string]http.Handler {
	interceptors := connect.WithInterceptors(interceptor{s})
	// One service handler per read limit; each call goes to the one of its
	// procedure's limit.
	byLimit := map[int]http.Handler{}
	var path string
	for _, limit := range []int{s.readLimit(""), s.readLimit(delayqv1connect.DelayqServicePushProcedure), s.cfg.MaxRequestBytes} {
		if byLimit[limit] == nil {
			path, byLimit[limit] = delayqv1connect.NewDelayqServiceHandler(s, interceptors, connect.WithReadMaxBytes(limit))
		}
	}
	service := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		byLimit[s.readLimit(r.URL.Path)].ServeHTTP(w, r)
	})
	routes := map[string]http.Handler{path: s.authenticateFirst(withResponseController(service))}
	reflector := grpcreflect.NewStaticReflector(delayqv1connect.DelayqServiceName)
	opts := []connect.HandlerOption{interceptors, connect.WithReadMaxBytes(s.readLimit(""))}
	path, h := grpcreflect.NewHandlerV1(reflector, opts...)
	routes[path] = s.authenticateFirst(h)
	path, h = grpcreflect.NewHandlerV1Alpha(reflector, opts...)
	routes[path] = s.authenticateFirst(h)
	return routes
}

// Register mounts every route of Routes on mux, whose HandleOwnAuth leaves
// authentication to the server (httptransport.Server's does), so that gRPC
// shares the HTTP API's listener, Host and cross-origin checks.
func (s *Server) Register(mux interface {
	HandleOwnAuth(pattern string, h http.Handler)
}) {
	for path, h := range s.Routes() {
		mux.HandleOwnAuth(path, h)
	}
}

// Stop ends every Subscribe stream (answered Unavailable) and waits until
// each released the deliveries it held, or ctx is done; later Subscribe
// calls are answered Unavailable. Call it before the engine and the store
// stop and before http.Server.Shutdown, which would wait for the streams.
// Idempotent; safe before any call.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	for st := range s.subs {
		st.cancel()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rcKey is the context key of a call's *http.ResponseController.
type rcKey struct{}

// withResponseController gives handlers the call's ResponseController, so
// that Claim and Subscribe can move the deadlines the HTTP API set for the
// request (its body read and answer write), which would cut a long wait or
// a stream.
func withResponseController(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), rcKey{}, http.NewResponseController(w))
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// responseController returns the call's ResponseController, nil when the
// handler runs outside withResponseController.
func responseController(ctx context.Context) *http.ResponseController {
	rc, _ := ctx.Value(rcKey{}).(*http.ResponseController)
	return rc
}
