package apicompat_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// grpcStep is one call of the gRPC scenario. Its messages are protojson,
// and may name values of earlier answers by their placeholders.
type grpcStep struct {
	title  string
	method string
	token  string
	// request is the request message; requests, for a client stream,
	// the messages sent one after the other.
	request  string
	requests []string
	// receive is how many messages of a server stream to read before the
	// call is cancelled; 0 reads to the end.
	receive int
}

// service is delayq.v1.DelayqService as the generated descriptor holds it.
func service() protoreflect.ServiceDescriptor {
	return delayqv1.File_delayq_v1_delayq_proto.Services().ByName("DelayqService")
}

// grpcRun runs gRPC steps against a bundle and records them.
type grpcRun struct {
	t  *testing.T
	b  *testBundle
	tr *transcript
	// seen holds the status codes each method answered.
	seen map[string]map[codes.Code]bool
}

// protoJSON renders messages the same way on every run: protojson with
// the proto's field names, then re-indented (protojson's whitespace is
// deliberately unstable).
var protoJSON = protojson.MarshalOptions{UseProtoNames: true}

func (g *grpcRun) render(m proto.Message) string {
	b, err := protoJSON.Marshal(m)
	require.NoError(g.t, err)
	return indentJSON(b)
}

// newMessage returns an empty message of the generated type d names.
func (g *grpcRun) newMessage(d protoreflect.MessageDescriptor) proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	require.NoError(g.t, err)
	return mt.New().Interface()
}

// call runs one step and records it; it returns the messages received.
func (g *grpcRun) call(s grpcStep) []proto.Message {
	g.t.Helper()
	m := service().Methods().ByName(protoreflect.Name(s.method))
	require.NotNil(g.t, m, "no method %s", s.method)
	fullMethod := fmt.Sprintf("/%s/%s", service().FullName(), m.Name())

	requests := s.requests
	if !m.IsStreamingClient() {
		requests = []string{s.request}
	}
	g.tr.section(fmt.Sprintf("%s: %s", s.method, s.title))
	if s.token != "" {
		g.tr.lines(">", "authorization: Bearer "+s.token)
	}
	var in []proto.Message
	for _, r := range requests {
		msg := g.newMessage(m.Input())
		require.NoError(g.t, protojson.Unmarshal([]byte(g.tr.resolve(cmpOr(r, "{}"))), msg), "%s request %s", s.method, r)
		in = append(in, msg)
		g.tr.lines(">", clip(g.tr.normalize(g.render(msg))))
	}

	ctx, cancel := context.WithCancel(g.t.Context())
	defer cancel()
	if s.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.token)
	}
	var header, trailer metadata.MD
	var out []proto.Message
	var err error
	if !m.IsStreamingClient() && !m.IsStreamingServer() {
		msg := g.newMessage(m.Output())
		if err = g.b.conn.Invoke(ctx, fullMethod, in[0], msg, grpc.Header(&header), grpc.Trailer(&trailer)); err == nil {
			out = append(out, msg)
		}
	} else {
		out, header, trailer, err = g.stream(ctx, m, fullMethod, in, s.receive)
		cancel()
	}

	code := status.Code(err)
	if g.seen[s.method] == nil {
		g.seen[s.method] = map[codes.Code]bool{}
	}
	g.seen[s.method][code] = true
	g.showMetadata(header, trailer)
	for _, msg := range out {
		b, merr := protoJSON.Marshal(msg)
		require.NoError(g.t, merr)
		g.tr.collect(b)
		g.tr.lines("<", g.render(msg))
	}
	if s.receive > 0 && err == nil {
		g.tr.lines("<", "(cancelled by the client)")
		return out
	}
	st := status.Convert(err)
	if st.Code() == codes.OK {
		g.tr.lines("<", "OK")
		return out
	}
	g.tr.lines("<", st.Code().String()+": "+st.Message())
	for _, d := range st.Details() {
		if msg, ok := d.(proto.Message); ok {
			// A conflict's job holds dynamic values too (a consumer's
			// address).
			b, merr := protoJSON.Marshal(msg)
			require.NoError(g.t, merr)
			g.tr.collect(b)
			g.tr.lines("<", string(msg.ProtoReflect().Descriptor().FullName())+" "+g.render(msg))
		} else {
			g.tr.lines("<", fmt.Sprintf("undecodable detail: %v", d))
		}
	}
	return out
}

