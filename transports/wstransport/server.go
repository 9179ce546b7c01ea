package wstransport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Pattern is the route of the subscribe endpoint, as a net/http ServeMux
// pattern; the handler reads the topic from its {topic} wildcard.
const Pattern = "GET /v1/topics/{topic}/subscribe"

// Prefetch bounds of the ?prefetch= query parameter.
const (
	// PrefetchDefault is how many deliveries a subscriber holds
	// unacknowledged at once when it does not say.
	PrefetchDefault = core.SubscriptionPrefetchDefault
	// PrefetchMax is the largest prefetch a subscriber may ask for.
	PrefetchMax = core.SubscriptionPrefetchMax
)

// Defaults of Config.
const (
	// PingIntervalDefault is how often an idle connection is pinged.
	PingIntervalDefault = 20 * time.Second
	// PongTimeoutDefault is how long a ping waits for its pong.
	PongTimeoutDefault = 10 * time.Second
	// WriteTimeoutDefault bounds the write of one frame.
	WriteTimeoutDefault = 10 * time.Second
	// MaxFrameBytesDefault is the soft limit of a frame from a subscriber:
	// a larger frame is answered with an error frame.
	MaxFrameBytesDefault = 64 << 10
	// MaxFrameHardBytesDefault is the hard cap of a frame from a
	// subscriber: a larger frame closes the connection.
	MaxFrameHardBytesDefault = 1 << 20
	// ClaimWaitDefault is how long one claim of a connection waits.
	ClaimWaitDefault = 30 * time.Second
	// RecheckDefault is how often a subscription reads back the
	// deliveries it has held that long (Config.Recheck).
	RecheckDefault = 2 * time.Second
	// OpTimeoutDefault bounds the engine call of one ack, nack or touch
	// and of the release of a delivery.
	OpTimeoutDefault = 10 * time.Second
	// MaxSubscribersDefault bounds the WebSocket subscribers served at
	// once.
	MaxSubscribersDefault = 1024
)

