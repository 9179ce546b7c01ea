package connecttransport_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/transports/wire"
)

// TestPushGetCancel drives a job's life with a real grpc-go client: push
// with every field, read it back, replace it, find and cancel it by key.
func TestPushGetCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var pushed delayqv1.PushResponse
	b.must(t, "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{
		Topic: "orders.close", Body: `{"order": 42}`, Delay: "15m", Id: "order-42", Ttr: "45s",
		MaxAttempts: proto.Int32(3), Key: "k42", Priority: -5, Backoff: &delayqv1.JobBackoff{Delays: []string{"1m", "3000"}},
		ExpiresIn: "1h",
	}}, &pushed)
	require.Equal(t, "order-42", pushed.Id)
	require.Equal(t, "scheduled", pushed.State)
	require.False(t, pushed.Replaced)

	var got delayqv1.GetJobResponse
	b.must(t, "GetJob", &delayqv1.GetJobRequest{Id: "order-42"}, &got)
	j := got.Job
	require.Equal(t, `{"order": 42}`, j.Body, "the body is kept byte for byte")
	require.Equal(t, "orders.close", j.Topic)
	require.Equal(t, "k42", j.Key)
	require.Equal(t, "45s", j.Ttr)
	require.EqualValues(t, 3, j.MaxAttempts)
	require.EqualValues(t, -5, j.Priority)
	require.Equal(t, []string{"1m0s", "3s"}, j.Backoff.Delays)
	require.Equal(t, pushed.RunAt, j.RunAt)
	require.Equal(t, b.job(t, "order-42").RunAt.Add(time.Hour).Format(wire.TimeLayout), j.ExpiresAt, "expires_in counts from run_at")
	require.Empty(t, j.LeaseExpiresAt)
	stored := b.job(t, "order-42")
	require.Equal(t, []byte(`{"order": 42}`), []byte(stored.Body))

	// The same id again is a conflict that shows the existing job.
	err := b.call(t, "", "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "orders.close", Id: "order-42"}}, &pushed)
	detail := requireStatus(t, err, codes.Aborted, "conflict", "")
	require.Equal(t, "order-42", detail.Job.GetId())

	// Replace reschedules it to now.
	b.must(t, "Replace", &delayqv1.ReplaceRequest{Job: &delayqv1.JobSpec{Topic: "orders.close", Id: "order-42", Key: "k42", Body: "[1]"}}, &pushed)
	require.True(t, pushed.Replaced)
	require.Equal(t, "ready", pushed.State)

	var found delayqv1.FindJobsResponse
	b.must(t, "FindJobs", &delayqv1.FindJobsRequest{Topic: "orders.close", Key: "k42", Limit: 1}, &found)
	require.Len(t, found.Jobs, 1)
	require.Equal(t, "order-42", found.NextAfter, "a full page names the next")

	var cancelled delayqv1.CancelByKeyResponse
	b.must(t, "CancelByKey", &delayqv1.CancelByKeyRequest{Topic: "orders.close", Key: "k42"}, &cancelled)
	require.Equal(t, []string{"order-42"}, cancelled.Cancelled)
	require.Empty(t, cancelled.Reserved)
	require.Equal(t, core.StateCancelled, b.job(t, "order-42").State)

	err = b.call(t, "", "CancelJob", &delayqv1.CancelJobRequest{Id: "order-42"}, &delayqv1.CancelJobResponse{})
	requireStatus(t, err, codes.NotFound, "not_found", "")
	b.push(t, "orders.close", "1", func(p *core.PushParams) { p.ID = "other" })
	b.must(t, "CancelJob", &delayqv1.CancelJobRequest{Id: "other"}, &delayqv1.CancelJobResponse{})
	require.Equal(t, core.StateCancelled, b.job(t, "other").State)

	err = b.call(t, "", "GetJob", &delayqv1.GetJobRequest{Id: "nope"}, &got)
	d := requireStatus(t, err, codes.NotFound, "not_found", "")
	require.Equal(t, `job "nope" not found`, d.Message)
}

