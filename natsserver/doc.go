// Package natsserver runs delayq's in-process nats-server: the server of
// the jetstream backend (backends/natsstore's StartEmbedded, which keeps
// the store's stream in it) and the one `delayq serve` starts for NATS
// intake and delivery when the backend is not NATS (local, Redis, memory). One piece of
// code starts it, so both serve clients the same way.
//
// # The server
//
// Start runs a nats-server with JetStream enabled, its files in
// Config.StoreDir (a temporary directory, removed by Shutdown, when that is
// empty), serving NATS clients on Config.Listen (127.0.0.1:4222 by default)
// unless Config.NoListen says it serves none, and returns once it accepts
// connections. JetStream is on even where no store uses it, so that the
// NATS Deliverer (transports/natstransport) confirms a delivery on a
// subject that a stream holds by its PubAck. JetStream's storage limit is
// Config.MaxStore, or nats-server's default (three quarters of the disk's
// free space at start); the jetstream backend, whose store keeps a disk
// reserve, runs without one (MaxStoreNone).
//
// # Users
//
// It takes two users and no anonymous connection. delayq's own (OwnUser,
// through Embedded.Connect, in process, with a password made at each start
// that never leaves the process) may do everything; its inboxes are under
// OwnInboxPrefix. Producers and consumers connect as Config.ClientUser
// ("delayq-client") with Config.ClientPassword or, without it, the password
// kept in <Config.PasswordDir>/nats-client-password (made at first start,
// mode 0600; a file others may read is refused). They may publish only on
// Config.ClientPublish (the intake subjects delayq.push.> and
// delayq.cancel, with replies to their inboxes) and subscribe to anything
// but those, Config.ClientDeny (a store's own subjects),
// $JS/$JSC/$NRG/$KV/$O/$SYS and OwnInboxPrefix; a wildcard subscription is
// filtered by the same list. They have no JetStream. With Config.NoListen
// there is no client user: only in-process connections.
//
// It imports only core (for the rule of a user name), so that a backend
// may import it.
package natsserver
