package natsserver

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
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

// Defaults and names.
const (
	// ListenDefault is where the server serves NATS clients unless
	// Config.Listen says otherwise.
	ListenDefault = "127.0.0.1:4222"
	// SyncDefault is how often the server fsyncs its JetStream files unless
	// Config.Sync says otherwise: every second, like Redis' appendfsync
	// everysec.
	SyncDefault = "1s"
	// SyncAlways makes the server fsync every JetStream write before it
	// answers.
	SyncAlways = "always"
	// ClientUserDefault is the user of producers and consumers unless
	// Config.ClientUser says otherwise.
	ClientUserDefault = "delayq-client"
	// ClientPasswordFile is the file in Config.PasswordDir that keeps the
	// client password made at first start, readable by its owner only.
	ClientPasswordFile = "nats-client-password"
	// ClientPasswordMinLen is the shortest client password accepted.
	ClientPasswordMinLen = 16
	// OwnInboxPrefix is the inbox prefix of Connect's connections: the
	// answers to delayq's own requests (JetStream calls) travel under it,
	// where clients may not subscribe.
	OwnInboxPrefix = "_DELAYQ_INBOX"
	// OwnUser is delayq's own user, with every permission; its password is
	// made at each start and never leaves the process.
	OwnUser = "delayq"
)

// ClientPublishDefault are the subjects clients may publish to unless
// Config.ClientPublish says otherwise: natstransport's intake subjects with
// its default prefix.
var ClientPublishDefault = []string{"delayq.push.>", "delayq.cancel"}

// systemSubjects are the subjects of the server's own APIs (JetStream, its
// clustering, KV and object stores, the system account), which clients may
// not use.
var systemSubjects = []string{"$JS.>", "$JSC.>", "$NRG.>", "$KV.>", "$O.>", "$SYS.>"}

// Config configures an in-process nats-server with JetStream.
type Config struct {
	// StoreDir is where JetStream keeps its files. Empty: a temporary
	// directory of its own, which Shutdown removes.
	StoreDir string
	// PasswordDir is the directory of ClientPasswordFile, which keeps the
	// client password when ClientPassword is empty. Required then, unless
	// NoListen.
	PasswordDir string
	// Listen is the host:port where the server serves NATS clients. Port 0
	// or -1 picks a free port; ClientURL tells which. Not used with
	// NoListen.
	//
	// Defaults to ListenDefault (127.0.0.1:4222).
	Listen string
	// NoListen makes a server that serves no NATS clients: it takes only
	// Connect's in-process connections, and has no client user.
	NoListen bool
	// Sync is SyncAlways ("always": fsync every write) or a Go duration
	// between fsyncs of the JetStream files, such as "1s".
	//
	// Defaults to SyncDefault ("1s").
	Sync string
	// Logger receives the server's log lines; nil discards them.
	Logger *slog.Logger
	// ClientUser is the user name of producers and consumers. The server
	// accepts only it and OwnUser.
	//
	// Defaults to ClientUserDefault ("delayq-client").
	ClientUser string
	// ClientPassword is ClientUser's password, at least
	// ClientPasswordMinLen bytes. Empty: the one in PasswordDir's
	// ClientPasswordFile, made there at first start (mode 0600).
	ClientPassword string
	// ClientPublish are the subject patterns clients may publish to; they
	// may not subscribe to them (so that none joins the intake's queue
	// group). Clients may subscribe to every other subject but ClientDeny,
	// the server's APIs ($JS, $KV, $SYS...) and OwnInboxPrefix, and may
	// publish to nothing else: no JetStream.
	//
	// Defaults to ClientPublishDefault (delayq.push.> and delayq.cancel).
	ClientPublish []string
	// ClientDeny are more subject patterns that clients may neither
	// publish nor subscribe to: the subjects of a store kept in this
	// server, say.
	ClientDeny []string
	// MaxStore is JetStream's storage limit in bytes (nats-server's
	// max_file_store): past it the server refuses every write, an ack's
	// too, until messages go. MaxStoreNone sets none, for a store that
	// guards the disk itself. Zero: nats-server's default, three quarters
	// of the disk's free space at start plus what its streams hold then.
	MaxStore int64
}

