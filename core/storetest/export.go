package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// exportSubtests are the subtests of core.JobExporter and core.JobImporter,
// run only when the store implements both.
var exportSubtests = []subtest{
	{"ExportStates", testExportStates},
	{"ImportStates", testImportStates},
	{"ImportSkipsExisting", testImportSkipsExisting},
	{"ExportFuncError", testExportFuncError},
	{"ExportImportMany", testExportImportMany},
	{"ImportFindsKeys", testImportFindsKeys},
	{"ExportImportHistory", testExportImportHistory},
}

// runExportImport runs exportSubtests, or skips them when the store
// implements neither capability (or is a decorator over a store that lacks
// them, which answers core.ErrUnsupported).
func runExportImport(t *testing.T, h Harness) {
	b := setup(t, h)
	x, canExport := b.store.(core.JobExporter)
	_, canImport := b.store.(core.JobImporter)
	if !canExport && !canImport {
		t.Skip("the backend lacks export/import (core.JobExporter and core.JobImporter)")
	}
	require.True(t, canExport && canImport, "a store implements core.JobExporter and core.JobImporter together (export %t, import %t)",
		canExport, canImport)
	if err := x.ExportJobs(b.ctx, func(*core.Job) error { return nil }); errors.Is(err, core.ErrUnsupported) {
		t.Skip("the backend lacks export/import: ", err)
	}
	for _, st := range exportSubtests {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			st.fn(t, setup(t, h))
		})
	}
}

// fresh returns a bundle over a namespace of its own: another, empty
// deployment to import into.
func (b *testBundle) fresh(t *testing.T) *testBundle {
	t.Helper()
	f := &testBundle{h: b.h, ns: namespace(t), ctx: b.ctx}
	require.NotEqual(t, b.ns, f.ns)
	f.store = f.open(t)
	return f
}

// export returns every job ExportJobs hands out, by id, requiring each to
// come once.
func (b *testBundle) export(t *testing.T) map[string]*core.Job {
	t.Helper()
	got := map[string]*core.Job{}
	err := b.store.(core.JobExporter).ExportJobs(b.ctx, func(j *core.Job) error {
		if j == nil {
			return errors.New("exported a nil job")
		}
		if _, ok := got[j.ID]; ok {
			return fmt.Errorf("job %s exported twice", j.ID)
		}
		got[j.ID] = j
		return nil
	})
	require.NoError(t, err)
	return got
}

// importJobs imports copies of jobs and returns the per-job results.
func (b *testBundle) importJobs(t *testing.T, jobs ...*core.Job) []bool {
	t.Helper()
	in := make([]*core.Job, len(jobs))
	for i, j := range jobs {
		in[i] = j.Clone()
	}
	res, err := b.store.(core.JobImporter).ImportJobs(b.ctx, in)
	require.NoError(t, err)
	require.Len(t, res, len(jobs))
	return res
}

// requireSameState requires got to be want with its state: the fields of
// requireSameJob, and state, attempt, last_error and created_at (to the ms,
// as an import keeps it).
func requireSameState(t *testing.T, want, got *core.Job) {
	t.Helper()
	requireSameJob(t, want, got)
	require.Equal(t, want.State, got.State, "state of %s", want.ID)
	require.Equal(t, want.Attempt, got.Attempt, "attempt of %s", want.ID)
	require.Equal(t, want.LastError, got.LastError, "last_error of %s", want.ID)
	require.True(t, core.StoreTime(want.CreatedAt).Equal(core.StoreTime(got.CreatedAt)), "created_at of %s: want %s, got %s", want.ID, want.CreatedAt, got.CreatedAt)
}

// allTrue returns n trues.
func allTrue(n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = true
	}
	return out
}

