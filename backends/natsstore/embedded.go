package natsstore

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/delayq/delayq/core"
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
	// ClientUserDefault is the user of producers and consumers unless
	// EmbeddedConfig.ClientUser says otherwise.
	ClientUserDefault = "delayq-client"
	// ClientPasswordFile is the file in EmbeddedConfig.DataDir that keeps
	// the client password made at first start, readable by its owner only.
	ClientPasswordFile = "nats-client-password"
	// ClientPasswordMinLen is the shortest client password accepted.
	ClientPasswordMinLen = 16
	// OwnInboxPrefix is the inbox prefix of Connect's connections: the
	// answers to delayq's JetStream calls travel under it, where clients
	// may not subscribe.
	OwnInboxPrefix = "_DELAYQ_INBOX"
	// ownUser is delayq's own user, with every permission; its password is
	// made at each start and never leaves the process.
	ownUser = "delayq"
)

// ClientPublishDefault are the subjects clients may publish to unless
// EmbeddedConfig.ClientPublish says otherwise: natstransport's intake
// subjects with its default prefix.
var ClientPublishDefault = []string{"delayq.push.>", "delayq.cancel"}

// systemSubjects are the subjects of the server's own APIs (JetStream, its
// clustering, KV and object stores, the system account), which clients may
// not use.
var systemSubjects = []string{"$JS.>", "$JSC.>", "$NRG.>", "$KV.>", "$O.>", "$SYS.>"}

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
	// ClientUser is the user name of producers and consumers. The server
	// accepts only it and delayq's own in-process user.
	//
	// Defaults to ClientUserDefault ("delayq-client").
	ClientUser string
	// ClientPassword is ClientUser's password, at least
	// ClientPasswordMinLen bytes. Empty: the one in DataDir's
	// ClientPasswordFile, made there at first start (mode 0600).
	ClientPassword string
	// ClientPublish are the subject patterns clients may publish to; they
	// may not subscribe to them (so that none joins the intake's queue
	// group). Clients may subscribe to every other subject but the store's
	// (StorePrefix), the server's APIs ($JS, $KV, $SYS...) and
	// OwnInboxPrefix, and may publish to nothing else: no JetStream.
	//
	// Defaults to ClientPublishDefault (delayq.push.> and delayq.cancel).
	ClientPublish []string
	// StorePrefix is the Config.Prefix of the stores that use this server,
	// whose subjects clients may neither publish nor subscribe to.
	//
	// Defaults to PrefixDefault ("delayq").
	StorePrefix string
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c EmbeddedConfig) WithDefaults() EmbeddedConfig {
	c.Listen = cmp.Or(c.Listen, ListenDefault)
	c.Sync = cmp.Or(c.Sync, SyncDefault)
	c.ClientUser = cmp.Or(c.ClientUser, ClientUserDefault)
	if c.ClientPublish == nil {
		c.ClientPublish = slices.Clone(ClientPublishDefault)
	}
	c.StorePrefix = cmp.Or(c.StorePrefix, PrefixDefault)
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
	switch {
	case core.ValidateID(c.ClientUser) != nil:
		return fmt.Errorf("natsstore: embedded: ClientUser %q must be of [A-Za-z0-9_-]", c.ClientUser)
	case c.ClientUser == ownUser:
		return fmt.Errorf("natsstore: embedded: ClientUser %q is delayq's own", c.ClientUser)
	case c.ClientPassword != "" && len(c.ClientPassword) < ClientPasswordMinLen:
		return fmt.Errorf("natsstore: embedded: ClientPassword must be at least %d characters", ClientPasswordMinLen)
	case strings.ContainsFunc(c.ClientPassword, unicode.IsSpace):
		return errors.New("natsstore: embedded: ClientPassword must not contain spaces")
	case core.ValidateID(c.StorePrefix) != nil:
		return fmt.Errorf("natsstore: embedded: StorePrefix %q must be one token of [A-Za-z0-9_-]", c.StorePrefix)
	}
	for _, p := range c.ClientPublish {
		if p == "" || strings.ContainsFunc(p, unicode.IsSpace) {
			return fmt.Errorf("natsstore: embedded: ClientPublish: bad subject %q", p)
		}
	}
	return nil
}

