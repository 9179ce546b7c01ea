package connecttransport_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// export reads every job of an Export stream with grpc-go.
func (b *testBundle) export(t *testing.T, token string) ([]*delayqv1.Job, error) {
	t.Helper()
	_, jobs, err := b.exportAll(t, token)
	return jobs, err
}

// exportAll reads every schedule and job of an Export stream with grpc-go,
// and checks that no schedule comes after a job.
func (b *testBundle) exportAll(t *testing.T, token string) ([]*delayqv1.Schedule, []*delayqv1.Job, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	cs, err := b.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method("Export"))
	require.NoError(t, err)
	require.NoError(t, cs.SendMsg(&delayqv1.ExportRequest{}))
	require.NoError(t, cs.CloseSend())
	var jobs []*delayqv1.Job
	var schedules []*delayqv1.Schedule
	for {
		var m delayqv1.ExportResponse
		err := cs.RecvMsg(&m)
		if errors.Is(err, io.EOF) {
			return schedules, jobs, nil
		}
		if err != nil {
			return nil, nil, err
		}
		require.True(t, len(m.Schedules) == 0 || len(jobs) == 0, "a schedule after a job")
		schedules = append(schedules, m.Schedules...)
		jobs = append(jobs, m.Jobs...)
	}
}

// importJobs sends batches of jobs as an Import stream with grpc-go.
func (b *testBundle) importJobs(t *testing.T, token string, batches ...[]*delayqv1.Job) (*delayqv1.ImportResponse, error) {
	t.Helper()
	reqs := make([]*delayqv1.ImportRequest, len(batches))
	for i, jobs := range batches {
		reqs[i] = &delayqv1.ImportRequest{Jobs: jobs}
	}
	return b.importStream(t, token, reqs...)
}

// importStream sends messages as an Import stream with grpc-go.
func (b *testBundle) importStream(t *testing.T, token string, reqs ...*delayqv1.ImportRequest) (*delayqv1.ImportResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	cs, err := b.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, method("Import"))
	require.NoError(t, err)
	for _, req := range reqs {
		if err := cs.SendMsg(req); err != nil {
			break // the answer says why
		}
	}
	require.NoError(t, cs.CloseSend())
	var res delayqv1.ImportResponse
	if err := cs.RecvMsg(&res); err != nil {
		return nil, err
	}
	return &res, nil
}

// TestExportImport exports a server's jobs and imports them into another,
// as the HTTP API's export and import do, in batches.
func TestExportImport(t *testing.T) {
	t.Parallel()
	from, to := setup(t), setup(t)
	for range 300 { // more than one batch
		from.push(t, "mail", `{"n": 1}`, func(p *core.PushParams) { d := time.Hour; p.Delay = &d; p.RetryDelays = []time.Duration{time.Second} })
	}
	reserved := from.push(t, "mail", "2")
	_, err := from.engine.Claim(context.Background(), &core.ClaimJobsParams{Topic: "mail", Max: 1})
	require.NoError(t, err)
	jobs, err := from.export(t, "")
	require.NoError(t, err)
	require.Len(t, jobs, 301)
	for _, j := range jobs {
		require.Empty(t, j.UpdatedAt)
		require.Empty(t, j.LeaseExpiresAt)
	}

	bad := &delayqv1.Job{Id: "bad", Topic: "mail", State: "ready", RunAt: "yesterday"}
	res, err := to.importJobs(t, "", jobs[:150], append([]*delayqv1.Job{bad}, jobs[150:]...))
	require.NoError(t, err)
	require.EqualValues(t, 301, res.Imported)
	require.EqualValues(t, 1, res.Failed)
	require.Len(t, res.Errors, 1)
	require.EqualValues(t, 151, res.Errors[0].Index, "the position in the stream")
	require.Equal(t, "run_at", res.Errors[0].Error.GetField())
	j := to.job(t, jobs[0].Id)
	require.Equal(t, core.StateScheduled, j.State)
	require.Equal(t, []time.Duration{time.Second}, j.RetryDelays)
	require.Equal(t, `{"n": 1}`, string(j.Body))
	require.Equal(t, core.StateReady, to.job(t, reserved).State, "a reserved job comes in ready")

	// Again: every job is skipped, its id in use.
	res, err = to.importJobs(t, "", jobs)
	require.NoError(t, err)
	require.EqualValues(t, 301, res.Skipped)
	require.Zero(t, res.Imported)
}

// TestImportBoundsTimes: a job whose created_at or history time is outside
// run_at's range (a year 9999 created_at came back from the local store as
// 1816) fails alone, naming its field, and is not stored, as over HTTP.
func TestImportBoundsTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.engine.Clock().Now().UTC().Format(time.RFC3339Nano)
	job := func(id, createdAt, startedAt string) *delayqv1.Job {
		return &delayqv1.Job{Id: id, Topic: "mail", State: "dead", RunAt: now, Attempt: 1, MaxAttempts: 1, Ttr: "30s", CreatedAt: createdAt,
			History: []*delayqv1.Attempt{{Attempt: 1, StartedAt: startedAt, EndedAt: now, Via: "pull", Outcome: "buried"}}}
	}
	res, err := b.importJobs(t, "", []*delayqv1.Job{
		job("c-far", "9999-12-31T00:00:00Z", now),
		job("c-ancient", "1969-12-31T23:59:59Z", now),
		job("h-far", now, "9999-12-31T00:00:00Z"),
		job("ok", now, now),
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Imported)
	require.EqualValues(t, 3, res.Failed)
	var fields []string
	for _, e := range res.Errors {
		require.Equal(t, "invalid_argument", e.Error.GetCode())
		fields = append(fields, e.Error.GetField())
	}
	require.Equal(t, []string{"created_at", "created_at", "history"}, fields)
	for _, id := range []string{"c-far", "c-ancient", "h-far"} {
		_, err := b.engine.Get(context.Background(), id)
		require.ErrorIs(t, err, core.ErrNotFound, id)
	}
	require.Equal(t, core.StateDead, b.job(t, "ok").State)
}

// TestExportImportAccess checks that both need admin, and that a token
// restricted to topics exports and imports only its own.
func TestExportImportAccess(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	b.push(t, "mail", "1")
	b.push(t, "secret", "2")
	_, err := b.export(t, consumeToken)
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	all, err := b.export(t, adminToken)
	require.NoError(t, err)
	require.Len(t, all, 2)
	mine, err := b.export(t, mailOnlyToken)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, "mail", mine[0].Topic)

	_, err = b.importJobs(t, pushToken, all)
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	res, err := b.importJobs(t, mailOnlyToken, []*delayqv1.Job{{Id: "x1", Topic: "secret", State: "ready", RunAt: "2026-01-01T00:00:00Z"}})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Failed)
	require.Equal(t, "permission_denied", res.Errors[0].Error.GetCode())
	_, err = b.engine.Get(context.Background(), "x1")
	require.ErrorIs(t, err, core.ErrNotFound)
}

// TestImportStalled checks that an import whose next message does not come
// within Config.ReceiveTimeout is ended by the server rather than held.
func TestImportStalled(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.grpc.ReceiveTimeout = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := b.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, method("Import"))
	require.NoError(t, err)
	require.NoError(t, cs.SendMsg(&delayqv1.ImportRequest{Jobs: []*delayqv1.Job{{Id: "a", Topic: "t", State: "ready", RunAt: "2026-01-01T00:00:00Z"}}}))
	// No more messages and no end of the stream: the server gives up.
	var res delayqv1.ImportResponse
	err = cs.RecvMsg(&res)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "ended by the server, not by the test's deadline")
}
