package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// plainStore hides every optional capability of the store it wraps.
type plainStore struct{ core.Store }

// recordingImporter is a store with the import capability that records
// what reached it and imports every other job.
type recordingImporter struct {
	core.Store
	got []*core.Job
}

func (r *recordingImporter) ImportJobs(_ context.Context, jobs []*core.Job) ([]bool, error) {
	r.got = append(r.got, jobs...)
	out := make([]bool, len(jobs))
	for i := range out {
		out[i] = i%2 == 0
	}
	return out, nil
}

func TestExportImportUnsupported(t *testing.T) {
	t.Parallel()
	e, err := core.NewEngine(core.EngineConfig{Store: plainStore{memstore.New(memstore.Config{})}})
	require.NoError(t, err)
	ctx := context.Background()
	require.ErrorIs(t, e.Export(ctx, func(*core.Job) error { return nil }), core.ErrUnsupported)
	_, err = e.Import(ctx, nil)
	require.ErrorIs(t, err, core.ErrUnsupported)
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

func TestImportValidatesAndNormalises(t *testing.T) {
	t.Parallel()
	rec := &recordingImporter{Store: memstore.New(memstore.Config{})}
	e, err := core.NewEngine(core.EngineConfig{Store: rec, Limits: core.Limits{MaxBodyBytes: 16}})
	require.NoError(t, err)
	runAt := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	good := func() *core.Job {
		return &core.Job{ID: "j", Topic: "t", RunAt: runAt, TTR: time.Minute, MaxAttempts: 3, Attempt: 1,
			State: core.StateReserved, Lease: "old-lease", LeaseExpiresAt: runAt, Body: json.RawMessage(`{"a":1}`)}
	}
	bad := map[string]func(*core.Job){
		"topic":        func(j *core.Job) { j.Topic = "a..b" },
		"id":           func(j *core.Job) { j.ID = "a b" },
		"state":        func(j *core.Job) { j.State = core.StateDone },
		"attempt":      func(j *core.Job) { j.Attempt = -1 },
		"ttr":          func(j *core.Job) { j.TTR = 0 },
		"max_attempts": func(j *core.Job) { j.MaxAttempts = 0 },
		"run_at":       func(j *core.Job) { j.RunAt = time.Time{} },
		"body":         func(j *core.Job) { j.Body = json.RawMessage(`"01234567890123456789"`) },
	}
	jobs := []*core.Job{good()}
	var fields []string
	for field, mutate := range bad {
		j := good()
		mutate(j)
		jobs = append(jobs, j)
		fields = append(fields, field)
	}
	second := good()
	second.ID = "k"
	jobs = append(jobs, second)

	results, err := e.Import(context.Background(), jobs)
	require.NoError(t, err)
	require.Len(t, results, len(jobs))
	require.True(t, results[0].Imported)
	for i, field := range fields {
		var fe *core.FieldError
		require.True(t, errors.As(results[i+1].Err, &fe), field)
		require.Equal(t, field, fe.Field)
		require.False(t, results[i+1].Imported)
	}
	require.NoError(t, results[len(jobs)-1].Err)
	require.False(t, results[len(jobs)-1].Imported, "the store's skip is reported")

	require.Len(t, rec.got, 2, "only valid jobs reach the store")
	j := rec.got[0]
	require.Empty(t, j.Lease, "no lease crosses stores")
	require.True(t, j.LeaseExpiresAt.IsZero())
	require.Equal(t, runAt.UTC().Truncate(time.Millisecond), j.RunAt, "UTC at ms precision")
	require.False(t, j.CreatedAt.IsZero(), "a missing created_at becomes now")

	last := good()
	last.ID, last.Attempt = "last", 3
	_, err = e.Import(context.Background(), []*core.Job{last})
	require.NoError(t, err)
	got := rec.got[len(rec.got)-1]
	require.Equal(t, core.StateDead, got.State, "a reserved job on its last attempt loses its lease for good")
	require.Equal(t, core.LeaseExpired, got.LastError)
}

// TestImportBoundsRunAt checks that import holds run_at to the range a push
// may set: at most Limits.MaxDelay ahead, and not before the Unix epoch, so
// that no store meets a time it cannot order (the memory store ran a job of
// 9999-12-31 at once).
func TestImportBoundsRunAt(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Config{Clock: clock})
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock, Limits: core.Limits{MaxDelay: 24 * time.Hour}})
	require.NoError(t, err)
	ctx := context.Background()
	job := func(id string, runAt time.Time) *core.Job {
		return &core.Job{ID: id, Topic: "t", RunAt: runAt, TTR: time.Minute, MaxAttempts: 3, State: core.StateScheduled}
	}
	results, err := e.Import(ctx, []*core.Job{
		job("far", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)),
		job("past-limit", clock.Now().Add(25*time.Hour)),
		job("ancient", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)),
		job("ok", clock.Now().Add(24*time.Hour)),
	})
	require.NoError(t, err)
	for _, r := range results[:3] {
		var fe *core.FieldError
		require.ErrorAs(t, r.Err, &fe)
		require.Equal(t, "run_at", fe.Field)
		require.False(t, r.Imported)
	}
	require.NoError(t, results[3].Err)
	require.True(t, results[3].Imported)
	for _, id := range []string{"far", "past-limit", "ancient"} {
		_, err := e.Get(ctx, id)
		require.ErrorIs(t, err, core.ErrNotFound, id)
	}
	jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 10})
	require.NoError(t, err)
	require.Empty(t, jobs, "nothing imported is due")
}

