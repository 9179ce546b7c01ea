package natsstore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore/natstest"
	"github.com/delayq/delayq/core/storetest"
)

// startEmbedded starts a server of its own in dir on a free loopback port,
// shut down at cleanup.
func startEmbedded(t *testing.T, cfg EmbeddedConfig) *Embedded {
	t.Helper()
	cfg.Listen = "127.0.0.1:-1"
	e, err := StartEmbedded(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	return e
}

// TestEmbeddedRefusesUnauthenticated checks that the server takes no
// connection without the client user's password.
func TestEmbeddedRefusesUnauthenticated(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, EmbeddedConfig{DataDir: t.TempDir()})
	_, err := nats.Connect(e.ClientURL())
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = nats.Connect(e.ClientURL(), nats.UserInfo(ClientUserDefault, "not-the-password-at-all"))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = nats.Connect(e.ClientURL(), nats.UserInfo(ownUser, "not-the-password-at-all"))
	require.ErrorIs(t, err, nats.ErrAuthorization)
}

// TestEmbeddedClientPermissions checks what the client user may do on a
// server whose store holds a job: publish on the intake subjects with an
// inbox reply and receive deliveries, but neither use JetStream's API nor
// see or write the store's subjects, delayq's own inbox or the intake's.
func TestEmbeddedClientPermissions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEmbedded(t, EmbeddedConfig{DataDir: dir})
	own, err := e.Connect()
	require.NoError(t, err)
	t.Cleanup(own.Close)
	store := openStore(t, own, PrefixDefault)

	password, err := os.ReadFile(filepath.Join(dir, ClientPasswordFile))
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(dir, ClientPasswordFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.Equal(t, filepath.Join(dir, ClientPasswordFile), e.ClientPasswordFile())
	client, errs := natstest.ClientConn(t, e.ClientURL(), e.ClientUser(), strings.TrimSpace(string(password)))

	// Everything a wildcard subscription gets, to check below that no store
	// traffic reaches it.
	all, err := client.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, client.Flush())

	// Intake: delayq answers a request on delayq.cancel on the client's
	// inbox, and gets what the client pushes.
	cancels, err := own.Subscribe("delayq.cancel", func(m *nats.Msg) { _ = m.Respond([]byte("{}")) })
	require.NoError(t, err)
	pushes, err := own.SubscribeSync("delayq.push.>")
	require.NoError(t, err)
	require.NoError(t, own.Flush())
	res, err := client.Request("delayq.cancel", []byte("some-id"), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "{}", string(res.Data))
	require.NoError(t, client.Publish("delayq.push.orders", []byte(`{"n":1}`)))
	m, err := pushes.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "delayq.push.orders", m.Subject)
	require.NoError(t, cancels.Unsubscribe())
	require.NoError(t, pushes.Unsubscribe())

	// The store writes a job: its record and wake-ups, through JetStream.
	storetest.Put(t, context.Background(), store, storetest.NewJob("orders", time.Now().Add(time.Hour)))

	// Deliveries reach the client; the marker also shows that everything
	// published before it has been routed.
	deliveries, err := client.SubscribeSync("delayq.deliver.orders")
	require.NoError(t, err)
	require.NoError(t, client.Flush())
	require.NoError(t, own.Publish("delayq.deliver.orders", []byte("marker")))
	require.NoError(t, own.Flush())
	m, err = deliveries.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "marker", string(m.Data))
	for {
		m, err := all.NextMsg(10 * time.Second)
		require.NoError(t, err)
		if m.Subject == "delayq.deliver.orders" {
			break
		}
		require.True(t, strings.HasPrefix(m.Subject, "_INBOX."), "the client's wildcard subscription got %s", m.Subject)
	}

	// JetStream's API: listing streams, deleting the store's stream.
	for _, subject := range []string{"$JS.API.STREAM.LIST", "$JS.API.STREAM.DELETE.DELAYQ_QUEUE", "$JS.API.DIRECT.GET.DELAYQ_QUEUE", "$KV.DELAYQ_TOPICS.orders", "delayq.s.x.orders", "delayq.d.x.orders", "delayq.deliver.orders", "_INBOX.x"} {
		require.NoError(t, client.Publish(subject, nil))
		natstest.RequireViolation(t, errs, subject)
	}
	js, err := jetstream.New(client)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.Stream(ctx, "DELAYQ_QUEUE")
	require.Error(t, err, "no JetStream for clients")
	natstest.RequireViolation(t, errs, "$JS.API.STREAM.INFO.DELAYQ_QUEUE")
	ownJS, err := jetstream.New(own)
	require.NoError(t, err)
	_, err = ownJS.Stream(context.Background(), "DELAYQ_QUEUE")
	require.NoError(t, err, "the store's stream is still there")

	// Subscriptions to the store's subjects, the server's APIs, delayq's
	// own inbox and the intake subjects (whose queue group a client could
	// otherwise join).
	for _, subject := range []string{"delayq.d.*.orders", "delayq.s.>", "$JS.API.>", "$KV.DELAYQ_TOPICS.>", "$SYS.>", OwnInboxPrefix + ".>", "delayq.push.>", "delayq.cancel"} {
		_, err := client.SubscribeSync(subject)
		require.NoError(t, err)
		natstest.RequireViolation(t, errs, subject)
	}
	_, err = client.QueueSubscribeSync("delayq.push.>", "delayq")
	require.NoError(t, err)
	natstest.RequireViolation(t, errs, "delayq.push.>")
}

