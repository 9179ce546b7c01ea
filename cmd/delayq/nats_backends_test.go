package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
)

// natsData is the directory of the JetStream files that the "nats
// listening" line names.
var natsData = regexp.MustCompile(`msg="nats listening" url=\S+ data=(\S+)`)

// natsRoundTrip configures topic for NATS delivery through api, pushes a
// job over NATS (delayq.push.<topic>) and receives its delivery on
// delayq.deliver.<topic>, then pushes one due in an hour and cancels it
// over delayq.cancel, all as the client nc.
func natsRoundTrip(t *testing.T, api *apiCaller, nc *nats.Conn, topic string) {
	t.Helper()
	status, answer := api.call(http.MethodPut, "/v1/topics/"+topic, map[string]any{"delivery": map[string]any{"type": "nats"}})
	require.Equal(t, http.StatusOK, status, "%s", answer)
	sub, err := nc.SubscribeSync("delayq.deliver." + topic)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, nc.Flush())

	m := nats.NewMsg("delayq.push." + topic)
	m.Data = []byte(`{"n": 1}`)
	m.Header.Set("Delayq-Delay", "300ms")
	res, err := nc.RequestMsg(m, 10*time.Second)
	require.NoError(t, err)
	var pushed struct {
		ID    string    `json:"id"`
		RunAt time.Time `json:"run_at"`
		State string    `json:"state"`
	}
	require.NoError(t, json.Unmarshal(res.Data, &pushed), "%s", res.Data)
	require.NotEmpty(t, pushed.ID, "%s", res.Data)
	require.Equal(t, "scheduled", pushed.State)

	got, err := sub.NextMsg(15 * time.Second)
	require.NoError(t, err, "the job is delivered on its subject")
	require.False(t, time.Now().Before(pushed.RunAt), "delivered before its run_at")
	require.Equal(t, `{"n": 1}`, string(got.Data))
	require.Equal(t, pushed.ID, got.Header.Get("Delayq-Id"))
	require.Equal(t, "1", got.Header.Get("Delayq-Attempt"))
	var job struct {
		State string `json:"state"`
	}
	require.Eventually(t, func() bool {
		api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
		return job.State == "done"
	}, 10*time.Second, 20*time.Millisecond, "the delivery is acknowledged; state %q", job.State)

	m = nats.NewMsg("delayq.push." + topic)
	m.Header.Set("Delayq-Delay", "1h")
	res, err = nc.RequestMsg(m, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(res.Data, &pushed), "%s", res.Data)
	res, err = nc.Request("delayq.cancel", []byte(pushed.ID), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "{}", string(res.Data))
	api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
	require.Equal(t, "cancelled", job.State)
}

// startRedis starts a redis-server for the test, killed at its end.
func startRedis(t *testing.T) *redistest.Server {
	t.Helper()
	redistest.Require(t)
	rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
	require.NoError(t, err)
	t.Cleanup(rs.Kill)
	return rs
}

// TestE2ENATSOnRedis runs serve on Redis with its default NATS: an
// in-process server on --nats-listen, for the client user and the password
// kept in --data, with its JetStream files in <data>/nats; NATS intake,
// cancel and delivery work, and NATS shuts down after the store.
func TestE2ENATSOnRedis(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	dir := t.TempDir()
	srv := startServer(t, "--backend", "redis", "--redis-url", rs.URL(), "--http", "127.0.0.1:0", "--data", dir, "--nats-listen", "127.0.0.1:-1")
	require.NotEmpty(t, srv.NATSURL, "the in-process NATS address is logged")
	require.Equal(t, "delayq-client", srv.NATSUser)
	require.Equal(t, filepath.Join(dir, "nats-client-password"), srv.NATSPasswordFile)
	m := natsData.FindStringSubmatch(srv.log())
	require.NotNil(t, m)
	require.Equal(t, filepath.Join(dir, "nats"), m[1], "JetStream's files are apart from anything else in --data")
	info, err := os.Stat(m[1])
	require.NoError(t, err)
	require.True(t, info.IsDir())

	_, err = nats.Connect(srv.NATSURL)
	require.ErrorIs(t, err, nats.ErrAuthorization, "no connection without credentials")
	natsRoundTrip(t, newCaller(t, srv.HTTPURL), srv.natsClient(t), "e2e.redis.nats")

	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 30*time.Second))
	log := srv.log()
	require.Less(t, strings.Index(log, "store closed"), strings.Index(log, "nats stopped"), "NATS closes after the store")
}

