package natsstore

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Embedded server defaults.
const (
	// ListenDefault is where the embedded server serves NATS unless
	// EmbeddedConfig.Listen says otherwise.
	ListenDefault = "127.0.0.1:4222"
	// SyncDefault is how often the embedded server fsyncs its file store
	// unless EmbeddedConfig.Sync says otherwise: every second, like Redis'
	// appendfsync everysec. See the package documentation for what each
	// setting keeps on a power cut.
	SyncDefault = "1s"
	// SyncAlways makes the embedded server fsync every write before it
	// answers.
	SyncAlways = "always"
)

// EmbeddedConfig configures an in-process nats-server with JetStream file
// storage.
type EmbeddedConfig struct {
	// DataDir is where JetStream keeps its files. Required.
	DataDir string
	// Listen is the host:port where the server also serves NATS clients.
	// Port -1 picks a free port (tests); ClientURL tells which.
	//
	// Defaults to ListenDefault (127.0.0.1:4222).
	Listen string
	// Sync is SyncAlways ("always": fsync every write) or a Go duration
	// between fsyncs of the file store, such as "1s".
	//
	// Defaults to SyncDefault ("1s").
	Sync string
	// Logger receives the server's log lines; nil discards them.
	Logger *slog.Logger
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c EmbeddedConfig) WithDefaults() EmbeddedConfig {
	c.Listen = cmp.Or(c.Listen, ListenDefault)
	c.Sync = cmp.Or(c.Sync, SyncDefault)
	return c
}

// Validate checks the configuration and names the bad field.
func (c EmbeddedConfig) Validate() error {
	if c.DataDir == "" {
		return errors.New("natsstore: embedded: DataDir is required")
	}
	if _, _, err := splitListen(c.Listen); err != nil {
		return fmt.Errorf("natsstore: embedded: Listen: %w", err)
	}
	if _, _, err := parseSync(c.Sync); err != nil {
		return fmt.Errorf("natsstore: embedded: Sync: %w", err)
	}
	return nil
}

// Embedded is an in-process nats-server with JetStream enabled. Create it
// with StartEmbedded and stop it with Shutdown.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts an in-process nats-server with JetStream file storage
// in cfg.DataDir, serving NATS on cfg.Listen, and returns once it accepts
// connections. Errors: an invalid configuration, a listen address in use, a
// data directory that cannot be used, or a server that is not ready within
// 30 seconds (a large store takes a while to recover).
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, port, _ := splitListen(cfg.Listen)
	always, interval, _ := parseSync(cfg.Sync)
	opts := &server.Options{
		ServerName:   "delayq",
		Host:         host,
		Port:         port,
		JetStream:    true,
		StoreDir:     cfg.DataDir,
		SyncAlways:   always,
		SyncInterval: interval,
		NoSigs:       true,
		NoLog:        cfg.Logger == nil,
		// Schedules, leases and holds make many small messages; the
		// default 1 MiB max payload is plenty, the pending limit is not.
		MaxPending: 256 << 20,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsstore: embedded: %w", err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(&serverLogger{log: cfg.Logger}, false, false, false)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("natsstore: embedded: server not ready after 30s")
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		return nil, errors.New("natsstore: embedded: JetStream did not start")
	}
	return &Embedded{srv: srv}, nil
}

// Server returns the nats-server.
func (e *Embedded) Server() *server.Server { return e.srv }

// ClientURL returns the URL where the server serves NATS clients, with the
// port actually bound.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Connect returns a new in-process connection to the server: no TCP, no
// loopback. The caller closes it. Options are applied after the in-process
// one and a name.
func (e *Embedded) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.InProcessServer(e.srv),
		nats.Name("delayq"),
		nats.MaxReconnects(-1),
	}, opts...)
	nc, err := nats.Connect("", all...)
	if err != nil {
		return nil, fmt.Errorf("natsstore: embedded: connect: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped, flushing its
// file store. Idempotent.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// splitListen parses host:port; port -1 means any free port.
func splitListen(listen string) (string, int, error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// parseSync parses EmbeddedConfig.Sync.
func parseSync(s string) (always bool, interval time.Duration, err error) {
	if s == SyncAlways {
		return true, 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return false, 0, fmt.Errorf("want %q or a duration: %w", SyncAlways, err)
	}
	if d <= 0 {
		return false, 0, fmt.Errorf("sync interval %s must be positive", d)
	}
	return false, d, nil
}

// serverLogger sends nats-server's log lines to slog.
type serverLogger struct{ log *slog.Logger }

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Info(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
