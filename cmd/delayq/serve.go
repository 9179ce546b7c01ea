package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/backends/natsstore"
	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/backends/redisstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/keyring"
	"github.com/delayq/delayq/natsserver"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/telemetry"
	"github.com/delayq/delayq/transports/connecttransport"
	"github.com/delayq/delayq/transports/httptransport"
	"github.com/delayq/delayq/transports/natstransport"
	"github.com/delayq/delayq/transports/webhook"
	"github.com/delayq/delayq/transports/wstransport"
)

// serveCommand is `delayq serve`.
func (a *app) serveCommand() *cobra.Command {
	cfg := defaultServeConfig()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the delayq service",
		Long: `Run the delayq service: the HTTP API on --http, with WebSocket
subscribers and the gRPC API (gRPC, gRPC-Web and Connect; HTTP/2 without TLS
too) on the same listener, and NATS intake (delayq.push.<topic>,
delayq.cancel) and delivery (topics of delivery type nats) on every backend.

With the default local backend, jobs are kept in a Pebble database in
<data>/local, which one process opens at a time: several instances need
--backend redis or nats. Creates, replaces, cancels, requeues, imports and
topic changes are fsynced before the answer; claims, acks, retries, buries
and touches are fsynced in the background right after they are written, or
before the answer with --sync always. With --backend jetstream (embedded is
a deprecated name of it), jobs are kept in an in-process NATS server with
JetStream storage in --data, fsynced by --sync, which also serves NATS
clients on --nats-listen. <data>/FORMAT names the backend whose jobs the
directory holds; local and jetstream refuse a directory of the other and say
how to move its jobs (delayq export, delayq import).

With --backend local, redis or memory, serve starts an in-process NATS
server on --nats-listen for the NATS transports alone (JetStream files in
<data>/nats for local and redis, in a temporary directory for memory), or,
given --nats-url, connects to that NATS instead: instances that share a
Redis must share one NATS this way. --nats-listen off turns NATS intake and
delivery off.

delayq's in-process NATS server takes producers and consumers as
--nats-client-user with the password of --nats-client-password or, without
it, the one kept in <data>/nats-client-password.

SIGINT or SIGTERM shuts it down gracefully: intake stops, in-flight deliveries
finish or are released for redelivery, the store is closed and flushed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.applyConfigFile(cmd.Flags(), a.lookupEnv); err != nil {
				return err
			}
			if err := cfg.HTTP.check(); err != nil {
				return usageError(err)
			}
			if err := cfg.checkNATS(); err != nil {
				return usageError(err)
			}
			if err := cfg.checkRetention(); err != nil {
				return usageError(err)
			}
			if err := cfg.checkRedisWait(); err != nil {
				return usageError(err)
			}
			if err := cfg.checkRoles(); err != nil {
				return usageError(err)
			}
			if err := cfg.Kafka.Validate(); err != nil {
				return usageError(err)
			}
			if err := cfg.loadKeyRing(); err != nil {
				return err
			}
			if err := a.serve(cmd.Context(), a, &cfg); err != nil {
				var ce *exitCodeError
				if errors.As(err, &ce) {
					return err
				}
				return &exitCodeError{code: exitError, err: err}
			}
			return nil
		},
	}
	cfg.addFlags(cmd.Flags())
	return cmd
}

// newLogger returns a logger of the configured format writing to w, logging
// level and above.
func newLogger(cfg *serveConfig, w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(telemetry.LogHandler(slog.NewTextHandler(w, opts)))
}

// natsServerLevel is the least level logged from the in-process nats-server:
// its start-up banner and notices are noise next to delayq's own lines, so
// they show only with --log-level debug.
func natsServerLevel(level slog.Level) slog.Level {
	if level <= slog.LevelDebug {
		return level
	}
	return max(level, slog.LevelWarn)
}

// drainGrace is how long a shutdown lets requests finish before it cancels
// their contexts, which ends long-polling claims and WebSocket subscriptions.
const drainGrace = time.Second

// maxStreamsPerConnection bounds the HTTP/2 streams (gRPC calls) one
// connection has open at once: the least HTTP/2 recommends.
const maxStreamsPerConnection = 100

// mutantStore is set only in the test binary built with the
// delayq_mutants tag (mutants.go): it wraps the store with the bug that
// DELAYQ_MUTANT names, for the history checker to catch. Release builds
// leave it nil.
var mutantStore func(core.Store, *slog.Logger) core.Store

// instanceClock is the instance's clock: its engine, store and deliverers
// read the time from it. Only the test binary built with the
// delayq_testhooks tag (testhooks.go) replaces it, with a clock a test
// moves at run time (the history checker's clock jumps of one instance);
// release builds read the real clock.
var instanceClock = core.RealClock

// runServe runs the service until ctx is done, then shuts it down in order
// within --shutdown-timeout (stopStack: the reverse of the start): the
// drain, NATS intake, the gRPC streams, the HTTP server, the WebSocket
// subscribers, the engine's deliveries, telemetry, the store and the
// backend's server. A start that fails part way stops what it started.
func runServe(ctx context.Context, a *app, cfg *serveConfig) error {
	log := newLogger(cfg, a.stderr, cfg.LogLevel)
	slog.SetDefault(log)
	stops := &stopStack{log: log}
	defer stops.unwind(cfg.ShutdownTimeout)
	if cfg.PprofAddr != "" {
		stop, err := startPprof(cfg.PprofAddr, cfg.HTTP.AllowedHosts, log)
		if err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
		stops.pushFunc(stop)
	}
	store, natsConn, closeBackend, err := openStore(ctx, cfg, log, a.stderr)
	if err != nil {
		return err
	}
	stops.pushFunc(closeBackend) // the store closes, then the backend's server flushes
	if mutantStore != nil {
		store = mutantStore(store, log)
	}
	var sealed *keyring.Store
	if cfg.Ring != nil {
		if sealed, err = sealStore(ctx, cfg.Ring, store, log); err != nil {
			return err
		}
		store = sealed
	}
	// The engine sees the store through telemetry and the circuit breaker.
	obs, store, err := observe(ctx, cfg, log, store)
	if err != nil {
		return err
	}
	stops.pushFunc(obs.shutdown)
	acc, err := cfg.Access.load(a.lookupEnv)
	if err != nil {
		return err
	}
	engine, err := startEngine(ctx, cfg, log, store, natsConn, acc, obs, stops)
	if err != nil {
		return err
	}
	serveErr, err := startAPI(ctx, cfg, log, engine, natsConn, acc, obs, sealed, stops)
	if err != nil {
		return err
	}
	log.Info("delayq started", "backend", cfg.Backend, "roles", strings.Join(cfg.Roles, ","))

	var failure error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		failure = fmt.Errorf("http: %w", err)
		log.Error("http server failed; shutting down", "err", err)
	}
	// Before the message that says so: a second signal stops at once.
	if a.stopSignals != nil {
		a.stopSignals()
	}
	if failure == nil {
		logShutdown(log, cfg, engine.HeldDeliveries())
	}
	stops.push("", func(ctx context.Context) error { drain(ctx, cfg.DrainTimeout, engine, log); return nil })
	return failure
}

// logShutdown says, on the signal that begins a shutdown, what it waits
// for: the drain, with the deliveries consumers still hold (unacked
// leases), then the rest within --shutdown-timeout; and that a second
// signal stops at once, since runServe then restores the default handling.
func logShutdown(log *slog.Logger, cfg *serveConfig, held int) {
	const skip = "a second Ctrl-C (SIGINT or SIGTERM) stops at once, and what consumers hold is delivered again when its lease runs out"
	if cfg.DrainTimeout <= 0 {
		log.Info("shutting down: no drain (--drain-timeout 0); "+skip, "timeout", cfg.ShutdownTimeout)
		return
	}
	log.Info(fmt.Sprintf("shutting down: draining for up to %s while consumers settle %d unacked leases and deliveries in flight finish; %s",
		cfg.DrainTimeout, held, skip), "unacked_leases", held, "drain_timeout", cfg.DrainTimeout, "timeout", cfg.ShutdownTimeout)
}

// sealStore puts store behind the encryption of ring, under the breaker
// and telemetry (a job that does not open is no failure of the backend),
// and checks that ring opens a sample of what the store holds. Errors: a
// usage error when it does not.
func sealStore(ctx context.Context, ring *keyring.Ring, store core.Store, log *slog.Logger) (*keyring.Store, error) {
	sealed := keyring.New(store, keyring.Config{Ring: ring, Logger: log})
	if err := sealed.Verify(ctx); err != nil {
		if errors.Is(err, keyring.ErrUnknownKey) || errors.Is(err, keyring.ErrCorrupt) {
			return nil, usageErrorf("--encryption-keys: the key ring (keys %s) cannot decrypt what the store holds: %w", strings.Join(ring.IDs(), ", "), err)
		}
		return nil, err
	}
	log.Info("encryption at rest is on", "current_key", ring.Current(), "keys", len(ring.IDs()))
	return sealed, nil
}

// startEngine makes the deliverers and the engine over store, starts it
// and applies the configuration file's topics; the engine's stop and the
// webhook client's go on stops.
func startEngine(ctx context.Context, cfg *serveConfig, log *slog.Logger, store core.Store, natsConn *nats.Conn, acc *access, obs *observability, stops *stopStack) (*core.Engine, error) {
	hooks := webhook.New(webhook.Config{Logger: log, Clock: instanceClock(), Destinations: acc.destinations})
	stops.pushFunc(hooks.CloseIdleConnections)
	deliverers := map[string]core.Deliverer{core.DeliveryWebhook: hooks}
	if natsConn != nil {
		natsOut, err := natstransport.NewDeliverer(natstransport.DelivererConfig{Conn: natsConn, Logger: log, Clock: instanceClock()})
		if err != nil {
			return nil, err
		}
		deliverers[core.DeliveryNATS] = natsOut
	}
	if err := addKafkaDeliverer(ctx, cfg, log, deliverers, stops); err != nil {
		return nil, err
	}
	if err := obs.deliverers(cfg, deliverers); err != nil {
		return nil, err
	}
	engine, err := core.NewEngine(core.EngineConfig{
		Store:      store,
		Clock:      instanceClock(),
		Logger:     log,
		Limits:     core.Limits{MaxBodyBytes: cfg.MaxBody, MaxBatch: cfg.MaxBatch},
		Deliverers: deliverers,
		Roles:      cfg.Roles.engineRoles(),
		Instance:   instanceName(cfg.InstanceName),
	})
	if err != nil {
		return nil, err
	}
	if err := engine.Start(ctx); err != nil {
		return nil, err
	}
	stops.pushFunc(func() { log.Info("intake and deliveries stopped") })
	stops.push("deliveries still running at the shutdown timeout were released for redelivery", engine.Stop)
	return engine, putFileTopics(ctx, engine, cfg, log)
}

// startAPI serves the APIs on the HTTP listener (the HTTP API, WebSocket
// subscribers, gRPC) and NATS intake on natsConn, and returns the HTTP
// server's end; their stops go on stops. sealed is the store's
// encryption at rest, nil when off.
func startAPI(ctx context.Context, cfg *serveConfig, log *slog.Logger, engine *core.Engine, natsConn *nats.Conn, acc *access, obs *observability, sealed *keyring.Store, stops *stopStack) (<-chan error, error) {
	backupDir, backup, err := serveBackups(cfg, engine)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	// Connections over the cap wait in the kernel's backlog until one
	// closes, so that a flood of them cannot exhaust memory or descriptors.
	ln = netutil.LimitListener(ln, cfg.HTTP.MaxConnections)
	stops.push("", func(context.Context) error { _ = ln.Close(); return nil }) // unless served
	// The live statistics (GET /v1/stats, the web UI's overview) sample
	// the metrics until the shutdown.
	stats := obs.newStats(log)
	statsCtx, stopStats := context.WithCancel(context.WithoutCancel(ctx))
	statsDone := make(chan struct{})
	go func() { defer close(statsDone); stats.Run(statsCtx) }()
	stops.pushFunc(func() { stopStats(); <-statsDone })
	// One policy layer (access, quotas, batch rules) under every API.
	svc := service.New(service.Config{Engine: engine, Logger: log, NATSDeliverySubjects: cfg.NATSDeliverySubjects, KafkaDeliveryTopics: cfg.Kafka.DeliveryTopics, Encryption: sealed})
	api := httptransport.New(httptransport.Config{
		Engine:               engine,
		Service:              svc,
		Logger:               log,
		Tokens:               acc.tokens,
		ProtectMetrics:       cfg.Access.ProtectMetrics,
		BodyReadTimeout:      cfg.HTTP.BodyReadTimeout,
		AllowedHosts:         cfg.HTTP.AllowedHosts,
		TrustedOrigins:       cfg.HTTP.TrustedOrigins,
		NATSDeliverySubjects: cfg.NATSDeliverySubjects,
		BackupDir:            backupDir,
		Backup:               backup,
		Stats:                stats,
	})
	api.Handle("GET /metrics", obs.metrics())
	if !cfg.Roles.has(roleAPI) {
		log.Info("no api role: serving /healthz, /readyz and /metrics only", "roles", strings.Join(cfg.Roles, ","))
		return serveHTTP(ctx, cfg, log, healthOnly(api), ln, acc, stops), nil
	}
	mountUI(api, cfg, acc, ln.Addr(), log)
	// WebSocket subscribers and the gRPC API (gRPC, gRPC-Web and Connect:
	// HTTP/2 without TLS, h2c, as gRPC clients speak) share the listener.
	subscribers, err := wstransport.New(wstransport.Config{
		Engine:          engine,
		Logger:          log,
		SubscribersFunc: obs.subscribers(),
		MaxSubscribers:  cfg.HTTP.MaxSubscribers,
		OriginPatterns:  cfg.HTTP.TrustedOrigins,
	})
	if err != nil {
		return nil, err
	}
	grpcAPI, err := connecttransport.New(connecttransport.Config{
		Engine:               engine,
		Service:              svc,
		Logger:               log,
		Tokens:               acc.tokens,
		NATSDeliverySubjects: cfg.NATSDeliverySubjects,
		MaxSubscribers:       cfg.HTTP.MaxSubscribers,
	})
	if err != nil {
		return nil, err
	}
	subscribers.Register(api)
	grpcAPI.Register(api)
	// NATS intake uses the NATS connection openStore gave (the NATS
	// backend's, or startNATS's); it starts before the HTTP server, the
	// last thing that can fail, and stops first.
	var natsIn *natstransport.Intake
	if natsConn != nil {
		natsIn, err = natstransport.NewIntake(natstransport.IntakeConfig{Conn: natsConn, Engine: engine, Service: svc, Logger: log})
		if err == nil {
			err = natsIn.Start(ctx)
		}
		if err != nil {
			return nil, err
		}
		log.Info("nats intake listening", "push", natsIn.PushSubject("<topic>"), "cancel", natsIn.CancelSubject())
	}
	if err := startKafkaIntake(ctx, cfg, log, engine, svc, obs, stops); err != nil {
		return nil, err
	}
	// http.Server.Shutdown does not wait for WebSocket connections: their
	// stop, after it, waits until each released what it held.
	stops.push("websocket subscribers still closing at the shutdown timeout", subscribers.Stop)
	serveErr := serveHTTP(ctx, cfg, log, api, ln, acc, stops)
	// gRPC streams end before the HTTP server's shutdown, which would wait
	// for them.
	stops.push("grpc subscribers still closing at the shutdown timeout", grpcAPI.Stop)
	if natsIn != nil {
		stops.push("nats intake stopped before answering every message it had received", natsIn.Stop)
	}
	return serveErr, nil
}

// serveHTTP serves api on ln until the shutdown, whose stop it pushes:
// requests run under a context that the shutdown cancels after drainGrace
// (which ends long-polling claims and subscriptions), then the server
// closes what is left. It returns the server's end.
func serveHTTP(ctx context.Context, cfg *serveConfig, log *slog.Logger, api http.Handler, ln net.Listener, acc *access, stops *stopStack) <-chan error {
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	// No ReadTimeout or WriteTimeout: they would cut long-polling claims,
	// exports and WebSocket subscribers. The API sets each request's body
	// read and write deadlines itself (--body-read-timeout).
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		Protocols:         new(http.Protocols),
		// An HTTP/2 connection that does not answer a ping is closed, so
		// that a gRPC stream to a peer that vanished ends and releases its
		// deliveries, as a WebSocket subscriber's does.
		// Streams per connection are capped so that one connection (h2c
		// gets around --max-connections with streams) cannot hold many
		// requests' bodies at once.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 20 * time.Second, PingTimeout: 10 * time.Second, MaxConcurrentStreams: maxStreamsPerConnection},
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	serveErr := make(chan error, 1)
	go func() { serveErr <- acc.serve(srv, ln) }()
	stops.push("http shutdown incomplete; connections closed", func(ctx context.Context) error {
		grace := time.AfterFunc(min(drainGrace, cfg.ShutdownTimeout/2), cancelBase)
		defer grace.Stop()
		defer cancelBase()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
			return err
		}
		return nil
	})
	log.Info("http listening", "addr", ln.Addr().String(), "tls", acc.tls != nil, "max_connections", cfg.HTTP.MaxConnections)
	acc.logStart(log, ln.Addr())
	return serveErr
}

// drain is the first step of a shutdown, bounded by timeout (none when 0)
// and by ctx: the engine refuses claims and /readyz answers 503, so that
// consumers and load balancers turn to other instances; the engine stops
// its push deliveries, letting those in flight finish; the deliveries it
// made to consumers (pull, WebSocket, gRPC) get to be settled. The API
// serves everything else meanwhile: pushes, reads, and those acks. What is
// still in flight at its end is released by the rest of the shutdown.
func drain(ctx context.Context, timeout time.Duration, engine *core.Engine, log *slog.Logger) {
	if timeout <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	log.Info("draining", "timeout", timeout)
	engine.Drain()
	if err := engine.Stop(ctx); err != nil {
		log.Warn("deliveries still running at the end of the drain were released for redelivery", "err", err)
	}
	if err := engine.WaitSettled(ctx); err != nil {
		log.Warn("consumers still held deliveries at the end of the drain; they are released or expire", "err", err)
		return
	}
	log.Info("drained")
}

// openStore opens the configured backend and returns the store, the NATS
// connection of the NATS transports (nil when NATS is off), and the
// function that closes the store and then the NATS connection and server.
//
// A NATS backend carries the NATS transports on its own server; every
// other backend's branch calls withNATS (startNATS) for them, before it
// opens its store so that NATS closes after the store.
func openStore(ctx context.Context, cfg *serveConfig, log *slog.Logger, logTo io.Writer) (core.Store, *nats.Conn, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (core.Store, *nats.Conn, func(), error) {
		closeAll()
		return nil, nil, nil, err
	}
	var natsConn *nats.Conn
	withNATS := func(storeDir string) error {
		conn, closeNATS, err := startNATS(cfg, log, logTo, storeDir)
		if err != nil {
			return err
		}
		natsConn = conn
		closers = append(closers, closeNATS)
		return nil
	}

	switch cfg.Backend {
	case backendJetStream, backendNATS:
		return openNATSStore(ctx, cfg, log, logTo)
	case backendLocal:
		if err := checkDataDir(cfg.DataDir, backendLocal); err != nil {
			return fail(err)
		}
		if err := withNATS(filepath.Join(cfg.DataDir, natsDir)); err != nil {
			return fail(err)
		}
		interval, _ := time.ParseDuration(cfg.Sync) // "always" gives 0: the default, unused
		store, err := pebblestore.Open(pebblestore.Config{
			Dir:              filepath.Join(cfg.DataDir, localDir),
			Clock:            instanceClock(),
			Retention:        cfg.Retention,
			RetentionMaxJobs: cfg.RetentionMaxJobs,
			SyncAlways:       cfg.Sync == "always",
			SyncInterval:     interval,
			DiskReserve:      int64(cfg.DiskReserve),
			Logger:           log,
		})
		if err != nil {
			return fail(fmt.Errorf("local store: %w", err))
		}
		log.Info("local store opened", "dir", filepath.Join(cfg.DataDir, localDir), "sync", cfg.Sync,
			"retention", cfg.Retention, "retention_max_jobs", cfg.RetentionMaxJobs, "disk_reserve", formatBytes(cfg.DiskReserve))
		closers = append(closers, func() { closeStore(store, log) })
		return store, natsConn, closeAll, nil
	case backendMemory:
		// The store keeps nothing across a restart; nor does its NATS.
		if err := withNATS(""); err != nil {
			return fail(err)
		}
		log.Warn("memory backend: jobs are lost when the process exits")
		store := memstore.New(memstore.Config{Clock: instanceClock(), Retention: cfg.Retention})
		closers = append(closers, func() { closeStore(store, log) })
		return store, natsConn, closeAll, nil
	case backendRedis:
		if err := withNATS(filepath.Join(cfg.DataDir, natsDir)); err != nil {
			return fail(err)
		}
		client, err := redisstore.ParseURL(cfg.RedisURL)
		if err != nil {
			return fail(fmt.Errorf("--redis-url: %w", err))
		}
		closers = append(closers, func() { _ = client.Close() })
		store, err := waitForBackend(ctx, log, cfg.BackendWait, func() (*redisstore.Store, error) {
			form := cfg.RedisJobs
			if form == redisJobsAuto {
				form = ""
			}
			return redisstore.New(ctx, redisstore.Config{Client: client, Clock: instanceClock(), Retention: cfg.Retention, Logger: log,
				WaitReplicas: cfg.RedisWaitReplicas, WaitTimeout: cfg.RedisWaitTimeout, JobForm: form})
		})
		if err != nil {
			return fail(fmt.Errorf("redis store: %w", err))
		}
		log.Info("redis connected", "url", redactURL(cfg.RedisURL))
		warnRedis(ctx, cfg, log, client)
		closers = append(closers, func() { closeStore(store, log) })
		return store, natsConn, closeAll, nil
	}
	return fail(fmt.Errorf("backend %q is not available", cfg.Backend))
}

// warnRedis warns at start of what would lose jobs or split a deployment
// on the redis backend: a Redis without an append-only file, whose restart
// loses what was written since its last snapshot; and the in-process NATS
// server, which is this instance's alone, so that instances sharing the
// Redis would split NATS intake and delivery between their servers. No
// registry of instances says whether others share the Redis, so the
// second warning is given whenever it could apply. A Redis that refuses
// CONFIG (a managed one) is not checked, with a debug line.
func warnRedis(ctx context.Context, cfg *serveConfig, log *slog.Logger, client redis.UniversalClient) {
	aof, err := redisstore.AppendOnly(ctx, client)
	switch {
	case err != nil:
		log.Debug("redis: cannot read appendonly; not checking that Redis keeps an append-only file", "err", err)
	case !aof:
		log.Warn("redis keeps no append-only file (appendonly no): a restart or crash of Redis loses every job written since its last snapshot, answered ones too; "+
			"turn it on with CONFIG SET appendonly yes and appendonly yes in redis.conf (docs/backends.md)", "url", redactURL(cfg.RedisURL))
	}
	if cfg.NATSURL == "" && cfg.NATSListen != natsOff {
		log.Warn("nats: this instance serves NATS intake and delivery from its own in-process server; "+
			"several instances sharing this Redis must all name one NATS with --nats-url, or each publishes NATS deliveries on its own server and the subscribers of one see only some of them",
			"listen", cfg.NATSListen)
	}
}

// openNATSStore opens the NATS JetStream store, on the embedded server or
// an external NATS, and returns it with its connection for the NATS
// transports (nil with --nats-listen off) and the function that closes the
// store, the connection and the embedded server.
func openNATSStore(ctx context.Context, cfg *serveConfig, log *slog.Logger, logTo io.Writer) (core.Store, *nats.Conn, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (core.Store, *nats.Conn, func(), error) {
		closeAll()
		return nil, nil, nil, err
	}

	off := cfg.NATSListen == natsOff
	var conn *nats.Conn
	if cfg.Backend == backendJetStream {
		if err := checkDataDir(cfg.DataDir, backendJetStream); err != nil {
			return fail(err)
		}
		if cfg.NATSURL != "" {
			log.Warn("--nats-url does not apply to --backend jetstream; its NATS server is in process", "url", redactURLs(cfg.NATSURL))
		}
		listen := ""
		if !off {
			if err := checkListen(cfg.NATSListen); err != nil {
				return fail(fmt.Errorf("--nats-listen: %w", err))
			}
			listen = cfg.NATSListen
		}
		embCfg := natsstore.EmbeddedConfig{
			DataDir:        cfg.DataDir,
			Listen:         listen,
			NoListen:       off,
			Sync:           cfg.Sync,
			Logger:         natsServerLogger(cfg, logTo),
			ClientUser:     cfg.NATSClientUser,
			ClientPassword: cfg.NATSClientPassword,
		}
		if cfg.DiskReserve > 0 {
			// The store's reserve guards the disk (natsstore.Config.DiskReserve):
			// nats-server's default limit, three quarters of the free space
			// at start, would refuse every write, acks' too, before it.
			embCfg.MaxStore = natsstore.MaxStoreNone
		}
		emb, err := natsstore.StartEmbedded(embCfg)
		if err != nil {
			return fail(fmt.Errorf("embedded nats: %w", err))
		}
		closers = append(closers, func() {
			emb.Shutdown()
			log.Info("embedded nats stopped")
		})
		if !off {
			logNATSListening(log, emb)
		}
		if conn, err = emb.Connect(); err != nil {
			return fail(fmt.Errorf("embedded nats: connect: %w", err))
		}
	} else {
		var err error
		if conn, err = connectNATS(cmp.Or(cfg.NATSURL, natsURLDefault), log); err != nil {
			return fail(err)
		}
	}
	closers = append(closers, conn.Close)

	storeCfg := natsstore.Config{
		Conn:      conn,
		Replicas:  cfg.NATSReplicas,
		Upgrade:   cfg.NATSUpgrade,
		Retention: cfg.Retention,
		Clock:     instanceClock(),
		Logger:    log,
	}
	if cfg.Backend == backendJetStream {
		// Only the in-process server's disk is delayq's to watch.
		storeCfg.DiskDir, storeCfg.DiskReserve = cfg.DataDir, int64(cfg.DiskReserve)
	}
	wait := cfg.BackendWait
	if cfg.Backend == backendJetStream {
		wait = 0 // its server is this process's, up already
	}
	store, err := waitForBackend(ctx, log, wait, func() (*natsstore.Store, error) { return natsstore.New(ctx, storeCfg) })
	if err != nil {
		return fail(fmt.Errorf("nats store: %w", err))
	}
	if cfg.Backend == backendJetStream {
		log.Info("jetstream store opened", "dir", cfg.DataDir, "sync", cfg.Sync, "disk_reserve", formatBytes(cfg.DiskReserve))
	}
	closers = append(closers, func() { closeStore(store, log) })
	if off {
		logNATSOff(log)
		return store, nil, closeAll, nil
	}
	return store, conn, closeAll, nil
}

// startNATS gives a backend that is not NATS the connection of its NATS
// transports, and the function that closes it:
//
//   - with --nats-url, a connection to that NATS (credentials in the URL);
//   - with --nats-listen off, none: a nil connection, and NATS intake and
//     delivery are off;
//   - else delayq's in-process NATS server (natsserver, as the embedded
//     backend's) with JetStream, its files in storeDir (a temporary
//     directory removed at exit when empty), serving clients on
//     --nats-listen as --nats-client-user with the password of
//     --nats-client-password or the one kept in --data, and an in-process
//     connection to it; close closes both.
//
// A new backend's branch of openStore calls it (through withNATS) with the
// directory of its NATS files: filepath.Join(cfg.DataDir, natsDir) where
// the backend keeps files in --data, "" where it keeps none.
func startNATS(cfg *serveConfig, log *slog.Logger, logTo io.Writer, storeDir string) (*nats.Conn, func(), error) {
	if cfg.NATSURL != "" {
		conn, err := connectNATS(cfg.NATSURL, log)
		if err != nil {
			return nil, nil, err
		}
		return conn, conn.Close, nil
	}
	if cfg.NATSListen == natsOff {
		logNATSOff(log)
		return nil, func() {}, nil
	}
	if err := checkListen(cfg.NATSListen); err != nil {
		return nil, nil, fmt.Errorf("--nats-listen: %w", err)
	}
	srv, err := natsserver.Start(natsserver.Config{
		StoreDir:       storeDir,
		PasswordDir:    cfg.DataDir,
		Listen:         cfg.NATSListen,
		Sync:           cfg.Sync,
		Logger:         natsServerLogger(cfg, logTo),
		ClientUser:     cfg.NATSClientUser,
		ClientPassword: cfg.NATSClientPassword,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	logNATSListening(log, srv)
	conn, err := srv.Connect()
	if err != nil {
		srv.Shutdown()
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	return conn, func() {
		conn.Close()
		srv.Shutdown()
		log.Info("nats stopped")
	}, nil
}

// connectNATS connects to the NATS at url (comma-separated URLs of a
// cluster, credentials in them), reconnecting for ever once connected.
// A publish while it reconnects fails rather than waiting in nats.go's
// buffer: sent after the reconnect, a write answered 503 at once would
// take effect seconds later (a history run found one).
func connectNATS(url string, log *slog.Logger) (*nats.Conn, error) {
	conn, err := nats.Connect(url, nats.Name("delayq"), nats.MaxReconnects(-1), nats.ReconnectBufSize(-1))
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %w", redactURLs(url), err)
	}
	log.Info("nats connected", "url", conn.ConnectedUrlRedacted())
	return conn, nil
}

// natsServerLogger is the logger of the in-process nats-server's lines.
func natsServerLogger(cfg *serveConfig, logTo io.Writer) *slog.Logger {
	return newLogger(cfg, logTo, natsServerLevel(cfg.LogLevel)).With("component", "nats-server")
}

// logNATSListening logs where the in-process NATS server serves clients,
// where its files are, and its client user with where the password is,
// never the password.
func logNATSListening(log *slog.Logger, srv *natsserver.Embedded) {
	password := slog.String("password", "given by --nats-client-password")
	if file := srv.ClientPasswordFile(); file != "" {
		if abs, err := filepath.Abs(file); err == nil {
			file = abs
		}
		password = slog.String("password_file", file)
	}
	log.Info("nats listening", "url", srv.ClientURL(), "data", srv.StoreDir(), "user", srv.ClientUser(), password)
}

// logNATSOff logs that NATS intake and delivery are off.
func logNATSOff(log *slog.Logger) {
	log.Info("nats off: no NATS intake, cancel or delivery (--nats-listen off)")
}

// redactURLs hides the passwords of comma-separated URLs for logs and
// errors.
func redactURLs(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		parts[i] = redactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// checkListen fails fast when a fixed address cannot be bound (in use, say),
// which the embedded server would otherwise report only by not becoming
// ready. Free ports (0, -1) are not checked.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" || port == "-1" {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// closeStore closes a store, logging a failure.
func closeStore(store core.Store, log *slog.Logger) {
	if err := store.Close(); err != nil {
		log.Warn("store close", "err", err)
		return
	}
	log.Info("store closed")
}

// redactURL hides a URL's password for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// instanceName is the name of this instance in jobs' trails: name
// (--instance-name), or the host name when empty, which stays across
// restarts; none when the system has no host name.
func instanceName(name string) string {
	if name != "" {
		return name
	}
	host, _ := os.Hostname()
	return host
}
