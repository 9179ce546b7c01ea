package connecttransport_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// TestClaimTouchNackAck settles deliveries with each unary call.
func TestClaimTouchNackAck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, "mail", `{"to":"a"}`)

	var claimed delayqv1.ClaimResponse
	b.must(t, "Claim", &delayqv1.ClaimRequest{Topic: "mail", Max: proto.Int32(5)}, &claimed)
	require.Len(t, claimed.Jobs, 1)
	d := claimed.Jobs[0]
	require.Equal(t, id, d.Id)
	require.Equal(t, `{"to":"a"}`, d.Body)
	require.EqualValues(t, 1, d.Attempt)
	require.NotEmpty(t, d.Lease)

	var touched delayqv1.TouchResponse
	b.must(t, "Touch", &delayqv1.TouchRequest{Id: id, Lease: d.Lease}, &touched)
	require.NotEmpty(t, touched.LeaseExpiresAt)

	err := b.call(t, "", "Nack", &delayqv1.NackRequest{Id: id, Lease: d.Lease, Delay: "later"}, &delayqv1.NackResponse{})
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "delay")
	require.Equal(t, core.StateReserved, b.job(t, id).State, "a refused nack changes nothing")

	b.must(t, "Nack", &delayqv1.NackRequest{Id: id, Lease: d.Lease, Delay: "0s", Error: "smtp down"}, &delayqv1.NackResponse{})
	j := b.job(t, id)
	require.Equal(t, "smtp down", j.LastError)

	// The old lease is lost; a new claim gets a new one.
	err = b.call(t, "", "Ack", &delayqv1.AckRequest{Id: id, Lease: d.Lease}, &delayqv1.AckResponse{})
	requireStatus(t, err, codes.Aborted, "conflict", "")
	b.must(t, "Claim", &delayqv1.ClaimRequest{Topic: "mail", Wait: "1s"}, &claimed)
	require.Len(t, claimed.Jobs, 1)
	require.EqualValues(t, 2, claimed.Jobs[0].Attempt)
	b.must(t, "Ack", &delayqv1.AckRequest{Id: id, Lease: claimed.Jobs[0].Lease}, &delayqv1.AckResponse{})
	require.Equal(t, core.StateDone, b.job(t, id).State)

	err = b.call(t, "", "Ack", &delayqv1.AckRequest{Id: "nope", Lease: "x"}, &delayqv1.AckResponse{})
	requireStatus(t, err, codes.NotFound, "not_found", "")
	err = b.call(t, "", "Ack", &delayqv1.AckRequest{Id: id}, &delayqv1.AckResponse{})
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "lease")

	// An empty claim waits and answers none.
	start := time.Now()
	b.must(t, "Claim", &delayqv1.ClaimRequest{Topic: "mail", Wait: "200ms"}, &claimed)
	require.Empty(t, claimed.Jobs)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	err = b.call(t, "", "Claim", &delayqv1.ClaimRequest{Topic: "mail", Max: proto.Int32(0)}, &claimed)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "max")
}

// TestAckNackBatch checks that each item of a batch settles or fails alone.
func TestAckNackBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 4 {
		b.push(t, "mail", "1")
	}
	var claimed delayqv1.ClaimResponse
	b.must(t, "Claim", &delayqv1.ClaimRequest{Topic: "mail", Max: proto.Int32(4)}, &claimed)
	require.Len(t, claimed.Jobs, 4)
	js := claimed.Jobs

	var acks delayqv1.AckBatchResponse
	b.must(t, "AckBatch", &delayqv1.AckBatchRequest{Acks: []*delayqv1.AckRequest{
		{Id: js[0].Id, Lease: js[0].Lease},
		{Id: js[1].Id, Lease: "wrong"},
		{Id: "nope", Lease: "x"},
	}}, &acks)
	require.Len(t, acks.Results, 3)
	require.Nil(t, acks.Results[0].Error)
	require.Equal(t, "conflict", acks.Results[1].Error.GetCode())
	require.Equal(t, "not_found", acks.Results[2].Error.GetCode())
	require.Equal(t, "nope", acks.Results[2].Id)
	require.Equal(t, core.StateDone, b.job(t, js[0].Id).State)

	var nacks delayqv1.NackBatchResponse
	b.must(t, "NackBatch", &delayqv1.NackBatchRequest{Nacks: []*delayqv1.NackRequest{
		{Id: js[1].Id, Lease: js[1].Lease, Delay: "1h", Error: "later"},
		{Id: js[2].Id, Lease: js[2].Lease, Delay: "bad"},
	}}, &nacks)
	require.Nil(t, nacks.Results[0].Error)
	require.Equal(t, "delay", nacks.Results[1].Error.GetField())
	require.Equal(t, core.StateScheduled, b.job(t, js[1].Id).State)
	require.Equal(t, core.StateReserved, b.job(t, js[2].Id).State)

	err := b.call(t, "", "AckBatch", &delayqv1.AckBatchRequest{}, &acks)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "acks")
}

// TestClaimWaitsPastRequestDeadlines checks that a claim's wait is cut by
// none of the deadlines the HTTP API sets for a request (its body's read,
// its answer's write, which Claim moves past the wait), over HTTP/1.1 (the
// Connect protocol) as over HTTP/2.
func TestClaimWaitsPastRequestDeadlines(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) {
		c.http.BodyReadTimeout, c.http.WriteTimeout = 50*time.Millisecond, 100*time.Millisecond
	})
	for _, h2c := range []bool{false, true} {
		var opts []connect.ClientOption
		if h2c {
			opts = append(opts, connect.WithGRPC())
		}
		c := b.connectClient(t, h2c, opts...)
		start := time.Now()
		res, err := c.Claim(t.Context(), connect.NewRequest(&delayqv1.ClaimRequest{Topic: "idle", Wait: "400ms"}))
		require.NoError(t, err, "h2c %v", h2c)
		require.Empty(t, res.Msg.Jobs)
		require.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "h2c %v: the wait ran its course", h2c)
	}
}
