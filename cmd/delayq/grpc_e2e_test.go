package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// grpcTokens writes a tokens file with a push, a consume and an admin token
// and returns its path.
func grpcTokens(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(path, []byte(
		"- name: producer\n  token: grpc-push-0123456789\n  scopes: [push]\n"+
			"- name: worker\n  token: grpc-consume-0123456789\n  scopes: [consume]\n"+
			"- name: ops\n  token: grpc-admin-0123456789\n  scopes: [admin]\n"), 0o600))
	return path
}

// grpcCall invokes a unary method of delayq.v1.DelayqService with token.
func grpcCall(t *testing.T, conn *grpc.ClientConn, token, name string, req, res proto.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return conn.Invoke(ctx, "/delayq.v1.DelayqService/"+name, req, res)
}

// TestE2EGRPC runs delayq serve with tokens and calls its gRPC API with
// grpc-go over plain TCP (h2c) on the HTTP API's own port: push, a
// Subscribe stream settled with Ack, reflection, refusals, and a SIGTERM
// that ends an open stream, releases what it held and exits 0.
func TestE2EGRPC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := grpcTokens(t, dir)
	// Without a drain: the SIGTERM below tests that a stream's held
	// delivery is released at once (TestE2EDrain tests the drain).
	args := append(defaultArgs(filepath.Join(dir, "data")), "--tokens-file", tokens, "--drain-timeout", "0")
	srv := startServer(t, args...)
	u, err := url.Parse(srv.HTTPURL)
	require.NoError(t, err)
	conn, err := grpc.NewClient("passthrough:///"+u.Host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	// Without a token, or with one lacking the scope, the call is refused.
	var pushed delayqv1.PushResponse
	push := &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "e2e.grpc", Body: `{"n": 1}`, Id: "g1"}}
	require.Equal(t, codes.Unauthenticated, status.Code(grpcCall(t, conn, "", "Push", push, &pushed)))
	require.Equal(t, codes.PermissionDenied, status.Code(grpcCall(t, conn, "grpc-consume-0123456789", "Push", push, &pushed)))
	require.NoError(t, grpcCall(t, conn, "grpc-push-0123456789", "Push", push, &pushed))
	require.Equal(t, "ready", pushed.State)

	// The HTTP API on the same port sees the job.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.HTTPURL+"/v1/jobs/g1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer grpc-push-0123456789")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", body)
	require.Contains(t, string(body), `"body":{"n": 1}`)

	// A Subscribe stream delivers it; Ack settles it.
	sctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer grpc-consume-0123456789"))
	defer cancel()
	stream, err := conn.NewStream(sctx, &grpc.StreamDesc{ServerStreams: true}, "/delayq.v1.DelayqService/Subscribe")
	require.NoError(t, err)
	require.NoError(t, stream.SendMsg(&delayqv1.SubscribeRequest{Topic: "e2e.grpc", Prefetch: 4}))
	require.NoError(t, stream.CloseSend())
	var msg delayqv1.SubscribeResponse
	require.NoError(t, stream.RecvMsg(&msg))
	require.Equal(t, "g1", msg.Delivery.Id)
	require.Equal(t, `{"n": 1}`, msg.Delivery.Body)
	require.NoError(t, grpcCall(t, conn, "grpc-consume-0123456789", "Ack",
		&delayqv1.AckRequest{Id: "g1", Lease: msg.Delivery.Lease}, &delayqv1.AckResponse{}))
	var got delayqv1.GetJobResponse
	require.NoError(t, grpcCall(t, conn, "grpc-consume-0123456789", "GetJob", &delayqv1.GetJobRequest{Id: "g1"}, &got))
	require.Equal(t, "done", got.Job.State)

	// Reflection lists the service, as grpcurl asks.
	rctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer grpc-admin-0123456789")
	refl, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(rctx)
	require.NoError(t, err)
	require.NoError(t, refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}))
	rres, err := refl.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range rres.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	require.Contains(t, names, "delayq.v1.DelayqService")
	require.NoError(t, refl.CloseSend())

	// SIGTERM with the stream open: the server ends it and exits 0
	// promptly, having released a delivery it held.
	require.NoError(t, grpcCall(t, conn, "grpc-push-0123456789", "Push",
		&delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "e2e.grpc", Id: "g2"}}, &pushed))
	require.NoError(t, stream.RecvMsg(&msg))
	require.Equal(t, "g2", msg.Delivery.Id)
	begin := time.Now()
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 15*time.Second))
	require.Less(t, time.Since(begin), 5*time.Second)
	err = stream.RecvMsg(&msg)
	require.Error(t, err)
	require.False(t, errors.Is(err, io.EOF), "the stream ends with a status, not as done: %v", err)
	require.Contains(t, srv.log(), "intake and deliveries stopped")

	// The held delivery was handed back before the store closed.
	srv = startServer(t, args...)
	u, err = url.Parse(srv.HTTPURL)
	require.NoError(t, err)
	conn2, err := grpc.NewClient("passthrough:///"+u.Host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn2.Close() })
	require.NoError(t, grpcCall(t, conn2, "grpc-push-0123456789", "GetJob", &delayqv1.GetJobRequest{Id: "g2"}, &got))
	require.Equal(t, "ready", got.Job.State)
	require.Equal(t, "subscriber disconnected", got.Job.LastError)
}

// TestE2EGRPCOverTLS calls the gRPC API with grpc-go over TLS (HTTP/2 by
// ALPN) on the HTTP API's listener.
func TestE2EGRPCOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off",
		"--tls-cert", certFile, "--tls-key", keyFile, "--tokens-file", grpcTokens(t, dir))
	host := strings.TrimPrefix(srv.HTTPURL, "http://")
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	conn, err := grpc.NewClient("passthrough:///"+host, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	var pushed delayqv1.PushResponse
	require.NoError(t, grpcCall(t, conn, "grpc-push-0123456789", "Push",
		&delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "e2e.tls", Delay: "1h"}}, &pushed))
	require.Equal(t, "scheduled", pushed.State)
}

// TestE2EHTTP2StreamsCapped checks that the server announces its cap of
// concurrent streams per connection in its HTTP/2 SETTINGS (over h2c, as
// gRPC clients connect), so that one connection cannot hold more calls.
func TestE2EHTTP2StreamsCapped(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off")
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.HTTPURL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, c)
	require.NoError(t, fr.WriteSettings())
	f, err := fr.ReadFrame()
	require.NoError(t, err)
	settings, ok := f.(*http2.SettingsFrame)
	require.True(t, ok, "first frame is %T", f)
	v, ok := settings.Value(http2.SettingMaxConcurrentStreams)
	require.True(t, ok, "no SETTINGS_MAX_CONCURRENT_STREAMS")
	require.EqualValues(t, maxStreamsPerConnection, v)
}