// testExportStates: ExportJobs lists exactly the scheduled, ready, reserved
// and dead jobs, each with every field as GetJob has it, as copies; the
// export imported into another namespace gives the same jobs, the reserved
// one ready with its attempt kept.
func testExportStates(t *testing.T, b *testBundle) {
	const topic = "exp"
	now := time.Now()
	sched := NewJob(topic, now.Add(time.Hour))
	sched.Key = "order-7 é"
	sched.Body = json.RawMessage("{ \"a\" : [1, 2.50],\n \"s\":\"caf\\u00e9 ☕\" }")
	sched.TTR = 7 * time.Second
	sched.MaxAttempts = 3
	sched.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sched.URL = "https://hooks.example/exported"
	sched.ExpiresAt = core.StoreTime(now.Add(2 * time.Hour))
	ready := NewJob(topic, now.Add(-time.Second))
	ready.Body = json.RawMessage(`"just a string"`)
	ready.Key = "k-ready"
	retried := DueJob(topic + ".retried")
	reserved := DueJob(topic + ".reserved")
	reserved.TTR = time.Minute
	reserved.URL = "http://127.0.0.1:9/reserved"
	dead := DueJob(topic + ".dead")
	dead.URL = "http://127.0.0.1:9/dead"
	dead.ExpiresAt = core.StoreTime(now.Add(time.Hour))
	done := DueJob(topic + ".done")
	cancelled := NewJob(topic, now.Add(time.Hour))
	before := time.Now()
	b.put(t, sched, ready, retried, reserved, dead, done, cancelled)
	after := time.Now()

	c := b.claimOne(t, retried.Topic, dueWait)
	retryAt := core.StoreTime(time.Now().Add(time.Hour))
	require.NoError(t, settleErr(b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, RunAt: retryAt, Error: "try later"})))
	b.claimOne(t, reserved.Topic, dueWait)
	c = b.claimOne(t, dead.Topic, dueWait)
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "boom"})))
	c = b.claimOne(t, done.Topic, dueWait)
	require.NoError(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: c.ID, Lease: c.Lease})))
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: cancelled.ID}))

	got := b.export(t)
	require.ElementsMatch(t, []string{sched.ID, ready.ID, retried.ID, reserved.ID, dead.ID}, slices.Collect(maps.Keys(got)),
		"exported jobs: scheduled, ready, reserved and dead, not done or cancelled")
	for id, j := range got {
		requireSameState(t, b.get(t, id), j)
		requireBetween(t, j.CreatedAt, before, after, clockSlack, "created_at of "+id)
	}
	for _, w := range []struct {
		put     *core.Job
		state   core.State
		attempt int
		lastErr string
	}{
		{sched, core.StateScheduled, 0, ""},
		{ready, core.StateReady, 0, ""},
		{retried, core.StateScheduled, 1, "try later"},
		{reserved, core.StateReserved, 1, ""},
		{dead, core.StateDead, 1, "boom"},
	} {
		j := got[w.put.ID]
		require.Equal(t, w.state, j.State, "state of %s", j.ID)
		require.Equal(t, w.attempt, j.Attempt, "attempt of %s", j.ID)
		require.Equal(t, w.lastErr, j.LastError, "last_error of %s", j.ID)
		if w.put != retried {
			requireSameJob(t, w.put, j)
		}
	}
	require.True(t, retryAt.Equal(got[retried.ID].RunAt), "run_at of the retried job: want %s, got %s", retryAt, got[retried.ID].RunAt)

	// Exported jobs are copies.
	got[sched.ID].Body[2] = 'X'
	got[sched.ID].State = core.StateDone
	requireSameJob(t, sched, b.requireState(t, sched.ID, core.StateScheduled))
	got[sched.ID] = b.get(t, sched.ID)

	// Into another namespace: the same jobs, the reserved one ready at once
	// with no lease and its attempt kept.
	dst := b.fresh(t)
	jobs := slices.Collect(maps.Values(got))
	require.Equal(t, allTrue(len(jobs)), dst.importJobs(t, jobs...))
	again := dst.export(t)
	require.ElementsMatch(t, slices.Collect(maps.Keys(got)), slices.Collect(maps.Keys(again)))
	for id, w := range got {
		if id == reserved.ID {
			w = w.Clone()
			w.State = core.StateReady
		}
		requireSameState(t, w, again[id])
		require.Empty(t, again[id].Lease, "lease of imported %s", id)
		require.True(t, again[id].LeaseExpiresAt.IsZero(), "lease expiry of imported %s", id)
	}
	dst.requireCounts(t, topic, core.Counts{Scheduled: 1, Ready: 1})
	dst.requireCounts(t, reserved.Topic, core.Counts{Ready: 1})
	dst.requireCounts(t, dead.Topic, core.Counts{Dead: 1})
	_, err := dst.store.GetJob(b.ctx, done.ID)
	require.ErrorIs(t, err, core.ErrNotFound, "a done job was imported")
	r := dst.claimOne(t, reserved.Topic, 0)
	require.Equal(t, reserved.ID, r.ID)
	require.Equal(t, 2, r.Attempt, "attempt of the imported reserved job on its next claim")
}

