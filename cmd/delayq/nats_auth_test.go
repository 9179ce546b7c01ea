package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// TestE2EInProcessNATSAuth runs serve on the local default: the NATS
// server refuses connections without the client password, which is kept in
// the data directory across a restart and logged by path only; the client
// user pushes, cancels and receives deliveries, and may not use JetStream.
func TestE2EInProcessNATSAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, defaultArgs(dir)...)
	require.Equal(t, "delayq-client", srv.NATSUser)
	require.Equal(t, filepath.Join(dir, "nats-client-password"), srv.NATSPasswordFile)
	password, err := os.ReadFile(srv.NATSPasswordFile)
	require.NoError(t, err)
	info, err := os.Stat(srv.NATSPasswordFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.NotContains(t, srv.log(), strings.TrimSpace(string(password)), "the password is never logged")

	_, err = nats.Connect(srv.NATSURL)
	require.ErrorIs(t, err, nats.ErrAuthorization, "no connection without credentials")

	api := newCaller(t, srv.HTTPURL)
	status, answer := api.call(http.MethodPut, "/v1/topics/auth.nats", map[string]any{"delivery": map[string]any{"type": "nats"}})
	require.Equal(t, http.StatusOK, status, "%s", answer)
	// The open API may not deliver into replies either.
	status, answer = api.call(http.MethodPut, "/v1/topics/auth.inbox", map[string]any{"delivery": map[string]any{"type": "nats", "subject": "_INBOX.x"}})
	require.Equal(t, http.StatusBadRequest, status, "%s", answer)
	require.Contains(t, string(answer), `"field":"delivery.subject"`)
	errs := make(chan error, 16)
	nc := srv.natsClient(t, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	sub, err := nc.SubscribeSync("delayq.deliver.auth.nats")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())

	// Push a job due at once, and one due in an hour that is cancelled.
	res, err := nc.Request("delayq.push.auth.nats", []byte(`{"n":1}`), 10*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(res.Data), `"id"`)
	got, err := sub.NextMsg(15 * time.Second)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1}`, string(got.Data))
	m := nats.NewMsg("delayq.push.auth.nats")
	m.Header.Set("Delayq-Delay", "1h")
	res, err = nc.RequestMsg(m, 10*time.Second)
	require.NoError(t, err)
	var pushed struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(res.Data, &pushed), "%s", res.Data)
	res, err = nc.Request("delayq.cancel", []byte(pushed.ID), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "{}", string(res.Data))

	// No JetStream API for clients.
	require.NoError(t, nc.Publish("$JS.API.STREAM.LIST", nil))
	select {
	case err := <-errs:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		require.Contains(t, err.Error(), "$JS.API.STREAM.LIST")
	case <-time.After(10 * time.Second):
		t.Fatal("no permission violation within 10s")
	}
	nc.Close()

	// After a restart the same password still connects.
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 30*time.Second))
	srv = startServer(t, defaultArgs(dir)...)
	again, err := os.ReadFile(srv.NATSPasswordFile)
	require.NoError(t, err)
	require.Equal(t, password, again)
	srv.natsClient(t)
}

// TestE2EInProcessNATSGivenPassword checks that --nats-client-user and
// --nats-client-password replace the generated credentials.
func TestE2EInProcessNATSGivenPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const given = "given-nats-password-0123456789"
	srv := startServer(t, append(defaultArgs(dir), "--nats-client-user", "producers", "--nats-client-password", given)...)
	require.Equal(t, "producers", srv.NATSUser)
	require.Empty(t, srv.NATSPasswordFile)
	require.Contains(t, srv.log(), `password="given by --nats-client-password"`)
	require.NotContains(t, srv.log(), given)
	nc, err := nats.Connect(srv.NATSURL, nats.UserInfo("producers", given))
	require.NoError(t, err)
	nc.Close()
	_, err = nats.Connect(srv.NATSURL, nats.UserInfo("delayq-client", given))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = os.Stat(filepath.Join(dir, "nats-client-password"))
	require.ErrorIs(t, err, os.ErrNotExist, "no password file when one is given")
}

// TestE2ENATSDeliverySubjects checks delivery.subject over HTTP: subjects
// delayq keeps for itself are refused to every token (400), and a token
// restricted to orders.> may name only delayq.deliver.<its topics> and
// what --nats-delivery-subjects allows (403 otherwise).
func TestE2ENATSDeliverySubjects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const ops, orders = "ops-secret-0123456789", "orders-admin-secret-0123456789"
	tokens := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte(
		"- name: ops\n  token: "+ops+"\n  scopes: [admin]\n"+
			"- name: orders-admin\n  token: "+orders+"\n  scopes: [admin]\n  topics: [\"orders.>\"]\n"), 0o600))
	srv := startServer(t, append(defaultArgs(filepath.Join(dir, "data")), "--tokens-file", tokens, "--nats-delivery-subjects", "billing.>")...)
	client := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	put := func(secret, topic, subject string) (int, string) {
		t.Helper()
		body := `{"delivery": {"type": "nats", "subject": "` + subject + `"}}`
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.HTTPURL+"/v1/topics/"+topic, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	for _, subject := range []string{"delayq.push.orders.a", "delayq.cancel", "delayq.d.x.orders", "$JS.API.STREAM.DELETE.DELAYQ_QUEUE", "$KV.DELAYQ_TOPICS.x", "$SYS.REQ.SERVER.PING", "_INBOX.x", "_DELAYQ_INBOX.x"} {
		status, body := put(ops, "orders.a", subject)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", subject, body)
		require.Contains(t, body, `"invalid_argument"`)
		require.Contains(t, body, `"field":"delivery.subject"`)
		// The restricted token is refused first: not a subject of its topics.
		status, body = put(orders, "orders.a", subject)
		require.Equal(t, http.StatusForbidden, status, "%s: %s", subject, body)
	}
	status, body := put(orders, "orders.a", "delayq.deliver.mail")
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, `"permission_denied"`)
	require.NotContains(t, body, "mail")
	status, body = put(orders, "orders.a", "billing.refund")
	require.Equal(t, http.StatusOK, status, body)
	status, body = put(orders, "orders.a", "delayq.deliver.orders.a")
	require.Equal(t, http.StatusOK, status, body)
	status, body = put(ops, "mail", "payments.capture")
	require.Equal(t, http.StatusOK, status, body)
}
