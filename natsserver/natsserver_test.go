package natsserver

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/natsstore/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start starts a server on a free loopback port, shut down at cleanup.
func start(t *testing.T, cfg Config) *Embedded {
	t.Helper()
	cfg.Listen = "127.0.0.1:-1"
	e, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	return e
}

// readPassword reads the password kept in dir.
func readPassword(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ClientPasswordFile))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// TestStartStoreAndPasswordApart checks that JetStream keeps its files in
// StoreDir and the client password is kept in PasswordDir, apart, and that
// delayq's own connection may use JetStream there.
func TestStartStoreAndPasswordApart(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	store := filepath.Join(data, "nats")
	e := start(t, Config{StoreDir: store, PasswordDir: data})
	require.Equal(t, store, e.StoreDir())
	require.Equal(t, filepath.Join(data, ClientPasswordFile), e.ClientPasswordFile())
	info, err := os.Stat(e.ClientPasswordFile())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	_, err = os.Stat(filepath.Join(store, ClientPasswordFile))
	require.ErrorIs(t, err, os.ErrNotExist, "the password is not kept with JetStream's files")

	own, err := e.Connect()
	require.NoError(t, err)
	t.Cleanup(own.Close)
	js, err := jetstream.New(own)
	require.NoError(t, err)
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "HELD", Subjects: []string{"held.>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	ack, err := js.Publish(t.Context(), "held.x", []byte("1"))
	require.NoError(t, err, "a subject held by a stream is confirmed by its PubAck")
	require.Equal(t, "HELD", ack.Stream)
	_, err = os.Stat(filepath.Join(store, "jetstream"))
	require.NoError(t, err, "JetStream keeps its files in StoreDir")
	natstest.ClientConn(t, e.ClientURL(), ClientUserDefault, readPassword(t, data))
}

// TestStartTemporaryStore checks that an empty StoreDir gives a temporary
// directory that Shutdown removes.
func TestStartTemporaryStore(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	e, err := Start(Config{PasswordDir: data, Listen: "127.0.0.1:-1"})
	require.NoError(t, err)
	dir := e.StoreDir()
	require.NotEmpty(t, dir)
	require.NotEqual(t, data, dir)
	own, err := e.Connect()
	require.NoError(t, err)
	js, err := jetstream.New(own)
	require.NoError(t, err)
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "jetstream"))
	require.NoError(t, err)
	own.Close()
	e.Shutdown()
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "Shutdown removes the temporary store")
	e.Shutdown() // idempotent
}

// TestRefusesUnauthenticated checks that the server takes no connection
// without the client user's password.
func TestRefusesUnauthenticated(t *testing.T) {
	t.Parallel()
	e := start(t, Config{PasswordDir: t.TempDir()})
	_, err := nats.Connect(e.ClientURL())
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = nats.Connect(e.ClientURL(), nats.UserInfo(ClientUserDefault, "not-the-password-at-all"))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = nats.Connect(e.ClientURL(), nats.UserInfo(OwnUser, "not-the-password-at-all"))
	require.ErrorIs(t, err, nats.ErrAuthorization)
}

// TestClientPermissions checks what the client user may do: publish on the
// intake subjects and receive what delayq publishes elsewhere, but neither
// use JetStream nor touch ClientDeny, delayq's own inbox or the intake's
// subscriptions.
func TestClientPermissions(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	e := start(t, Config{PasswordDir: data, ClientDeny: []string{"store.>"}})
	own, err := e.Connect()
	require.NoError(t, err)
	t.Cleanup(own.Close)
	client, errs := natstest.ClientConn(t, e.ClientURL(), e.ClientUser(), readPassword(t, data))

	cancels, err := own.Subscribe("delayq.cancel", func(m *nats.Msg) { _ = m.Respond([]byte("{}")) })
	require.NoError(t, err)
	t.Cleanup(func() { _ = cancels.Unsubscribe() })
	require.NoError(t, own.Flush())
	res, err := client.Request("delayq.cancel", []byte("some-id"), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "{}", string(res.Data))

	deliveries, err := client.SubscribeSync("delayq.deliver.orders")
	require.NoError(t, err)
	require.NoError(t, client.Flush())
	require.NoError(t, own.Publish("delayq.deliver.orders", []byte("job")))
	m, err := deliveries.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "job", string(m.Data))

	for _, subject := range []string{"$JS.API.STREAM.LIST", "store.x", "delayq.deliver.orders", "_INBOX.x"} {
		require.NoError(t, client.Publish(subject, nil))
		natstest.RequireViolation(t, errs, subject)
	}
	for _, subject := range []string{"store.>", "$JS.API.>", "$SYS.>", OwnInboxPrefix + ".>", "delayq.push.>", "delayq.cancel"} {
		_, err := client.SubscribeSync(subject)
		require.NoError(t, err)
		natstest.RequireViolation(t, errs, subject)
	}
}

