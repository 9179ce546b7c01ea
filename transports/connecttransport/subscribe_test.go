package connecttransport_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/transports/connecttransport"
)

// subscription is a Subscribe stream of grpc-go.
type subscription struct {
	stream grpc.ClientStream
	cancel context.CancelFunc
}

// subscribe opens a Subscribe stream with grpc-go.
func (b *testBundle) subscribe(t *testing.T, token string, req *delayqv1.SubscribeRequest) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	cs, err := b.conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Subscribe", ServerStreams: true}, method("Subscribe"))
	require.NoError(t, err)
	require.NoError(t, cs.SendMsg(req))
	require.NoError(t, cs.CloseSend())
	return &subscription{stream: cs, cancel: cancel}
}

// next returns the next delivery, or the error that ended the stream.
func (s *subscription) next() (*delayqv1.Delivery, error) {
	var m delayqv1.SubscribeResponse
	if err := s.stream.RecvMsg(&m); err != nil {
		return nil, err
	}
	return m.Delivery, nil
}

func (s *subscription) mustNext(t *testing.T) *delayqv1.Delivery {
	t.Helper()
	d, err := s.next()
	require.NoError(t, err)
	return d
}

// reservedCount is how many jobs of topic are reserved.
func (b *testBundle) reservedCount(t *testing.T, topic string) int64 {
	t.Helper()
	tp, err := b.engine.GetTopic(context.Background(), topic)
	require.NoError(t, err)
	return tp.Counts.Reserved
}

// TestSubscribeCredit checks that a stream holds at most prefetch
// deliveries, that an Ack through the server gives credit back at once, and
// that a stream that ends releases what it held.
func TestSubscribeCredit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.grpc.Recheck = time.Hour })
	for range 3 {
		b.push(t, "mail", `{"n":1}`)
	}
	sub := b.subscribe(t, "", &delayqv1.SubscribeRequest{Topic: "mail", Prefetch: 2})
	d1, d2 := sub.mustNext(t), sub.mustNext(t)
	require.Equal(t, `{"n":1}`, d1.Body)
	require.NotEmpty(t, d1.Lease)
	require.EqualValues(t, 2, b.reservedCount(t, "mail"), "no credit for a third")

	b.must(t, "Ack", &delayqv1.AckRequest{Id: d1.Id, Lease: d1.Lease}, &delayqv1.AckResponse{})
	d3 := sub.mustNext(t)
	require.NotEqual(t, d2.Id, d3.Id)
	b.must(t, "Touch", &delayqv1.TouchRequest{Id: d3.Id, Lease: d3.Lease}, &delayqv1.TouchResponse{})

	sub.cancel()
	require.Eventually(t, func() bool { return b.job(t, d3.Id).State == core.StateReady }, 10*time.Second, 5*time.Millisecond)
	for _, id := range []string{d2.Id, d3.Id} {
		j := b.job(t, id)
		require.Equal(t, core.StateReady, j.State)
		require.Equal(t, "subscriber disconnected", j.LastError)
	}
	require.Equal(t, core.StateDone, b.job(t, d1.Id).State)
}

// TestSubscribeRecheck checks that a delivery settled elsewhere (here
// through the engine, as another instance would) gives its credit back when
// the stream reads its deliveries back.
func TestSubscribeRecheck(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.grpc.Recheck = 20 * time.Millisecond })
	b.push(t, "mail", "1")
	b.push(t, "mail", "2")
	sub := b.subscribe(t, "", &delayqv1.SubscribeRequest{Topic: "mail", Prefetch: 1})
	d1 := sub.mustNext(t)
	require.NoError(t, b.engine.Ack(context.Background(), &core.AckJobParams{ID: d1.Id, Lease: d1.Lease}))
	d2 := sub.mustNext(t)
	require.NotEqual(t, d1.Id, d2.Id)
}

// TestSubscribeInvalid checks the refusals before a stream starts.
func TestSubscribeInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.grpc.MaxSubscribers = 1 })
	_, err := b.subscribe(t, "", &delayqv1.SubscribeRequest{Topic: "a b"}).next()
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "topic")
	_, err = b.subscribe(t, "", &delayqv1.SubscribeRequest{Topic: "mail", Prefetch: connecttransport.PrefetchMax + 1}).next()
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "prefetch")

	b.push(t, "mail", "1")
	first := b.subscribe(t, "", &delayqv1.SubscribeRequest{Topic: "mail"})
	first.mustNext(t)
	_, err = b.subscribe(t, "", &delayqv1.SubscribeRequest{Topic: "mail"}).next()
	requireStatus(t, err, codes.Unavailable, "unavailable", "")
}

// TestStopEndsStreams checks that Stop ends a stream with Unavailable after
// releasing its deliveries, and refuses new ones.
func TestStopEndsStreams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, "mail", "1")
	sub := b.subscribe(t, "", &delayqv1.SubscribeRequest{Topic: "mail"})
	sub.mustNext(t)
	require.NoError(t, b.grpc.Stop(t.Context()))
	j := b.job(t, id)
	require.Equal(t, core.StateReady, j.State, "released before Stop returned")
	_, err := sub.next()
	requireStatus(t, err, codes.Unavailable, "unavailable", "")
	_, err = b.subscribe(t, "", &delayqv1.SubscribeRequest{Topic: "mail"}).next()
	requireStatus(t, err, codes.Unavailable, "unavailable", "")
}

