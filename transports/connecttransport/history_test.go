package connecttransport_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// TestJobHistoryOverGRPC: a claim over gRPC starts an attempt via "grpc";
// GetJob shows it in progress, then ended by the nack with its error;
// export carries the history and import keeps it.
func TestJobHistoryOverGRPC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, "hist", `{"n": 1}`)

	var claimed delayqv1.ClaimResponse
	b.must(t, "Claim", &delayqv1.ClaimRequest{Topic: "hist"}, &claimed)
	require.Len(t, claimed.Jobs, 1)
	var got delayqv1.GetJobResponse
	b.must(t, "GetJob", &delayqv1.GetJobRequest{Id: id}, &got)
	require.Len(t, got.Job.History, 1)
	h := got.Job.History[0]
	require.EqualValues(t, 1, h.Attempt)
	require.Equal(t, "grpc", h.Via)
	require.NotEmpty(t, h.StartedAt)
	require.Empty(t, h.EndedAt, "in progress")
	require.Empty(t, h.Outcome, "in progress")

	b.must(t, "Nack", &delayqv1.NackRequest{Id: id, Lease: claimed.Jobs[0].Lease, Delay: "1h", Error: "boom"}, &delayqv1.NackResponse{})
	b.must(t, "GetJob", &delayqv1.GetJobRequest{Id: id}, &got)
	require.Len(t, got.Job.History, 1)
	h = got.Job.History[0]
	require.Equal(t, "retried", h.Outcome)
	require.Equal(t, "boom", h.Error)
	require.NotEmpty(t, h.EndedAt)

	jobs, err := b.export(t, "")
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Len(t, jobs[0].History, 1)
	to := setup(t)
	res, err := to.importJobs(t, "", jobs)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Imported)
	imported := to.job(t, id)
	require.Len(t, imported.History, 1)
	require.Equal(t, "boom", imported.History[0].Error)
	require.Equal(t, h.StartedAt, imported.History[0].StartedAt.Format("2006-01-02T15:04:05.000Z07:00"))

	bad := &delayqv1.Job{Id: "bad", Topic: "hist", State: "ready", RunAt: jobs[0].RunAt, Ttr: "30s", MaxAttempts: 3,
		History: []*delayqv1.Attempt{{Attempt: 1, StartedAt: "later"}}}
	res, err = to.importJobs(t, "", []*delayqv1.Job{bad})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Failed)
	require.Equal(t, "history.started_at", res.Errors[0].Error.GetField())
}