// testImportStates: imported jobs keep their state, attempt, last_error and
// created_at: a scheduled job is claimed at its run_at, a ready one at once,
// a dead one is listed dead, a reserved one is ready at once without its
// lease; importing them again skips them all and changes nothing.
func testImportStates(t *testing.T, b *testBundle) {
	const topic = "imp"
	now := time.Now()
	created := core.StoreTime(now.Add(-time.Hour))
	mk := func(suffix string, runAt time.Time, state core.State, attempt int, lastErr string) *core.Job {
		j := NewJob(topic+suffix, runAt)
		j.Body = fmt.Appendf(nil, `{"job": %q}`, suffix)
		j.Key = "key" + suffix
		j.State, j.Attempt, j.LastError, j.CreatedAt = state, attempt, lastErr, created
		j.UpdatedAt = created
		return j
	}
	sched := mk(".sched", now.Add(600*time.Millisecond), core.StateScheduled, 1, "try later")
	ready := mk(".ready", now.Add(-time.Second), core.StateReady, 2, "failed twice")
	ready.RetryDelays = []time.Duration{time.Second, 3 * time.Second}
	ready.URL = "https://hooks.example/imported"
	ready.ExpiresAt = core.StoreTime(now.Add(time.Hour))
	reserved := mk(".reserved", now.Add(-2*time.Second), core.StateReserved, 1, "earlier")
	reserved.Lease, reserved.LeaseExpiresAt = "old-lease", core.StoreTime(now.Add(30*time.Second))
	dead := mk(".dead", now.Add(-3*time.Second), core.StateDead, 5, "boom")
	ready.Priority = -4
	dead.Priority = 7
	dead.URL = "http://127.0.0.1:9/dead"
	jobs := []*core.Job{sched, ready, reserved, dead}

	require.Equal(t, allTrue(4), b.importJobs(t, jobs...))
	require.Equal(t, make([]bool, 4), b.importJobs(t, jobs...), "importing the same jobs again")

	for _, w := range jobs {
		got := b.get(t, w.ID)
		requireSameJob(t, w, got)
		require.Equal(t, w.Attempt, got.Attempt, "attempt of %s", w.ID)
		require.Equal(t, w.LastError, got.LastError, "last_error of %s", w.ID)
		require.True(t, created.Equal(got.CreatedAt), "created_at of %s: want %s, got %s", w.ID, created, got.CreatedAt)
		require.Empty(t, got.Lease, "lease of %s", w.ID)
		require.True(t, got.LeaseExpiresAt.IsZero(), "lease expiry of %s", w.ID)
	}
	if got := b.get(t, sched.ID); time.Now().Before(sched.RunAt.Add(-earlySlack)) {
		require.Equal(t, core.StateScheduled, got.State, "imported scheduled job before its run_at")
	}
	b.requireState(t, ready.ID, core.StateReady)
	b.requireState(t, reserved.ID, core.StateReady)
	b.requireState(t, dead.ID, core.StateDead)
	b.requireCounts(t, ready.Topic, core.Counts{Ready: 1})
	b.requireCounts(t, reserved.Topic, core.Counts{Ready: 1})
	b.requireCounts(t, dead.Topic, core.Counts{Dead: 1})
	listed := listDead(t, b, dead.Topic, 10)
	require.Len(t, listed, 1)
	require.Equal(t, dead.ID, listed[0].ID)
	require.Equal(t, "boom", listed[0].LastError)
	require.Equal(t, 5, listed[0].Attempt)

	// Ready and reserved: claimable at once, each once, the next attempt.
	for _, w := range []*core.Job{ready, reserved} {
		c := b.claim(t, w.Topic, 10, 0)
		require.Len(t, c, 1, "claim of imported %s", w.State)
		requireSameJob(t, w, c[0])
		require.Equal(t, w.Attempt+1, c[0].Attempt, "attempt of imported %s on its claim", w.State)
		require.NotEqual(t, "old-lease", c[0].Lease)
	}

	// Scheduled: not before its run_at, then to a waiting claim (or to
	// this one, when the import took until its run_at).
	got := b.claim(t, sched.Topic, 10, 0)
	if len(got) == 0 {
		got = append(got, b.claimOne(t, sched.Topic, dueWait))
	}
	require.Len(t, got, 1)
	c := got[0]
	require.False(t, time.Now().Before(sched.RunAt.Add(-earlySlack)), "claimed before run_at")
	requireSameJob(t, sched, c)
	require.Equal(t, 2, c.Attempt)
	require.Equal(t, "try later", c.LastError)
	require.Empty(t, b.claim(t, sched.Topic, 10, 0), "imported scheduled job delivered twice")
}