// TestEmbeddedClientPasswordKept checks that the generated password is
// kept across a restart, that a given one is used instead, and that a
// password file others may read is refused.
func TestEmbeddedClientPasswordKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, ClientPasswordFile)
	e, err := StartEmbedded(EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:-1"})
	require.NoError(t, err)
	first, err := os.ReadFile(file)
	require.NoError(t, err)
	e.Shutdown()

	e = startEmbedded(t, EmbeddedConfig{DataDir: dir})
	again, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, first, again, "the password survives a restart")
	natstest.ClientConn(t, e.ClientURL(), ClientUserDefault, strings.TrimSpace(string(first)))
	e.Shutdown()

	// A given user and password win; the file is left alone.
	const given = "a-given-password-0123456789"
	e = startEmbedded(t, EmbeddedConfig{DataDir: dir, ClientUser: "producers", ClientPassword: given})
	require.Empty(t, e.ClientPasswordFile())
	natstest.ClientConn(t, e.ClientURL(), "producers", given)
	_, err = nats.Connect(e.ClientURL(), nats.UserInfo("producers", strings.TrimSpace(string(first))))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = nats.Connect(e.ClientURL(), nats.UserInfo(ClientUserDefault, strings.TrimSpace(string(first))))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	e.Shutdown()
	again, err = os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, first, again)

	require.NoError(t, os.Chmod(file, 0o644))
	_, err = StartEmbedded(EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:-1"})
	require.ErrorContains(t, err, "0600")
}

func TestEmbeddedConfigValidate(t *testing.T) {
	t.Parallel()
	for _, cfg := range []EmbeddedConfig{
		{ClientUser: "a b"},
		{ClientUser: ownUser},
		{ClientPassword: "short"},
		{ClientPassword: "long enough but with spaces"},
		{StorePrefix: "a.b"},
		{ClientPublish: []string{""}},
	} {
		cfg.DataDir = "x"
		err := cfg.WithDefaults().Validate()
		require.Error(t, err, "%+v", cfg)
		require.False(t, errors.Is(err, os.ErrNotExist))
	}
}

// TestEmbeddedStartsWithoutWarnings checks that a default start logs no
// warning: nats-server's warning about plain-text passwords, which live
// only in this process, would greet every operator at every start.
func TestEmbeddedStartsWithoutWarnings(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	startEmbedded(t, EmbeddedConfig{DataDir: t.TempDir(), Logger: logger})
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

// TestEmbeddedNoListen checks a server that serves no NATS clients: the
// store works over its in-process connection, and there is no client URL,
// user or password file.
func TestEmbeddedNoListen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, err := StartEmbedded(EmbeddedConfig{DataDir: dir, NoListen: true})
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	require.Empty(t, e.ClientURL())
	require.Empty(t, e.ClientUser())
	require.Empty(t, e.ClientPasswordFile())
	_, err = os.Stat(filepath.Join(dir, ClientPasswordFile))
	require.ErrorIs(t, err, os.ErrNotExist)
	own, err := e.Connect()
	require.NoError(t, err)
	t.Cleanup(own.Close)
	store := openStore(t, own, PrefixDefault)
	job := storetest.NewJob("orders", time.Now().Add(time.Hour))
	storetest.Put(t, context.Background(), store, job)
	got, err := store.GetJob(context.Background(), job.ID)
	require.NoError(t, err)
	require.Equal(t, job.ID, got.ID)
}