// TestE2ENATSOnMemory runs serve on memory with its default NATS: an
// in-process server whose JetStream files are in a temporary directory
// removed at exit, the client password in --data.
func TestE2ENATSOnMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--data", dir, "--nats-listen", "127.0.0.1:-1")
	require.NotEmpty(t, srv.NATSURL)
	require.Equal(t, filepath.Join(dir, "nats-client-password"), srv.NATSPasswordFile)
	m := natsData.FindStringSubmatch(srv.log())
	require.NotNil(t, m)
	jsDir := m[1]
	require.False(t, strings.HasPrefix(jsDir, dir), "JetStream's files are temporary, not in --data: %s", jsDir)
	_, err := os.Stat(jsDir)
	require.NoError(t, err)

	natsRoundTrip(t, newCaller(t, srv.HTTPURL), srv.natsClient(t), "e2e.mem.nats")

	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 30*time.Second))
	_, err = os.Stat(jsDir)
	require.ErrorIs(t, err, os.ErrNotExist, "the temporary JetStream directory is removed at exit")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "--data holds only the password file")
	require.Equal(t, "nats-client-password", entries[0].Name())
}

// TestE2ENATSOff runs serve with --nats-listen off on the memory, local
// and jetstream backends: no NATS is served (none is logged as listening, no
// client password is made), a topic of delivery type nats is refused, and
// the HTTP API works.
func TestE2ENATSOff(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{backendMemory, backendLocal, backendJetStream} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			srv := startServer(t, "--backend", backend, "--http", "127.0.0.1:0", "--data", dir, "--nats-listen", "off")
			require.Empty(t, srv.NATSURL, "no NATS server listens")
			require.Contains(t, srv.log(), "nats off")
			require.NotContains(t, srv.log(), "nats intake listening")
			_, err := os.Stat(filepath.Join(dir, "nats-client-password"))
			require.ErrorIs(t, err, os.ErrNotExist, "no client, no client password")

			api := newCaller(t, srv.HTTPURL)
			status, answer := api.call(http.MethodPut, "/v1/topics/e2e.off", map[string]any{"delivery": map[string]any{"type": "nats"}})
			require.Equal(t, http.StatusBadRequest, status, "%s", answer)
			require.Contains(t, string(answer), `"field":"delivery.type"`)
			require.Contains(t, string(answer), `delivery type \"nats\" is not available on this server`)

			var pushed struct{ ID string }
			api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.off", "body": 1}, http.StatusCreated, &pushed)
			jobs := api.claim("e2e.off", 1, 10*time.Second)
			require.Len(t, jobs, 1)
			require.Equal(t, pushed.ID, jobs[0].ID)
			require.Equal(t, 0, srv.signal(syscall.SIGTERM, 30*time.Second))
		})
	}
}

// startNATSServer starts a nats-server in the test process, with JetStream
// and a user, on a free loopback port, and returns its URL with the user's
// credentials.
func startNATSServer(t *testing.T) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoSigs:    true,
		NoLog:     true,
		Users:     []*server.User{{Username: "app", Password: "app-password-0123456789"}},
	})
	require.NoError(t, err)
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	require.True(t, srv.ReadyForConnections(10*time.Second))
	u, err := url.Parse(srv.ClientURL())
	require.NoError(t, err)
	u.User = url.UserPassword("app", "app-password-0123456789")
	return u.String()
}

