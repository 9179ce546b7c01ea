package natsstore

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/natsserver"
)

// Embedded server defaults, natsserver's.
const (
	// ListenDefault is where the embedded server serves NATS unless
	// EmbeddedConfig.Listen says otherwise.
	ListenDefault = natsserver.ListenDefault
	// SyncDefault is how often the embedded server fsyncs its file store
	// unless EmbeddedConfig.Sync says otherwise: every second, like Redis'
	// appendfsync everysec. See the package documentation for what each
	// setting keeps on a power cut.
	SyncDefault = natsserver.SyncDefault
	// SyncAlways makes the embedded server fsync every write before it
	// answers.
	SyncAlways = natsserver.SyncAlways
	// ClientUserDefault is the user of producers and consumers unless
	// EmbeddedConfig.ClientUser says otherwise.
	ClientUserDefault = natsserver.ClientUserDefault
	// ClientPasswordFile is the file in EmbeddedConfig.DataDir that keeps
	// the client password made at first start, readable by its owner only.
	ClientPasswordFile = natsserver.ClientPasswordFile
	// ClientPasswordMinLen is the shortest client password accepted.
	ClientPasswordMinLen = natsserver.ClientPasswordMinLen
	// OwnInboxPrefix is the inbox prefix of Connect's connections: the
	// answers to delayq's JetStream calls travel under it, where clients
	// may not subscribe.
	OwnInboxPrefix = natsserver.OwnInboxPrefix
	// ownUser is delayq's own user, with every permission.
	ownUser = natsserver.OwnUser
	// MaxStoreNone is the EmbeddedConfig.MaxStore of a server without a
	// storage limit of its own, for a store that keeps a disk reserve.
	MaxStoreNone = natsserver.MaxStoreNone
)

// ClientPublishDefault are the subjects clients may publish to unless
// EmbeddedConfig.ClientPublish says otherwise: natstransport's intake
// subjects with its default prefix.
var ClientPublishDefault = natsserver.ClientPublishDefault

// EmbeddedConfig configures an in-process nats-server with JetStream file
// storage for the store.
type EmbeddedConfig struct {
	// DataDir is where JetStream keeps its files, and where the client
	// password is kept (ClientPasswordFile) unless ClientPassword gives
	// it. Required.
	DataDir string
	// Listen is the host:port where the server also serves NATS clients.
	// Port -1 picks a free port (tests); ClientURL tells which.
	//
	// Defaults to ListenDefault (127.0.0.1:4222).
	Listen string
	// NoListen makes a server that serves no NATS clients, only the
	// store's in-process connections (Connect); it has no client user.
	NoListen bool
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
	// MaxStore is the server's JetStream storage limit in bytes
	// (max_file_store): past it the server refuses every write, an ack's
	// too, until messages expire. MaxStoreNone sets none: a store with
	// Config.DiskReserve guards the disk itself, and the default limit
	// would stop it first. Zero: nats-server's default, three quarters of
	// the disk's free space at start plus what its streams hold then.
	MaxStore int64
}

// WithDefaults returns the configuration with every unset field at its
// default.
func (c EmbeddedConfig) WithDefaults() EmbeddedConfig {
	s := c.server().WithDefaults()
	c.Listen, c.Sync, c.ClientUser, c.ClientPublish = s.Listen, s.Sync, s.ClientUser, s.ClientPublish
	c.StorePrefix = cmp.Or(c.StorePrefix, PrefixDefault)
	return c
}

// Validate checks the configuration and names the bad field.
func (c EmbeddedConfig) Validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("natsstore: embedded: DataDir is required")
	case core.ValidateID(c.StorePrefix) != nil:
		return fmt.Errorf("natsstore: embedded: StorePrefix %q must be one token of [A-Za-z0-9_-]", c.StorePrefix)
	}
	if err := c.server().Validate(); err != nil {
		return fmt.Errorf("natsstore: embedded: %w", err)
	}
	return nil
}

// server is the natsserver configuration of c: JetStream files and the
// client password in DataDir, the store's subjects denied to clients.
func (c EmbeddedConfig) server() natsserver.Config {
	var deny []string
	if core.ValidateID(c.StorePrefix) == nil {
		deny = newNames(c.StorePrefix).streamSubjects()
	}
	return natsserver.Config{
		StoreDir:       c.DataDir,
		PasswordDir:    c.DataDir,
		Listen:         c.Listen,
		NoListen:       c.NoListen,
		Sync:           c.Sync,
		Logger:         c.Logger,
		ClientUser:     c.ClientUser,
		ClientPassword: c.ClientPassword,
		ClientPublish:  c.ClientPublish,
		ClientDeny:     deny,
		MaxStore:       c.MaxStore,
	}
}

// Embedded is an in-process nats-server with JetStream enabled that
// accepts two users: delayq's own (Connect), with every permission, and
// the clients' (EmbeddedConfig.ClientUser), who may push and cancel and
// receive deliveries, nothing more. Create it with StartEmbedded and stop
// it with Shutdown. It is natsserver's server, which the other backends'
// NATS transports use too.
type Embedded = natsserver.Embedded

// StartEmbedded starts an in-process nats-server (natsserver.Start) with
// JetStream file storage in cfg.DataDir, serving NATS on cfg.Listen to the
// users of Embedded, whose clients may not touch the store's subjects, and
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
	e, err := natsserver.Start(cfg.server())
	if err != nil {
		return nil, fmt.Errorf("natsstore: embedded: %w", err)
	}
	return e, nil
}