// Config configures a Server. Zero fields take their defaults.
type Config struct {
	// Engine serves the subscriptions. Required.
	Engine *core.Engine
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// PingInterval is how often each connection is pinged; a connection
	// whose pong does not come within PongTimeout is closed and its
	// deliveries released.
	//
	// Defaults to PingIntervalDefault (20s).
	PingInterval time.Duration
	// PongTimeout bounds the wait for a pong.
	//
	// Defaults to PongTimeoutDefault (10s).
	PongTimeout time.Duration
	// WriteTimeout bounds the write of one frame to a subscriber; a
	// subscriber that does not take a frame within it is disconnected, so
	// that a stuck subscriber holds its deliveries no longer than this.
	//
	// Defaults to WriteTimeoutDefault (10s).
	WriteTimeout time.Duration
	// MaxFrameBytes is the soft limit of a frame from a subscriber: a
	// larger frame, up to MaxFrameHardBytes, is read to its end and
	// thrown away, answered with an invalid_argument error frame that
	// names the limit (and no id, since the frame is not decoded), and the
	// connection stays open. It also bounds the memory a connection spends
	// on a frame: no more than MaxFrameBytes+1 bytes of one are held.
	//
	// Defaults to MaxFrameBytesDefault (64 KiB); at least 1024.
	MaxFrameBytes int64
	// MaxFrameHardBytes is the hard cap of a frame from a subscriber: a
	// larger frame closes the connection with status 1009 (message too
	// big), and its deliveries are released.
	//
	// Defaults to MaxFrameHardBytesDefault (1 MiB), or to MaxFrameBytes
	// when that is larger; at least MaxFrameBytes.
	MaxFrameHardBytes int64
	// ClaimWait is how long one claim of a connection waits for due jobs
	// before it claims again; it bounds nothing a subscriber sees.
	//
	// Defaults to ClaimWaitDefault (30s); at most core.ClaimWaitLimit.
	ClaimWait time.Duration
	// Recheck is how often a subscription reads back the deliveries it
	// has held for that long (core.SubscriptionParams.Recheck): one whose
	// job was cancelled through another instance gets its cancelled frame,
	// and one settled through another instance gives its credit back.
	//
	// Defaults to RecheckDefault (2s).
	Recheck time.Duration
	// OpTimeout bounds the engine call of one nack or touch frame, of one
	// batch of ack frames (see acker), and of each release when a
	// connection closes.
	//
	// Defaults to OpTimeoutDefault (10s).
	OpTimeout time.Duration
	// SubscribersFunc, when set, is told of every subscription that opens
	// (+1) and closes (-1), by topic: the hook of a subscribers gauge.
	SubscribersFunc func(topic string, delta int)
	// OriginPatterns lists the host patterns (or scheme://host patterns,
	// such as https://app.example.com) of browser origins allowed to
	// connect besides the request's own host (see
	// websocket.AcceptOptions.OriginPatterns). Clients that send no Origin
	// header, as programs do, are always allowed; others are answered 403
	// permission_denied before the upgrade.
	OriginPatterns []string
	// MaxSubscribers bounds the subscribe requests served at once; over
	// it, an upgrade is answered 503 unavailable with Retry-After, so that
	// subscribers cannot take every connection of the listener.
	//
	// Defaults to MaxSubscribersDefault (1024).
	MaxSubscribers int
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c Config) WithDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.PingInterval = cmp.Or(c.PingInterval, PingIntervalDefault)
	c.PongTimeout = cmp.Or(c.PongTimeout, PongTimeoutDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeoutDefault)
	c.MaxFrameBytes = cmp.Or(c.MaxFrameBytes, MaxFrameBytesDefault)
	c.MaxFrameHardBytes = cmp.Or(c.MaxFrameHardBytes, max(MaxFrameHardBytesDefault, c.MaxFrameBytes))
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
		return errors.New("wstransport: Config.Engine is required")
	case c.PingInterval <= 0:
		return errors.New("wstransport: Config.PingInterval must be positive")
	case c.PongTimeout <= 0:
		return errors.New("wstransport: Config.PongTimeout must be positive")
	case c.WriteTimeout <= 0:
		return errors.New("wstransport: Config.WriteTimeout must be positive")
	case c.MaxFrameBytes < 1024:
		return errors.New("wstransport: Config.MaxFrameBytes must be at least 1024")
	case c.MaxFrameHardBytes < c.MaxFrameBytes:
		return errors.New("wstransport: Config.MaxFrameHardBytes must be at least Config.MaxFrameBytes")
	case c.ClaimWait <= 0 || c.ClaimWait > core.ClaimWaitLimit:
		return fmt.Errorf("wstransport: Config.ClaimWait must be between 0 and %s", core.ClaimWaitLimit)
	case c.Recheck < 0:
		return errors.New("wstransport: Config.Recheck must not be negative")
	case c.OpTimeout <= 0:
		return errors.New("wstransport: Config.OpTimeout must be positive")
	case c.MaxSubscribers <= 0:
		return errors.New("wstransport: Config.MaxSubscribers must be positive")
	}
	for _, p := range c.OriginPatterns {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("wstransport: Config.OriginPatterns: pattern %q: %w", p, err)
		}
	}
	return nil
}

// Server serves WebSocket subscriptions to topics over a core.Engine, as
// docs/api.md's "WebSocket subscribers" says. It implements http.Handler for
// Pattern; mount it with Register. It is safe for concurrent use.
type Server struct {
	engine *core.Engine
	log    *slog.Logger
	cfg    Config

	mu       sync.Mutex
	subs     map[*subscription]struct{}
	stopping bool
	// serving counts the subscribe requests being served, for
	// Config.MaxSubscribers.
	serving int
	// handlers counts the subscribe requests being served.
	handlers sync.WaitGroup
	// frameBufs pools the *[]byte buffers that client frames are read
	// into, shared by the connections so that an idle one holds none; no
	// buffer grows past Config.MaxFrameBytes+1 bytes (see readFrame).
	frameBufs sync.Pool
	// acks coalesces the ack frames of every connection.
	acks *acker
}

