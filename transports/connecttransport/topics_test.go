package connecttransport_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// TestTopics configures, reads, pauses and drops a topic, and requeues its
// dead job.
func TestTopics(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var put delayqv1.PutTopicResponse
	b.must(t, "PutTopic", &delayqv1.PutTopicRequest{Name: "mail", Config: &delayqv1.TopicConfig{
		Ttr: "1m", MaxAttempts: 1, Backoff: &delayqv1.BackoffConfig{Delays: []string{"1s", "2s"}},
		Rate: &delayqv1.RateConfig{Limit: 10, Period: "1s"}, UniqueKeys: "reject",
	}}, &put)
	tp := put.Topic
	require.Equal(t, "mail", tp.Name)
	require.True(t, tp.Configured)
	require.Equal(t, "1m0s", tp.Ttr)
	require.EqualValues(t, 1, tp.MaxAttempts)
	require.Equal(t, []string{"1s", "2s"}, tp.Backoff.Delays)
	require.EqualValues(t, 10, tp.Rate.GetLimit())
	require.Equal(t, "consumer", tp.Delivery.Type)
	require.Equal(t, "reject", tp.UniqueKeys)

	err := b.call(t, "", "PutTopic", &delayqv1.PutTopicRequest{Name: "mail", Config: &delayqv1.TopicConfig{Ttr: "1d"}}, &put)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "ttr")
	err = b.call(t, "", "PutTopic", &delayqv1.PutTopicRequest{Name: "mail", Config: &delayqv1.TopicConfig{
		Delivery: &delayqv1.DeliveryConfig{Url: "http://example.com"}}}, &put)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "delivery.url")
	var got delayqv1.GetTopicResponse
	b.must(t, "GetTopic", &delayqv1.GetTopicRequest{Name: "mail"}, &got)
	require.Equal(t, "1m0s", got.Topic.Ttr, "a refused put changes nothing")

	// A job that fails its only attempt goes dead; requeue brings it back.
	id := b.push(t, "mail", "1")
	var claimed delayqv1.ClaimResponse
	b.must(t, "Claim", &delayqv1.ClaimRequest{Topic: "mail"}, &claimed)
	b.must(t, "Nack", &delayqv1.NackRequest{Id: id, Lease: claimed.Jobs[0].Lease}, &delayqv1.NackResponse{})
	var dead delayqv1.ListDeadResponse
	b.must(t, "ListDead", &delayqv1.ListDeadRequest{Topic: "mail"}, &dead)
	require.Len(t, dead.Jobs, 1)
	require.Equal(t, id, dead.Jobs[0].Id)
	b.must(t, "Requeue", &delayqv1.RequeueRequest{Id: id}, &delayqv1.RequeueResponse{})
	require.Equal(t, core.StateReady, b.job(t, id).State)
	err = b.call(t, "", "Requeue", &delayqv1.RequeueRequest{Id: id}, &delayqv1.RequeueResponse{})
	requireStatus(t, err, codes.Aborted, "conflict", "")

	var paused delayqv1.PauseTopicResponse
	b.must(t, "PauseTopic", &delayqv1.PauseTopicRequest{Name: "mail"}, &paused)
	require.True(t, paused.Topic.Paused)
	require.EqualValues(t, 1, paused.Topic.Counts.Ready)
	b.must(t, "Claim", &delayqv1.ClaimRequest{Topic: "mail", Max: proto.Int32(1)}, &claimed)
	require.Empty(t, claimed.Jobs, "a paused topic delivers nothing")
	var resumed delayqv1.ResumeTopicResponse
	b.must(t, "ResumeTopic", &delayqv1.ResumeTopicRequest{Name: "mail"}, &resumed)
	require.False(t, resumed.Topic.Paused)

	var list delayqv1.ListTopicsResponse
	b.must(t, "ListTopics", &delayqv1.ListTopicsRequest{}, &list)
	require.Len(t, list.Topics, 1)
	b.must(t, "DeleteTopic", &delayqv1.DeleteTopicRequest{Name: "mail"}, &delayqv1.DeleteTopicResponse{})
	err = b.call(t, "", "DeleteTopic", &delayqv1.DeleteTopicRequest{Name: "mail"}, &delayqv1.DeleteTopicResponse{})
	requireStatus(t, err, codes.NotFound, "not_found", "")
	err = b.call(t, "", "GetTopic", &delayqv1.GetTopicRequest{Name: "none"}, &got)
	requireStatus(t, err, codes.NotFound, "not_found", "")
}

// TestTopicExplicitZeros: an initial of "0s" and a jitter named in zeros
// are zero, where "" and an unnamed 0 take the defaults, and the answer
// names the zeros.
func TestTopicExplicitZeros(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var put delayqv1.PutTopicResponse
	b.must(t, "PutTopic", &delayqv1.PutTopicRequest{Name: "now", Config: &delayqv1.TopicConfig{
		Backoff: &delayqv1.BackoffConfig{Initial: "0s", Zeros: []string{"jitter"}}}}, &put)
	bo := put.Topic.Backoff
	require.Equal(t, "0s", bo.Initial)
	require.Zero(t, bo.Jitter)
	require.Equal(t, "1h0m0s", bo.Max)
	require.ElementsMatch(t, []string{"initial", "jitter"}, bo.Zeros)
	stored, err := b.engine.GetTopic(t.Context(), "now")
	require.NoError(t, err)
	require.Zero(t, stored.WithDefaults().Backoff.Delay(3), "retried at once")

	b.must(t, "PutTopic", &delayqv1.PutTopicRequest{Name: "now", Config: &delayqv1.TopicConfig{
		Backoff: &delayqv1.BackoffConfig{Initial: "", Jitter: 0}}}, &put)
	require.Equal(t, "1s", put.Topic.Backoff.Initial, "empty: the default")
	require.InDelta(t, 0.2, put.Topic.Backoff.Jitter, 1e-9)
	require.Empty(t, put.Topic.Backoff.Zeros)
}

// TestTopicExplicitZerosUpdate: an update that gives an explicit zero a
// value, by its mask, takes the value.
func TestTopicExplicitZerosUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var put delayqv1.PutTopicResponse
	b.must(t, "PutTopic", &delayqv1.PutTopicRequest{Name: "now", Config: &delayqv1.TopicConfig{
		Backoff: &delayqv1.BackoffConfig{Zeros: []string{"jitter"}}}}, &put)
	var up delayqv1.UpdateTopicResponse
	b.must(t, "UpdateTopic", &delayqv1.UpdateTopicRequest{Name: "now", Config: &delayqv1.TopicConfig{
		Backoff: &delayqv1.BackoffConfig{Jitter: 0.5}}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"backoff.jitter"}}}, &up)
	require.InDelta(t, 0.5, up.Topic.Backoff.Jitter, 1e-9)
	require.Empty(t, up.Topic.Backoff.Zeros)
}