// TestPushInvalid checks that bad input is InvalidArgument naming the
// field, and stores nothing.
func TestPushInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name  string
		spec  *delayqv1.JobSpec
		field string
	}{
		{"no job", nil, "job"},
		{"bad delay", &delayqv1.JobSpec{Topic: "t", Id: "x", Delay: "soon"}, "delay"},
		{"bad run_at", &delayqv1.JobSpec{Topic: "t", Id: "x", RunAt: "tomorrow"}, "run_at"},
		{"both times", &delayqv1.JobSpec{Topic: "t", Id: "x", Delay: "1s", RunAt: "2026-11-21T10:00:00Z"}, "delay"},
		{"zero max_attempts", &delayqv1.JobSpec{Topic: "t", Id: "x", MaxAttempts: proto.Int32(0)}, "max_attempts"},
		{"zero ttr", &delayqv1.JobSpec{Topic: "t", Id: "x", Ttr: "0s"}, "ttr"},
		{"priority", &delayqv1.JobSpec{Topic: "t", Id: "x", Priority: 11}, "priority"},
		{"backoff delay", &delayqv1.JobSpec{Topic: "t", Id: "x", Backoff: &delayqv1.JobBackoff{Delays: []string{"1s", "x"}}}, "backoff.delays[1]"},
		{"body not JSON", &delayqv1.JobSpec{Topic: "t", Id: "x", Body: "{"}, "body"},
		{"bad topic", &delayqv1.JobSpec{Topic: "a b", Id: "x"}, "topic"},
		{"bad expires_in", &delayqv1.JobSpec{Topic: "t", Id: "x", ExpiresIn: "soon"}, "expires_in"},
		{"expires_at in the past", &delayqv1.JobSpec{Topic: "t", Id: "x", ExpiresAt: "2020-01-01T00:00:00Z"}, "expires_at"},
		{"expires_at before run_at", &delayqv1.JobSpec{Topic: "t", Id: "x", Delay: "2h", ExpiresAt: time.Now().Add(time.Hour).Format(time.RFC3339)}, "expires_at"},
	} {
		err := b.call(t, "", "Push", &delayqv1.PushRequest{Job: tc.spec}, &delayqv1.PushResponse{})
		requireStatus(t, err, codes.InvalidArgument, "invalid_argument", tc.field)
	}
	err := b.call(t, "", "Replace", &delayqv1.ReplaceRequest{Job: &delayqv1.JobSpec{Topic: "t"}}, &delayqv1.PushResponse{})
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "id")
	ts, err := b.engine.ListTopics(t.Context())
	require.NoError(t, err)
	require.Empty(t, ts, "nothing was stored")
}

// TestPushBatch checks that each job of a batch succeeds or fails alone and
// that the batch is bounded.
func TestPushBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.limits.MaxBatch = 3 })
	var res delayqv1.PushBatchResponse
	b.must(t, "PushBatch", &delayqv1.PushBatchRequest{Jobs: []*delayqv1.JobSpec{
		{Topic: "t", Id: "a", Body: `"x"`},
		{Topic: "t", Id: "b", Ttr: "forever"},
		{Topic: "t", Id: "a"},
	}}, &res)
	require.Len(t, res.Results, 3)
	require.Equal(t, "a", res.Results[0].Job.GetId())
	require.Nil(t, res.Results[0].Error)
	require.Equal(t, "invalid_argument", res.Results[1].Error.GetCode())
	require.Equal(t, "ttr", res.Results[1].Error.GetField())
	require.Equal(t, "conflict", res.Results[2].Error.GetCode())
	require.Equal(t, json.RawMessage(`"x"`), b.job(t, "a").Body)

	err := b.call(t, "", "PushBatch", &delayqv1.PushBatchRequest{}, &res)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "jobs")
	err = b.call(t, "", "PushBatch", &delayqv1.PushBatchRequest{Jobs: make([]*delayqv1.JobSpec, 4)}, &res)
	requireStatus(t, err, codes.ResourceExhausted, "too_large", "jobs")
}

// TestPushTraceParent checks that a well-formed traceparent in the call's
// metadata becomes the job's trace, and a malformed one is ignored.
func TestPushTraceParent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for id, header := range map[string]string{"traced": tp, "untraced": "00-zz"} {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", header)
		err := b.conn.Invoke(ctx, method("Push"), &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "t", Id: id}}, &delayqv1.PushResponse{})
		require.NoError(t, err)
	}
	require.Equal(t, tp, b.job(t, "traced").TraceParent)
	require.Empty(t, b.job(t, "untraced").TraceParent)
}