var _ http.Handler = (*Server)(nil)

// New returns a Server configured by cfg. Errors: an invalid configuration.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Server{
		engine: cfg.Engine,
		log:    cfg.Logger,
		cfg:    cfg,
		subs:   map[*subscription]struct{}{},
		acks:   &acker{engine: cfg.Engine, timeout: cfg.OpTimeout},
	}, nil
}

// Mux is where Register mounts the server: a *http.ServeMux, or an
// *httptransport.Server so that the route shares the API's listener.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Register mounts the server on mux at Pattern.
func (s *Server) Register(mux Mux) { mux.Handle(Pattern, s) }

// Subscribers returns the number of open subscriptions.
func (s *Server) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// ServeHTTP upgrades a subscribe request to a WebSocket and serves the
// subscription until the connection closes. Before the upgrade, a bad
// topic or prefetch, or a request that is no WebSocket upgrade, is answered
// 400, a browser's request from an origin that is not allowed (see
// Config.OriginPatterns) 403, and a request during Stop or over
// Config.MaxSubscribers 503 with Retry-After, with the HTTP API's JSON
// error body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if err := core.ValidateTopicName(topic); err != nil {
		s.writeError(w, err)
		return
	}
	prefetch, err := parsePrefetch(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	// sub is set before the subscription claims, so before any of its
	// deliveries can be cancelled.
	var sub *subscription
	held, err := s.engine.NewSubscription(core.SubscriptionParams{
		Topic: topic, Prefetch: prefetch, Via: core.ViaWebSocket, Consumer: r.RemoteAddr,
		ClaimWait: s.cfg.ClaimWait, Recheck: s.cfg.Recheck, ReleaseTimeout: s.cfg.OpTimeout,
		CancelledFunc: func(id string) { sub.send(appendCancelledFrame(nil, id)) },
	})
	if err != nil {
		s.writeError(w, err)
		return
	}
	if !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket") {
		s.writeError(w, wire.WithMessage(
			"this route upgrades to a WebSocket: send Connection: Upgrade and Upgrade: websocket",
			errNotWebSocket,
		))
		return
	}
	if err := checkOrigin(r, s.cfg.OriginPatterns); err != nil {
		s.log.Info("wstransport: cross-origin subscribe refused", "topic", topic, "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"))
		s.writeError(w, err)
		return
	}
	if err := s.enter(); err != nil {
		s.writeError(w, err)
		return
	}
	defer s.leave()

	// A hijacked connection keeps the deadlines the http.Server set; a
	// subscription lives on with timeouts of its own.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.cfg.OriginPatterns})
	if err != nil {
		s.log.Debug("wstransport: upgrade failed", "topic", topic, "remote", r.RemoteAddr, "err", err)
		return
	}
	// The hard cap is the connection's read limit, which closes it with
	// 1009; the soft limit is the reader's (see readFrame).
	conn.SetReadLimit(s.cfg.MaxFrameHardBytes)
	sub = newSubscription(s, conn, topic, held, prefetch, s.log.With("topic", topic, "remote", r.RemoteAddr))
	if !s.add(sub) {
		_ = conn.Close(websocket.StatusGoingAway, closeReasonStopping)
		return
	}
	defer s.remove(sub)
	sub.run(r.Context())
}

// closeReasonStopping is the close reason when the server stops.
const closeReasonStopping = "server shutting down"