// TestNoListen checks a server that serves no clients: no client URL, user
// or password file, while in-process connections work with JetStream.
func TestNoListen(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	e := start(t, Config{StoreDir: data, NoListen: true})
	require.Empty(t, e.ClientURL())
	require.Empty(t, e.ClientUser())
	require.Empty(t, e.ClientPasswordFile())
	_, err := os.Stat(filepath.Join(data, ClientPasswordFile))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Nil(t, e.Server().Addr(), "no client listener")
	own, err := e.Connect()
	require.NoError(t, err)
	t.Cleanup(own.Close)
	js, err := jetstream.New(own)
	require.NoError(t, err)
	_, err = js.AccountInfo(t.Context())
	require.NoError(t, err)
}

// TestClientPasswordKept checks that the generated password is kept across
// a restart, that a given one is used instead, and that a password file
// others may read is refused.
func TestClientPasswordKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := start(t, Config{PasswordDir: dir})
	first := readPassword(t, dir)
	e.Shutdown()

	e = start(t, Config{PasswordDir: dir})
	require.Equal(t, first, readPassword(t, dir), "the password survives a restart")
	natstest.ClientConn(t, e.ClientURL(), ClientUserDefault, first)
	e.Shutdown()

	const given = "a-given-password-0123456789"
	e = start(t, Config{PasswordDir: dir, ClientUser: "producers", ClientPassword: given})
	require.Empty(t, e.ClientPasswordFile())
	natstest.ClientConn(t, e.ClientURL(), "producers", given)
	_, err := nats.Connect(e.ClientURL(), nats.UserInfo("producers", first))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	e.Shutdown()
	require.Equal(t, first, readPassword(t, dir))

	require.NoError(t, os.Chmod(filepath.Join(dir, ClientPasswordFile), 0o644))
	_, err = Start(Config{PasswordDir: dir, Listen: "127.0.0.1:-1"})
	require.ErrorContains(t, err, "0600")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{},
		{PasswordDir: "x", Listen: "nowhere"},
		{PasswordDir: "x", Sync: "sometimes"},
		{PasswordDir: "x", ClientUser: "a b"},
		{PasswordDir: "x", ClientUser: OwnUser},
		{PasswordDir: "x", ClientPassword: "short"},
		{PasswordDir: "x", ClientPassword: "long enough but with spaces"},
		{PasswordDir: "x", ClientPublish: []string{""}},
		{PasswordDir: "x", ClientDeny: []string{"a b"}},
		{PasswordDir: "x", MaxStore: -1},
	} {
		err := cfg.WithDefaults().Validate()
		require.Error(t, err, "%+v", cfg)
		require.False(t, errors.Is(err, os.ErrNotExist))
	}
	require.NoError(t, Config{NoListen: true}.WithDefaults().Validate(), "no password without clients")
	require.NoError(t, Config{ClientPassword: "a-given-password-0123456789"}.WithDefaults().Validate())
}

// TestMaxStore: MaxStoreNone leaves JetStream without a storage limit of
// its own; zero leaves nats-server's, derived from the free space.
func TestMaxStore(t *testing.T) {
	t.Parallel()
	e := start(t, Config{StoreDir: t.TempDir(), NoListen: true, MaxStore: MaxStoreNone})
	require.Equal(t, int64(math.MaxInt64), e.Server().JetStreamConfig().MaxStore)
	e = start(t, Config{StoreDir: t.TempDir(), NoListen: true})
	require.Less(t, e.Server().JetStreamConfig().MaxStore, int64(math.MaxInt64))
}

// TestStartsWithoutWarnings checks that a default start logs no warning:
// nats-server's warning about plain-text passwords, which live only in this
// process, would greet every operator at every start.
func TestStartsWithoutWarnings(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start(t, Config{PasswordDir: t.TempDir(), Logger: logger})
	mu.Lock()
	defer mu.Unlock()
	require.NotContains(t, logs.String(), "level=WARN")
}

// lockedWriter serialises writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