// MaxStoreNone is the Config.MaxStore of a server without a storage limit
// of its own.
const MaxStoreNone = math.MaxInt64

// WithDefaults returns the configuration with every unset field at its
// default.
func (c Config) WithDefaults() Config {
	c.Listen = cmp.Or(c.Listen, ListenDefault)
	c.Sync = cmp.Or(c.Sync, SyncDefault)
	c.ClientUser = cmp.Or(c.ClientUser, ClientUserDefault)
	if c.ClientPublish == nil {
		c.ClientPublish = slices.Clone(ClientPublishDefault)
	}
	return c
}

// Validate checks the configuration and names the bad field.
func (c Config) Validate() error {
	if _, _, err := splitListen(c.Listen); err != nil && !c.NoListen {
		return fmt.Errorf("natsserver: Listen: %w", err)
	}
	if _, _, err := parseSync(c.Sync); err != nil {
		return fmt.Errorf("natsserver: Sync: %w", err)
	}
	switch {
	case core.ValidateID(c.ClientUser) != nil:
		return fmt.Errorf("natsserver: ClientUser %q must be of [A-Za-z0-9_-]", c.ClientUser)
	case c.ClientUser == OwnUser:
		return fmt.Errorf("natsserver: ClientUser %q is delayq's own", c.ClientUser)
	case c.ClientPassword != "" && len(c.ClientPassword) < ClientPasswordMinLen:
		return fmt.Errorf("natsserver: ClientPassword must be at least %d characters", ClientPasswordMinLen)
	case strings.ContainsFunc(c.ClientPassword, unicode.IsSpace):
		return errors.New("natsserver: ClientPassword must not contain spaces")
	case !c.NoListen && c.ClientPassword == "" && c.PasswordDir == "":
		return errors.New("natsserver: PasswordDir is required without ClientPassword")
	case c.MaxStore < 0:
		return fmt.Errorf("natsserver: MaxStore %d must not be negative", c.MaxStore)
	}
	for _, p := range slices.Concat(c.ClientPublish, c.ClientDeny) {
		if p == "" || strings.ContainsFunc(p, unicode.IsSpace) {
			return fmt.Errorf("natsserver: bad subject %q in ClientPublish or ClientDeny", p)
		}
	}
	return nil
}

// Embedded is an in-process nats-server with JetStream enabled that
// accepts two users: delayq's own (Connect), with every permission, and
// the clients' (Config.ClientUser), who may push and cancel and receive
// deliveries, nothing more. Create it with Start and stop it with
// Shutdown.
type Embedded struct {
	srv            *server.Server
	storeDir       string
	tempDir        string // storeDir when Start made it; removed by Shutdown
	ownPassword    string
	clientUser     string
	clientPassword string
	passwordFile   string
}