// TestConnectProtocols calls the server with connect-go's client in each
// protocol it speaks: Connect and gRPC-Web over HTTP/1.1, gRPC over h2c,
// a unary call and a Subscribe stream each.
func TestConnectProtocols(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name string
		h2c  bool
		opts []connect.ClientOption
	}{
		{"connect", false, nil},
		{"grpc-web", false, []connect.ClientOption{connect.WithGRPCWeb()}},
		{"grpc", true, []connect.ClientOption{connect.WithGRPC()}},
	} {
		c := b.connectClient(t, tc.h2c, tc.opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		topic := "proto." + tc.name
		res, err := c.Push(ctx, connect.NewRequest(&delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: topic, Body: `"hi"`}}))
		require.NoError(t, err, tc.name)
		stream, err := c.Subscribe(ctx, connect.NewRequest(&delayqv1.SubscribeRequest{Topic: topic}))
		require.NoError(t, err, tc.name)
		require.True(t, stream.Receive(), "%s: %v", tc.name, stream.Err())
		d := stream.Msg().Delivery
		require.Equal(t, res.Msg.Id, d.Id)
		require.Equal(t, `"hi"`, d.Body)
		_, err = c.Ack(ctx, connect.NewRequest(&delayqv1.AckRequest{Id: d.Id, Lease: d.Lease}))
		require.NoError(t, err, tc.name)
		_, err = c.GetJob(ctx, connect.NewRequest(&delayqv1.GetJobRequest{Id: "nope"}))
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), tc.name)
		require.NoError(t, stream.Close())
		cancel()
		require.Eventually(t, func() bool { return b.job(t, d.Id).State == core.StateDone }, 10*time.Second, 5*time.Millisecond)
	}
}

// TestSubscribeSlowReader checks that a subscriber that does not read its
// stream loses it within Config.SendTimeout once the connection's buffers
// are full, and that what it held is released.
func TestSubscribeSlowReader(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) {
		c.grpc.SendTimeout = 200 * time.Millisecond
		c.grpc.Recheck = time.Hour
	})
	// More than a loopback connection buffers: 48 bodies of 1 MB, random
	// so that compression does not shrink them.
	raw := make([]byte, 700<<10)
	_, _ = rand.Read(raw)
	body := `"` + base64.StdEncoding.EncodeToString(raw) + `"`
	for range 48 {
		b.push(t, "big", body)
	}
	c := b.connectClient(t, false) // HTTP/1.1: one connection, one stream
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.Subscribe(ctx, connect.NewRequest(&delayqv1.SubscribeRequest{Topic: "big", Prefetch: 48}))
	require.NoError(t, err)
	defer func() { _ = stream.Close() }()
	// Nothing is read: the server gives up on the stream and releases.
	require.Eventually(t, func() bool {
		tp, err := b.engine.GetTopic(context.Background(), "big")
		return err == nil && tp.Counts.Reserved == 0 && tp.Counts.Ready == 48
	}, 20*time.Second, 10*time.Millisecond)
}

// TestSubscribeCancelRunning checks that CancelJob with running ends a
// delivery the stream holds, tells it with a message naming the job and
// no delivery, gives its credit back, and that its ack is then Aborted;
// without running the cancel of a reserved job is Aborted.
func TestSubscribeCancelRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.grpc.Recheck = time.Hour })
	for range 2 {
		b.push(t, "work", `{"n":1}`)
	}
	sub := b.subscribe(t, "", &delayqv1.SubscribeRequest{Topic: "work", Prefetch: 1})
	d := sub.mustNext(t)
	err := b.call(t, "", "CancelJob", &delayqv1.CancelJobRequest{Id: d.Id}, &delayqv1.CancelJobResponse{})
	requireStatus(t, err, codes.Aborted, "conflict", "")
	b.must(t, "CancelJob", &delayqv1.CancelJobRequest{Id: d.Id, Running: true}, &delayqv1.CancelJobResponse{})

	var m delayqv1.SubscribeResponse
	require.NoError(t, sub.stream.RecvMsg(&m))
	require.Equal(t, d.Id, m.Cancelled)
	require.Nil(t, m.Delivery)
	next := sub.mustNext(t)
	require.NotEqual(t, d.Id, next.Id, "the credit came back")

	err = b.call(t, "", "Ack", &delayqv1.AckRequest{Id: d.Id, Lease: d.Lease}, &delayqv1.AckResponse{})
	detail := requireStatus(t, err, codes.Aborted, "conflict", "")
	require.Contains(t, detail.Message, "cancelled while its delivery (attempt 1) ran")
	require.Equal(t, core.StateCancelled, b.job(t, d.Id).State)
}
