package connecttransport_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// TestJobThen: a job spec's then, its next steps, is pushed and shown by
// GetJob as given; a bad step is refused naming its field within then, and
// a restricted token names only its own topics there.
func TestJobThen(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	var pushed delayqv1.PushResponse
	step := &delayqv1.JobSpec{Topic: "mail", Delay: "30m0s", Key: "o-1", Body: `{"remind":1}`, Backoff: &delayqv1.JobBackoff{Delays: []string{"1s"}},
		Then: &delayqv1.JobSpec{Topic: "mail", Delay: "24h0m0s", Key: "o-1"}}
	require.NoError(t, b.call(t, mailOnlyToken, "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "mail", Id: "o-1", Then: step}}, &pushed))
	var got delayqv1.GetJobResponse
	require.NoError(t, b.call(t, mailOnlyToken, "GetJob", &delayqv1.GetJobRequest{Id: "o-1"}, &got))
	require.Equal(t, step.String(), got.Job.Then.String())

	err := b.call(t, adminToken, "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "t",
		Then: &delayqv1.JobSpec{Topic: "t", Then: &delayqv1.JobSpec{Topic: "t", Delay: "soon"}}}}, &pushed)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "then.then.delay")
	err = b.call(t, adminToken, "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "t", Then: &delayqv1.JobSpec{Topic: "t", Id: "mine"}}}, &pushed)
	requireStatus(t, err, codes.InvalidArgument, "invalid_argument", "then.id")
	err = b.call(t, mailOnlyToken, "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "mail", Then: &delayqv1.JobSpec{Topic: "orders"}}}, &pushed)
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
}
