package connecttransport_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r    io.Reader
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// gzipBomb returns a gzip stream of n zero bytes (a few KiB per MiB).
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := io.Copy(zw, io.LimitReader(zeros{}, int64(n)))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestRefusedBeforeBodyRead checks that, with tokens, a call without a
// valid token or scope is answered before its body is read: a compressed
// body that would inflate to the batch limit costs the server no read, in
// each protocol.
func TestRefusedBeforeBodyRead(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	bomb := gzipBomb(t, 30<<20)
	var envelope bytes.Buffer
	envelope.WriteByte(1) // compressed
	require.NoError(t, binary.Write(&envelope, binary.BigEndian, uint32(len(bomb))))
	envelope.Write(bomb)
	for _, tc := range []struct {
		name, token, contentType, procedure string
		body                                []byte
		header                              map[string]string
	}{
		{"grpc no token", "", "application/grpc", "GetJob", envelope.Bytes(), map[string]string{"Grpc-Encoding": "gzip"}},
		{"grpc bad token", "not-a-token-0123456789", "application/grpc", "Import", envelope.Bytes(), map[string]string{"Grpc-Encoding": "gzip"}},
		{"grpc-web no scope", consumeToken, "application/grpc-web+proto", "PushBatch", envelope.Bytes(), map[string]string{"Grpc-Encoding": "gzip"}},
		{"connect no token", "", "application/proto", "GetJob", bomb, map[string]string{"Content-Encoding": "gzip"}},
		{"connect json no token", "", "application/json", "Push", bomb, map[string]string{"Content-Encoding": "gzip"}},
		{"reflection no token", "", "application/grpc", "", envelope.Bytes(), map[string]string{"Grpc-Encoding": "gzip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingReader{r: bytes.NewReader(tc.body)}
			path := method(tc.procedure)
			if tc.procedure == "" {
				path = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
			}
			req := httptest.NewRequest(http.MethodPost, path, body)
			req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
			req.Header.Set("Content-Type", tc.contentType)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			b.srv.Config.Handler.ServeHTTP(rec, req)
			require.Zero(t, body.read.Load(), "body read before the token was checked")
			answer := rec.Header().Get("Grpc-Status") + rec.Body.String()
			require.Regexp(t, `^(16|7)|"code":"(unauthenticated|permission_denied)"`, answer)
		})
	}
}

// TestReadLimitPerProcedure checks that a compressed message is bounded,
// once inflated, by what its procedure takes: a small call by 256 KiB, a
// push by the body limit and its envelope, a batch by MaxRequestBytes.
func TestReadLimitPerProcedure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gz := grpc.UseCompressor(grpcgzip.Name)
	call := func(name string, req, res proto.Message) error {
		return b.conn.Invoke(t.Context(), method(name), req, res, gz)
	}
	err := call("GetJob", &delayqv1.GetJobRequest{Id: strings.Repeat("a", 300<<10)}, &delayqv1.GetJobResponse{})
	require.Equal(t, codes.ResourceExhausted, statusCode(err), "%v", err)

	body := `"` + strings.Repeat("a", 900<<10) + `"`
	push := &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "big", Body: body}}
	require.NoError(t, call("Push", push, &delayqv1.PushResponse{}), "a push takes the body limit")
	push.Job.Body = `"` + strings.Repeat("a", 1200<<10) + `"`
	require.Equal(t, codes.ResourceExhausted, statusCode(call("Push", push, &delayqv1.PushResponse{})))

	batch := &delayqv1.PushBatchRequest{}
	for range 4 {
		batch.Jobs = append(batch.Jobs, &delayqv1.JobSpec{Topic: "big", Body: body})
	}
	var pushed delayqv1.PushBatchResponse
	require.NoError(t, call("PushBatch", batch, &pushed), "a batch takes MaxRequestBytes")
	require.Len(t, pushed.Results, 4)
}

// statusCode is the gRPC code of err, codes.OK for nil.
func statusCode(err error) codes.Code { return status.Code(err) }