// TestE2ENATSURLOnRedis runs two instances on one Redis with --nats-url to
// one NATS, as docs/deploying.md says: neither starts a NATS server of its
// own, the credentials in the URL log in and are never logged, intake,
// cancel and delivery work through the shared NATS, and a delivery subject
// that a stream holds there is published through JetStream.
func TestE2ENATSURLOnRedis(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	natsURL := startNATSServer(t)
	var srvs []*serverProc
	var dirs []string
	for range 2 {
		dir := t.TempDir()
		srv := startServer(t, "--backend", "redis", "--redis-url", rs.URL(), "--http", "127.0.0.1:0", "--data", dir,
			"--nats-listen", "127.0.0.1:-1", "--nats-url", natsURL)
		require.Empty(t, srv.NATSURL, "no NATS server of its own")
		require.Contains(t, srv.log(), `msg="nats connected"`)
		require.Contains(t, srv.log(), "nats intake listening")
		srvs, dirs = append(srvs, srv), append(dirs, dir)
	}

	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	api := newCaller(t, srvs[0].HTTPURL)
	natsRoundTrip(t, api, nc, "e2e.shared.nats")

	// A stream on the shared NATS holds this topic's subject: deliveries go
	// through JetStream, confirmed by the stream.
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "HELD", Subjects: []string{"held.>"}})
	require.NoError(t, err)
	status, answer := api.call(http.MethodPut, "/v1/topics/e2e.held", map[string]any{"delivery": map[string]any{"type": "nats", "subject": "held.jobs"}})
	require.Equal(t, http.StatusOK, status, "%s", answer)
	var pushed struct{ ID string }
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.held", "body": "kept"}, http.StatusCreated, &pushed)
	var job struct {
		State string `json:"state"`
	}
	require.Eventually(t, func() bool {
		api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
		return job.State == "done"
	}, 15*time.Second, 20*time.Millisecond, "state %q", job.State)
	msg, err := stream.GetLastMsgForSubject(t.Context(), "held.jobs")
	require.NoError(t, err)
	require.Equal(t, `"kept"`, string(msg.Data))
	require.Equal(t, pushed.ID, msg.Header.Get("Delayq-Id"))

	for i, srv := range srvs {
		require.Equal(t, 0, srv.signal(syscall.SIGTERM, 30*time.Second))
		require.NotContains(t, srv.log(), "app-password-0123456789", "the URL's password is never logged")
		entries, err := os.ReadDir(dirs[i])
		require.NoError(t, err)
		require.Empty(t, entries, "no NATS files and no client password in --data")
	}
}

// TestServeNATSListenOff checks the values of --nats-listen and that off
// and --nats-url exclude each other on a backend that is not NATS.
func TestServeNATSListenOff(t *testing.T) {
	t.Parallel()
	res := runApp(t, nil, "", "serve", "--backend", "redis", "--nats-listen", "off")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, natsOff, res.cfg.NATSListen)
	require.Empty(t, res.cfg.NATSURL, "no NATS URL unless one is given")
	res = runApp(t, map[string]string{"DELAYQ_NATS_LISTEN": "off"}, "", "serve", "--backend", "nats", "--nats-url", "nats://n:4222")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, natsOff, res.cfg.NATSListen)

	res = runApp(t, nil, "", "serve", "--nats-listen", "none")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "--nats-listen")
	require.Contains(t, res.stderr, "want host:port or off")
	for _, backend := range []string{"memory", "redis"} {
		res = runApp(t, map[string]string{"DELAYQ_NATS_URL": "nats://n:4222"}, "", "serve", "--backend", backend, "--nats-listen", "off")
		require.Equal(t, exitUsage, res.code, backend)
		require.Contains(t, res.stderr, "--nats-listen off", backend)
		require.Contains(t, res.stderr, "--nats-url", backend)
	}
}