// enter counts a request in unless the server is stopping or serves
// Config.MaxSubscribers already: errors wrap core.ErrUnavailable.
func (s *Server) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopping:
		return core.ErrUnavailable
	case s.serving >= s.cfg.MaxSubscribers:
		s.log.Warn("wstransport: subscriber limit reached; upgrade refused", "max_subscribers", s.cfg.MaxSubscribers)
		return wire.WithMessage(fmt.Sprintf("this server serves at most %d WebSocket subscribers at once; retry later", s.cfg.MaxSubscribers), core.ErrUnavailable)
	}
	s.serving++
	s.handlers.Add(1)
	return nil
}

// leave counts a request out.
func (s *Server) leave() {
	s.mu.Lock()
	s.serving--
	s.mu.Unlock()
	s.handlers.Done()
}

// checkOrigin refuses, with an error wrapping wire.ErrPermissionDenied, a
// browser's request whose Origin is neither the request's host nor matched
// by patterns. It decides as websocket.Accept does with OriginPatterns, so
// that the refusal comes with the JSON error body rather than Accept's
// plain text.
func checkOrigin(r *http.Request, patterns []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err == nil && u.Host != "" {
		if strings.EqualFold(r.Host, u.Host) {
			return nil
		}
		for _, p := range patterns {
			target := u.Host
			if strings.Contains(p, "://") {
				target = u.Scheme + "://" + u.Host
			}
			if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
				return nil
			}
		}
	}
	return wire.WithMessage(fmt.Sprintf("WebSocket from origin %q refused: a browser page may subscribe only from the server's own origin or a trusted one (--trusted-origins)", origin), wire.ErrPermissionDenied)
}

func (s *Server) add(sub *subscription) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.subs[sub] = struct{}{}
	if s.cfg.SubscribersFunc != nil {
		s.cfg.SubscribersFunc(sub.topic, 1)
	}
	return true
}

func (s *Server) remove(sub *subscription) {
	s.mu.Lock()
	if _, ok := s.subs[sub]; ok && s.cfg.SubscribersFunc != nil {
		s.cfg.SubscribersFunc(sub.topic, -1)
	}
	delete(s.subs, sub)
	s.mu.Unlock()
}

// Stop refuses new subscriptions, closes every connection with status 1001
// (going away) and waits until each has released its unacknowledged
// deliveries. When ctx is done first, it cuts the connections that are
// still closing and waits for their releases, each bounded by
// Config.OpTimeout, then returns ctx's error. It is idempotent and safe
// before any subscription.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	subs := make([]*subscription, 0, len(s.subs))
	for sub := range s.subs {
		subs = append(subs, sub)
	}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.stop(websocket.StatusGoingAway, closeReasonStopping)
	}
	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, sub := range subs {
		_ = sub.conn.CloseNow()
	}
	<-done
	return ctx.Err()
}

// parsePrefetch reads ?prefetch=, PrefetchDefault when absent.
func parsePrefetch(r *http.Request) (int, error) {
	vals, ok := r.URL.Query()["prefetch"]
	if !ok {
		return PrefetchDefault, nil
	}
	n, err := strconv.Atoi(vals[0])
	if len(vals) > 1 || err != nil || n < 1 || n > PrefetchMax {
		return 0, core.Invalid("prefetch", "prefetch must be given once, as an integer between 1 and %d", PrefetchMax)
	}
	return n, nil
}

// headerHasToken reports whether a comma-separated header has token, in
// any case.
func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// writeError answers err, before an upgrade, with the HTTP API's JSON error
// body and the status of toWireError.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	e := toWireError(err)
	if e.Status >= http.StatusInternalServerError && e.Status != http.StatusServiceUnavailable {
		s.log.Error("wstransport: internal error", "err", err)
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"error":{"code":`...)
	b = wire.AppendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = wire.AppendString(b, e.Message)
	b = append(b, `,"field":`...)
	b = wire.AppendString(b, e.Field)
	b = append(b, "}}\n"...)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if ra := e.RetryAfterHeader(); ra != "" {
		h.Set("Retry-After", ra)
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}