// TestImportBoundsTimes checks that import holds created_at and the
// history's times to run_at's range, each refused with its field and
// nothing stored: stores keep times as int64 nanoseconds, so a created_at
// of year 9999 came back from the local store as 1816.
func TestImportBoundsTimes(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	e, err := core.NewEngine(core.EngineConfig{Store: memstore.New(memstore.Config{Clock: clock}), Clock: clock,
		Limits: core.Limits{MaxDelay: 24 * time.Hour}})
	require.NoError(t, err)
	ctx := context.Background()
	far, ancient := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)
	job := func(id string, mod func(*core.Job)) *core.Job {
		j := &core.Job{ID: id, Topic: "t", RunAt: clock.Now(), TTR: time.Minute, MaxAttempts: 3, State: core.StateDead,
			Attempt: 1, CreatedAt: clock.Now().Add(-time.Hour),
			History: []core.Attempt{{Attempt: 1, StartedAt: clock.Now().Add(-time.Minute), EndedAt: clock.Now(), Outcome: core.OutcomeBuried}}}
		mod(j)
		return j
	}
	results, err := e.Import(ctx, []*core.Job{
		job("created-far", func(j *core.Job) { j.CreatedAt = far }),
		job("created-ancient", func(j *core.Job) { j.CreatedAt = ancient }),
		job("created-past-limit", func(j *core.Job) { j.CreatedAt = clock.Now().Add(25 * time.Hour) }),
		job("started-far", func(j *core.Job) { j.History[0].StartedAt = far }),
		job("ended-ancient", func(j *core.Job) { j.History[0].EndedAt = ancient }),
		job("ok", func(j *core.Job) { j.CreatedAt = clock.Now().Add(24 * time.Hour) }),
		job("ok-epoch", func(j *core.Job) { j.CreatedAt = core.RunAtMin }),
	})
	require.NoError(t, err)
	for i, field := range []string{"created_at", "created_at", "created_at", "history", "history"} {
		var fe *core.FieldError
		require.ErrorAs(t, results[i].Err, &fe, i)
		require.Equal(t, field, fe.Field)
		require.False(t, results[i].Imported)
	}
	require.Contains(t, results[3].Err.Error(), "history[0]: started_at must be from 1970-01-01T00:00:00Z to 24h0m0s from now")
	require.Contains(t, results[4].Err.Error(), "history[0]: ended_at")
	for _, r := range results[5:] {
		require.NoError(t, r.Err)
		require.True(t, r.Imported)
	}
	for _, id := range []string{"created-far", "created-ancient", "created-past-limit", "started-far", "ended-ancient"} {
		_, err := e.Get(ctx, id)
		require.ErrorIs(t, err, core.ErrNotFound, id)
	}
}

// TestImportChecksBodyAsPush checks that import refuses a body push would
// refuse: not JSON, or not UTF-8.
func TestImportChecksBodyAsPush(t *testing.T) {
	t.Parallel()
	e, err := core.NewEngine(core.EngineConfig{Store: memstore.New(memstore.Config{})})
	require.NoError(t, err)
	job := func(id, body string) *core.Job {
		return &core.Job{ID: id, Topic: "t", RunAt: time.Now(), TTR: time.Minute, MaxAttempts: 3,
			State: core.StateReady, Body: json.RawMessage(body)}
	}
	results, err := e.Import(context.Background(), []*core.Job{
		job("not-json", `{"a":`), job("not-utf8", "\"\xff\xfe\""), job("ok", `{"a":1}`), job("empty", ""),
	})
	require.NoError(t, err)
	for _, r := range results[:2] {
		var fe *core.FieldError
		require.ErrorAs(t, r.Err, &fe)
		require.Equal(t, "body", fe.Field)
		require.False(t, r.Imported)
	}
	for _, r := range results[2:] {
		require.NoError(t, r.Err)
		require.True(t, r.Imported)
	}
}

// TestImportChecksHistory: an imported history keeps its last
// core.HistoryMax attempts, at store precision; one with an attempt in
// progress before the last, or an unknown via or outcome, fails on
// history.
func TestImportChecksHistory(t *testing.T) {
	t.Parallel()
	rec := &recordingImporter{Store: memstore.New(memstore.Config{})}
	e, err := core.NewEngine(core.EngineConfig{Store: rec})
	require.NoError(t, err)
	at := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	job := func(id string, h ...core.Attempt) *core.Job {
		return &core.Job{ID: id, Topic: "t", RunAt: at, TTR: time.Minute, MaxAttempts: 30, Attempt: 1, State: core.StateReady, History: h}
	}
	ended := func(n int) core.Attempt {
		return core.Attempt{Attempt: n, StartedAt: at, EndedAt: at.Add(time.Second), Via: core.ViaPull, Outcome: core.OutcomeRetried}
	}
	long := job("long")
	for n := 1; n <= core.HistoryMax+5; n++ {
		long.History = append(long.History, ended(n))
	}
	running := core.Attempt{Attempt: 2, StartedAt: at, Via: core.ViaGRPC}
	res, err := e.Import(context.Background(), []*core.Job{
		long,
		job("running-last", ended(1), running),
		job("running-first", running, ended(1)),
		job("via", core.Attempt{Attempt: 1, StartedAt: at, Via: "fax", Outcome: core.OutcomeAcked}),
		job("outcome", core.Attempt{Attempt: 1, StartedAt: at, Outcome: "exploded"}),
		job("start", core.Attempt{Attempt: 1, Outcome: core.OutcomeAcked}),
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	for _, r := range res[2:] {
		var fe *core.FieldError
		require.ErrorAs(t, r.Err, &fe)
		require.Equal(t, "history", fe.Field)
	}
	require.Len(t, rec.got, 2)
	h := rec.got[0].History
	require.Len(t, h, core.HistoryMax, "the last HistoryMax kept")
	require.Equal(t, 6, h[0].Attempt)
	require.Equal(t, core.StoreTime(at), h[0].StartedAt, "at store precision")
}