// testImportSkipsExisting: an imported job whose id names a job the store
// knows, finished or not, is skipped and leaves that job as it was, a
// reserved job's lease included; the others in the batch are imported.
func testImportSkipsExisting(t *testing.T, b *testBundle) {
	const topic = "skip"
	now := time.Now()
	sched := NewJob(topic, now.Add(time.Hour))
	ready := NewJob(topic, now.Add(-time.Second))
	cancelled := NewJob(topic, now.Add(time.Hour))
	reserved := DueJob(topic + ".reserved")
	dead := DueJob(topic + ".dead")
	done := DueJob(topic + ".done")
	b.put(t, sched, ready, cancelled, reserved, dead, done)
	r := b.claimOne(t, reserved.Topic, dueWait)
	c := b.claimOne(t, dead.Topic, dueWait)
	require.NoError(t, settleErr(b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "boom"})))
	c = b.claimOne(t, done.Topic, dueWait)
	require.NoError(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: c.ID, Lease: c.Lease})))
	require.NoError(t, b.store.CancelJob(b.ctx, &core.CancelJobParams{ID: cancelled.ID}))

	existing := []*core.Job{sched, ready, cancelled, reserved, dead, done}
	before := map[string]*core.Job{}
	var imports []*core.Job
	for _, e := range existing {
		before[e.ID] = b.get(t, e.ID)
		// The same id as another store would export it, different in
		// every field.
		j := NewJob(topic+".other", now.Add(-time.Minute))
		j.ID = e.ID
		j.Body = json.RawMessage(`{"imported":true}`)
		j.Key = "other"
		j.State, j.Attempt, j.LastError = core.StateReady, 1, "other"
		j.CreatedAt = core.StoreTime(now.Add(-time.Hour))
		imports = append(imports, j)
	}
	fresh := NewJob(topic+".new", now.Add(-time.Second))
	fresh.State = core.StateReady
	imports = append(imports, fresh)

	require.Equal(t, []bool{false, false, false, false, false, false, true}, b.importJobs(t, imports...))
	for id, w := range before {
		got := b.get(t, id)
		requireSameState(t, w, got)
		require.Equal(t, w.Lease, got.Lease, "lease of %s", id)
	}
	b.requireCounts(t, topic, core.Counts{Scheduled: 1, Ready: 1, Cancelled: 1})
	b.requireCounts(t, dead.Topic, core.Counts{Dead: 1})
	b.requireCounts(t, done.Topic, core.Counts{Done: 1})
	require.Empty(t, b.claim(t, topic+".other", 10, 0), "a skipped job is claimable")
	require.NoError(t, settleErr(b.store.AckJob(b.ctx, &core.AckJobParams{ID: r.ID, Lease: r.Lease})), "the lease of a reserved job survives an import of its id")
	got := b.claimOne(t, fresh.Topic, 0)
	require.Equal(t, fresh.ID, got.ID)
	require.Equal(t, 1, got.Attempt)
}

// testExportFuncError: ExportJobs stops at fn's first error and returns it;
// the store still works after.
func testExportFuncError(t *testing.T, b *testBundle) {
	const topic = "exp-err"
	var jobs []*core.Job
	for range 5 {
		jobs = append(jobs, DueJob(topic))
	}
	b.put(t, jobs...)
	stop := errors.New("storetest: stop here")
	calls := 0
	err := b.store.(core.JobExporter).ExportJobs(b.ctx, func(*core.Job) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 2, calls, "fn called after its error")
	require.Len(t, b.export(t), 5)
}

// testExportImportMany: 1000 jobs, half due and half scheduled, are exported
// once each and imported into another namespace, where each is as it was.
func testExportImportMany(t *testing.T, b *testBundle) {
	const (
		topic = "exp-many"
		n     = 1000
	)
	now := time.Now()
	var jobs []*core.Job
	for i := range n {
		at := now.Add(time.Duration(i-n) * time.Millisecond)
		if i%2 == 1 {
			at = now.Add(time.Hour + time.Duration(i)*time.Millisecond)
		}
		j := NewJob(topic, at)
		j.Body = fmt.Appendf(nil, `{"i":%d}`, i)
		j.Key = fmt.Sprintf("k%d", i)
		jobs = append(jobs, j)
	}
	b.put(t, jobs...)
	got := b.export(t)
	require.Len(t, got, n)
	for _, j := range jobs {
		e, ok := got[j.ID]
		require.True(t, ok, "job %s not exported", j.ID)
		requireSameJob(t, j, e)
	}

	dst := b.fresh(t)
	exported := slices.Collect(maps.Values(got))
	require.Equal(t, allTrue(n), dst.importJobs(t, exported...))
	dst.requireCounts(t, topic, core.Counts{Scheduled: n / 2, Ready: n / 2})
	again := dst.export(t)
	require.Len(t, again, n)
	for id, w := range got {
		requireSameState(t, w, again[id])
	}
	require.Equal(t, make([]bool, n), dst.importJobs(t, exported...), "importing the same jobs again")
	claimed := claimUntil(t, b.ctx, dst.store, topic, n/2, 100, 0)
	require.Len(t, claimed, n/2)
	for _, c := range claimed {
		require.Equal(t, 1, c.Attempt)
	}
	dst.requireCounts(t, topic, core.Counts{Scheduled: n / 2, Reserved: n / 2})
}
