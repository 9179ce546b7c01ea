package connecttransport_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// TestDerivedIDsRefused: Push, Replace and PushBatch refuse an id of the
// engine's derived forms (a schedule slot's, a notice's, another topic's
// unique key's) with InvalidArgument on field id, storing nothing.
func TestDerivedIDsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	slot := time.Now().Add(time.Hour)
	for _, id := range []string{core.ScheduleID("nightly", slot), core.NoticeID("job-1", slot), core.KeyID("other", "k")} {
		spec := &delayqv1.JobSpec{Topic: "mail", Id: id, Delay: "1h"}
		err := b.call(t, "", "Push", &delayqv1.PushRequest{Job: spec}, &delayqv1.PushResponse{})
		requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "id")
		err = b.call(t, "", "Replace", &delayqv1.ReplaceRequest{Job: spec}, &delayqv1.PushResponse{})
		requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "id")
		var res delayqv1.PushBatchResponse
		b.must(t, "PushBatch", &delayqv1.PushBatchRequest{Jobs: []*delayqv1.JobSpec{spec, {Topic: "mail"}}}, &res)
		require.Equal(t, "invalid_argument", res.Results[0].GetError().GetCode())
		require.Equal(t, "id", res.Results[0].GetError().GetField())
		require.Nil(t, res.Results[1].GetError(), "the other job of the batch is taken")
		_, err = b.engine.Get(t.Context(), id)
		require.ErrorIs(t, err, core.ErrNotFound, "nothing stored")
	}
}

// TestImportDerivedIDs: Import takes a derived id only from an admin for
// every topic, and a k- id only when it is the job's own key's.
func TestImportDerivedIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	job := func(id, topic, key string) *delayqv1.Job {
		return &delayqv1.Job{Id: id, Topic: topic, Key: key, State: "scheduled", Ttr: "30s", MaxAttempts: 3,
			RunAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	}
	foreign := core.KeyID("secret", "s-1")
	res, err := b.importJobs(t, mailOnlyToken, []*delayqv1.Job{
		job(foreign, "mail", "s-1"),
		job(core.ScheduleID("nightly", time.Now()), "mail", ""),
		job("plain-1", "mail", ""),
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Imported)
	require.EqualValues(t, 2, res.Failed)
	require.Zero(t, res.Skipped)
	for _, e := range res.Errors {
		require.Equal(t, "permission_denied", e.Error.GetCode())
		require.NotContains(t, e.Error.GetMessage(), "secret", "the message names no other topic")
	}

	res, err = b.importJobs(t, adminToken, []*delayqv1.Job{
		job(foreign, "mail", "s-1"),
		job(foreign, "secret", "s-1"),
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Imported)
	require.EqualValues(t, 1, res.Failed)
	require.EqualValues(t, 1, res.Errors[0].Index)
	require.Equal(t, "invalid_argument", res.Errors[0].Error.GetCode())
	require.Equal(t, "id", res.Errors[0].Error.GetField())
	require.Equal(t, "secret", b.job(t, foreign).Topic)
}

// TestPutTopicSuccessNeedsUnrestrictedAdmin: a token restricted to topics
// may not set delivery.success, as it may not set delivery.error_body, and
// the refusal changes nothing.
func TestPutTopicSuccessNeedsUnrestrictedAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	err := b.call(t, mailOnlyToken, "PutTopic", &delayqv1.PutTopicRequest{Name: "mail", Config: &delayqv1.TopicConfig{
		Delivery: &delayqv1.DeliveryConfig{Type: "webhook", Url: "http://127.0.0.1:9/hook", Success: `body.secret.matches("^a")`},
	}}, &delayqv1.PutTopicResponse{})
	e := requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	require.Contains(t, e.Message, "delivery.success")
	_, err = b.engine.GetTopic(t.Context(), "mail")
	require.ErrorIs(t, err, core.ErrNotFound, "nothing stored")
}