// Start starts an in-process nats-server with JetStream files in
// cfg.StoreDir, serving NATS on cfg.Listen to the users of Embedded (or to
// no client with cfg.NoListen), and returns once it accepts connections.
// Errors: an invalid configuration, a listen address in use, a store or
// password directory that cannot be used, a client password file that
// cannot be read or written or that others may read, or a server that is
// not ready within 30 seconds (a large store takes a while to recover).
func Start(cfg Config) (*Embedded, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Embedded{ownPassword: rand.Text(), storeDir: cfg.StoreDir}
	users := []*server.User{{Username: OwnUser, Password: e.ownPassword}}
	if !cfg.NoListen {
		e.clientUser, e.clientPassword = cfg.ClientUser, cfg.ClientPassword
		if e.clientPassword == "" {
			var err error
			e.passwordFile = filepath.Join(cfg.PasswordDir, ClientPasswordFile)
			if e.clientPassword, err = loadClientPassword(cfg.PasswordDir, e.passwordFile); err != nil {
				return nil, fmt.Errorf("natsserver: %w", err)
			}
		}
		users = append(users, &server.User{Username: cfg.ClientUser, Password: e.clientPassword, Permissions: clientPermissions(cfg)})
	}
	if e.storeDir == "" {
		dir, err := os.MkdirTemp("", "delayq-nats-*")
		if err != nil {
			return nil, fmt.Errorf("natsserver: %w", err)
		}
		e.storeDir, e.tempDir = dir, dir
	}
	host, port, _ := splitListen(cfg.Listen)
	always, interval, _ := parseSync(cfg.Sync)
	opts := &server.Options{
		ServerName:   "delayq",
		Host:         host,
		Port:         port,
		DontListen:   cfg.NoListen,
		JetStream:    true,
		StoreDir:     e.storeDir,
		SyncAlways:   always,
		SyncInterval: interval,
		NoSigs:       true,
		NoLog:        cfg.Logger == nil,
		// A store's schedules, leases and holds make many small messages;
		// the default 1 MiB max payload is plenty, the pending limit is
		// not.
		MaxPending:        256 << 20,
		Users:             users,
		JetStreamMaxStore: cfg.MaxStore,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		e.removeTemp()
		return nil, fmt.Errorf("natsserver: %w", err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(&serverLogger{log: cfg.Logger}, false, false, false)
	}
	srv.Start()
	e.srv = srv
	if !srv.ReadyForConnections(30 * time.Second) {
		e.Shutdown()
		return nil, errors.New("natsserver: server not ready after 30s")
	}
	if !srv.JetStreamEnabled() {
		e.Shutdown()
		return nil, errors.New("natsserver: JetStream did not start")
	}
	return e, nil
}

// clientPermissions are what the client user may do: publish to
// cfg.ClientPublish (with inbox replies, which need no permission), and
// subscribe to any subject but those, cfg.ClientDeny, the server's APIs and
// delayq's own inbox. A deny also filters what a wildcard subscription
// (">") receives.
func clientPermissions(cfg Config) *server.Permissions {
	deny := slices.Concat(cfg.ClientPublish, cfg.ClientDeny, systemSubjects, []string{OwnInboxPrefix + ".>"})
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

// StoreDir returns the directory of the JetStream files: Config.StoreDir,
// or the temporary directory made in its place.
func (e *Embedded) StoreDir() string { return e.storeDir }

// ClientURL returns the URL where the server serves NATS clients, with the
// port actually bound and without credentials; "" with Config.NoListen.
func (e *Embedded) ClientURL() string {
	if e.clientUser == "" {
		return ""
	}
	return e.srv.ClientURL()
}

// ClientUser returns the user name of producers and consumers; "" with
// Config.NoListen.
func (e *Embedded) ClientUser() string { return e.clientUser }

// ClientPasswordFile returns the file that holds the client password, ""
// when Config.ClientPassword gave it or with Config.NoListen.
func (e *Embedded) ClientPasswordFile() string { return e.passwordFile }

// Connect returns a new in-process connection to the server (no TCP, no
// loopback) as delayq's own user, with every permission and inboxes under
// OwnInboxPrefix. The caller closes it. Options are applied after those
// and a name.
func (e *Embedded) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.InProcessServer(e.srv),
		nats.UserInfo(OwnUser, e.ownPassword),
		nats.CustomInboxPrefix(OwnInboxPrefix),
		nats.Name("delayq"),
		nats.MaxReconnects(-1),
	}, opts...)
	nc, err := nats.Connect("", all...)
	if err != nil {
		return nil, fmt.Errorf("natsserver: connect: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped, flushing its
// JetStream files, then removes the temporary store directory made in
// place of an empty Config.StoreDir. Idempotent.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.removeTemp()
}

// removeTemp removes the temporary store directory, if Start made one.
func (e *Embedded) removeTemp() {
	if e.tempDir != "" {
		_ = os.RemoveAll(e.tempDir)
	}
}

// splitListen parses host:port; port 0 or -1 means any free port.
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

// parseSync parses Config.Sync.
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