// stream runs a streaming call: it sends in, closes the sending side and
// reads answers to the end, or receive of them. The trailer is read only
// at the end: a stream cut short has none.
func (g *grpcRun) stream(ctx context.Context, m protoreflect.MethodDescriptor, fullMethod string, in []proto.Message, receive int) (out []proto.Message, header, trailer metadata.MD, err error) {
	desc := &grpc.StreamDesc{StreamName: string(m.Name()), ServerStreams: m.IsStreamingServer(), ClientStreams: m.IsStreamingClient()}
	cs, err := g.b.conn.NewStream(ctx, desc, fullMethod)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, msg := range in {
		if err := cs.SendMsg(msg); err != nil {
			break // the answer's status says why
		}
	}
	if err := cs.CloseSend(); err != nil {
		return nil, nil, nil, err
	}
	for receive == 0 || len(out) < receive {
		msg := g.newMessage(m.Output())
		if err := cs.RecvMsg(msg); err != nil {
			header, _ = cs.Header()
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, header, cs.Trailer(), err
		}
		out = append(out, msg)
	}
	header, _ = cs.Header()
	return out, header, nil, nil
}

// skippedMetadata are the answer metadata a transcript leaves out: the
// protocol's own, and the status detail, which is shown decoded.
var skippedMetadata = []string{"content-type", "content-length", "trailer", "date", "grpc-status-details-bin", "grpc-accept-encoding", "grpc-encoding"}

func (g *grpcRun) showMetadata(header, trailer metadata.MD) {
	for _, md := range []metadata.MD{header, trailer} {
		for _, k := range slices.Sorted(maps.Keys(md)) {
			if !slices.Contains(skippedMetadata, k) {
				g.tr.lines("<", k+": "+strings.Join(md[k], ", "))
			}
		}
	}
}

// waitState waits until the job id is in state: for what the server does
// after a call ended, such as releasing a stream's deliveries.
func (g *grpcRun) waitState(id string, state core.State) {
	g.t.Helper()
	require.EventuallyWithT(g.t, func(c *assert.CollectT) {
		job, err := g.b.engine.Get(g.t.Context(), id)
		require.NoError(c, err)
		require.Equal(c, state, job.State)
	}, 10*time.Second, time.Millisecond)
}

// TestGRPCTranscript replays the gRPC scenario and compares it with
// testdata/grpc.txt. It fails when a method of the service has no step
// that succeeds or none that fails.
func TestGRPCTranscript(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := &grpcRun{t: t, b: b, tr: newTranscript(t, "grpc.txt"), seen: map[string]map[codes.Code]bool{}}
	runGRPCScenario(g)
	// The Connect protocol's unary calls are plain HTTP with JSON: a
	// success, and errors with and without a token, as a browser or curl
	// sends them.
	c := &httpRun{t: t, b: b, tr: g.tr, seen: map[string]map[int]bool{}, ops: loadOperations(t)}
	for _, s := range []httpStep{
		{title: "a success", token: tokenAdmin, body: `{"id":"job-1"}`},
		{title: "an error", token: tokenAdmin, body: `{"id":"nope"}`},
		{title: "no token", body: `{"id":"job-1"}`},
		{title: "not JSON", token: tokenAdmin, body: `{"id":`},
	} {
		s.method, s.path = "POST", "/delayq.v1.DelayqService/GetJob"
		c.do(s)
	}
	g.tr.complete = true

	var missing []string
	all := map[codes.Code]bool{}
	methods := service().Methods()
	for i := range methods.Len() {
		name := string(methods.Get(i).Name())
		seen := g.seen[name]
		maps.Copy(all, seen)
		if !seen[codes.OK] {
			missing = append(missing, name+": no success")
		}
		if len(seen) < 2 {
			missing = append(missing, name+": no error")
		}
	}
	require.Empty(t, missing, "methods of delayq.v1.DelayqService the scenario does not cover")
	for _, c := range []codes.Code{codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied, codes.NotFound,
		codes.Aborted, codes.ResourceExhausted} {
		require.True(t, all[c], "no step answered %s", c)
	}
}
