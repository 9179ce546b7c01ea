package connecttransport_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// TestUpdateTopic checks UpdateTopic: the settings its mask names change
// (unset in config: their defaults again), the others, secrets and headers
// included, are kept; bad masks and bad results change nothing.
func TestUpdateTopic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.must(t, "PutTopic", &delayqv1.PutTopicRequest{Name: "orders", Config: &delayqv1.TopicConfig{
		Delivery:    &delayqv1.DeliveryConfig{Type: "webhook", Url: "https://svc/hook", Secret: "s3cr3t", Method: "PUT", Headers: map[string]string{"authorization": "Bearer t"}},
		MaxAttempts: 16, Rate: &delayqv1.RateConfig{Limit: 10, Period: "1s"},
	}}, &delayqv1.PutTopicResponse{})

	update := func(config *delayqv1.TopicConfig, paths ...string) (*delayqv1.UpdateTopicResponse, error) {
		res := &delayqv1.UpdateTopicResponse{}
		err := b.call(t, "", "UpdateTopic", &delayqv1.UpdateTopicRequest{Name: "orders", Config: config, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}, res)
		return res, err
	}
	res, err := update(&delayqv1.TopicConfig{MaxAttempts: 5, Delivery: &delayqv1.DeliveryConfig{Timeout: "7s", Url: "https://ignored/"}}, "max_attempts", "delivery.timeout", "delivery.method", "rate")
	require.NoError(t, err)
	require.Equal(t, int32(5), res.Topic.MaxAttempts)
	require.Equal(t, "7s", res.Topic.Delivery.Timeout)
	require.Equal(t, "https://svc/hook", res.Topic.Delivery.Url, "a setting the mask does not name is kept")
	require.Nil(t, res.Topic.Rate, "named and unset: no rate limit")
	cur, err := b.engine.GetTopic(t.Context(), "orders")
	require.NoError(t, err)
	require.Equal(t, "s3cr3t", cur.Delivery.Secret)
	require.Equal(t, map[string]string{"authorization": "Bearer t"}, cur.Delivery.Headers)
	require.Empty(t, cur.Delivery.Method, "named and unset: POST again")

	_, err = update(&delayqv1.TopicConfig{MaxAttempts: 2})
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "update_mask")
	_, err = update(&delayqv1.TopicConfig{MaxAttempts: 2}, "max_attempt")
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "update_mask")
	_, err = update(&delayqv1.TopicConfig{MaxAttempts: -1}, "max_attempts")
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "max_attempts")
	after, err := b.engine.GetTopic(t.Context(), "orders")
	require.NoError(t, err)
	require.Equal(t, cur, after, "refused updates change nothing")

	err = b.call(t, "", "UpdateTopic", &delayqv1.UpdateTopicRequest{Name: "nosuch", Config: &delayqv1.TopicConfig{MaxAttempts: 2},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_attempts"}}}, &delayqv1.UpdateTopicResponse{})
	requireStatus(t, err, codes.NotFound, "not_found", "")
}