// Embedded is an in-process nats-server with JetStream enabled that
// accepts two users: delayq's own (Connect), with every permission, and
// the clients' (EmbeddedConfig.ClientUser), who may push and cancel and
// receive deliveries, nothing more. Create it with StartEmbedded and stop
// it with Shutdown.
type Embedded struct {
	srv            *server.Server
	ownPassword    string
	clientUser     string
	clientPassword string
	passwordFile   string
}

// StartEmbedded starts an in-process nats-server with JetStream file storage
// in cfg.DataDir, serving NATS on cfg.Listen to the users of Embedded, and
// returns once it accepts connections. Errors: an invalid configuration, a
// listen address in use, a data directory that cannot be used, a client
// password file that cannot be read or written or that others may read, or
// a server that is not ready within 30 seconds (a large store takes a while
// to recover).
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Embedded{ownPassword: rand.Text(), clientUser: cfg.ClientUser, clientPassword: cfg.ClientPassword}
	if e.clientPassword == "" {
		var err error
		e.passwordFile = filepath.Join(cfg.DataDir, ClientPasswordFile)
		if e.clientPassword, err = loadClientPassword(cfg.DataDir, e.passwordFile); err != nil {
			return nil, fmt.Errorf("natsstore: embedded: %w", err)
		}
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
		Users: []*server.User{
			{Username: ownUser, Password: e.ownPassword},
			{Username: cfg.ClientUser, Password: e.clientPassword, Permissions: clientPermissions(cfg)},
		},
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
	e.srv = srv
	return e, nil
}

// clientPermissions are what the client user may do: publish to
// cfg.ClientPublish (with inbox replies, which need no permission), and
// subscribe to any subject but those, the store's, the server's APIs and
// delayq's own inbox. A deny also filters what a wildcard subscription
// (">") receives.
func clientPermissions(cfg EmbeddedConfig) *server.Permissions {
	deny := slices.Concat(cfg.ClientPublish, newNames(cfg.StorePrefix).streamSubjects(), systemSubjects, []string{OwnInboxPrefix + ".>"})
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Clone(cfg.ClientPublish)},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: deny},
	}
}

// loadClientPassword returns the password kept in file, or makes one and
// keeps it there (mode 0600) when the file does not exist. A file that
// others may read is refused rather than used.
func loadClientPassword(dir, file string) (string, error) {
	data, err := os.ReadFile(file)
	switch {
	case err == nil:
		info, err := os.Stat(file)
		if err != nil {
			return "", err
		}
		if info.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("%s may be read by others (mode %04o); make it 0600", file, info.Mode().Perm())
		}
		pw := strings.TrimSpace(string(data))
		if len(pw) < ClientPasswordMinLen || strings.ContainsFunc(pw, unicode.IsSpace) {
			return "", fmt.Errorf("%s must hold one password of at least %d characters", file, ClientPasswordMinLen)
		}
		return pw, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	pw := rand.Text()
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(pw + "\n")
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(file)
		return "", err
	}
	return pw, nil
}

// Server returns the nats-server.
func (e *Embedded) Server() *server.Server { return e.srv }

// ClientURL returns the URL where the server serves NATS clients, with the
// port actually bound and without credentials.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// ClientUser returns the user name of producers and consumers.
func (e *Embedded) ClientUser() string { return e.clientUser }

// ClientPasswordFile returns the file that holds the client password, ""
// when EmbeddedConfig.ClientPassword gave it.
func (e *Embedded) ClientPasswordFile() string { return e.passwordFile }

// Connect returns a new in-process connection to the server (no TCP, no
// loopback) as delayq's own user, with every permission and inboxes under
// OwnInboxPrefix. The caller closes it. Options are applied after those
// and a name.
func (e *Embedded) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.InProcessServer(e.srv),
		nats.UserInfo(ownUser, e.ownPassword),
		nats.CustomInboxPrefix(OwnInboxPrefix),
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
func (l *serverLogger) Warnf(format string, v ...any) {
	// The server warns at every start that its users' passwords are plain
	// text: they live only in this process's memory, and bcrypt would make
	// every client connection pay for a hash, so the warning says nothing
	// an operator can act on.
	if format == plaintextPasswordsWarning {
		l.log.Debug(format)
		return
	}
	l.log.Warn(fmt.Sprintf(format, v...))
}

// plaintextPasswordsWarning is nats-server's warning about users with
// plain-text passwords (server/auth.go).
const plaintextPasswordsWarning = "Plaintext passwords detected, use nkeys or bcrypt"

func (l *serverLogger) Fatalf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Errorf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
