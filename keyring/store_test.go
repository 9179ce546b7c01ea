package keyring_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/keyring"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStoreConformance runs the conformance suite over memstore behind the
// encryption: a store with it keeps every promise of one without.
func TestStoreConformance(t *testing.T) {
	t.Parallel()
	ring := mustParse(t, ringBoth)
	var (
		mu     sync.Mutex
		stores = map[string]*memstore.Store{}
	)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, ns string) core.Store {
			mu.Lock()
			defer mu.Unlock()
			s, ok := stores[ns]
			if !ok {
				s = memstore.New(memstore.Config{})
				stores[ns] = s
			}
			return keyring.New(s, keyring.Config{Ring: ring})
		},
	})
}

// bundle is a keyring.Store over memstore, and the memstore to read what
// it keeps.
type bundle struct {
	mem *memstore.Store
	s   *keyring.Store
	ctx context.Context
}

func setup(t *testing.T, ring string) *bundle {
	t.Helper()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	return &bundle{mem: mem, s: keyring.New(mem, keyring.Config{Ring: mustParse(t, ring)}), ctx: t.Context()}
}

const marker = "MARKER-4c1e"

func markedJob() *core.Job {
	j := storetest.DueJob("t")
	j.Body = json.RawMessage(`{"secret":"` + marker + `"}`)
	return j
}

func TestBodiesSealedAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t, ringBoth)
	j := markedJob()
	storetest.Put(t, b.ctx, b.s, j)
	require.Contains(t, string(j.Body), marker, "the caller's job is left as it was")

	raw, err := b.mem.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.NotContains(t, string(raw.Body), marker)
	require.True(t, strings.HasPrefix(string(raw.Body), `"dqenc1:k2:`), string(raw.Body))
	require.True(t, json.Valid(raw.Body), "a sealed body is a JSON value")
	id, sealed := keyring.BodyKey(raw.Body)
	require.True(t, sealed)
	require.Equal(t, "k2", id)

	got, err := b.s.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.JSONEq(t, string(j.Body), string(got.Body))
	claimed := storetest.Claim(t, b.ctx, b.s, "t", 1, 0)
	require.Len(t, claimed, 1)
	require.JSONEq(t, string(j.Body), string(claimed[0].Body))
	touched, err := b.s.TouchJob(b.ctx, &core.TouchJobParams{ID: j.ID, Lease: claimed[0].Lease})
	require.NoError(t, err)
	require.JSONEq(t, string(j.Body), string(touched.Body))

	// The job of a conflict comes opened.
	res, err := b.s.PutJobs(b.ctx, &core.PutJobsParams{Jobs: []*core.Job{j}})
	require.NoError(t, err)
	var ce *core.ConflictError
	require.ErrorAs(t, res[0].Err, &ce)
	require.JSONEq(t, string(j.Body), string(ce.Job.Body))

	// An export gets the jobs opened, as from any store.
	var exported []*core.Job
	require.NoError(t, b.s.ExportJobs(b.ctx, func(j *core.Job) error { exported = append(exported, j); return nil }))
	require.Len(t, exported, 1)
	require.JSONEq(t, string(j.Body), string(exported[0].Body))
}

// TestStepBodiesSealedAtRest: the bodies of a job's next steps (then, at
// every depth) are sealed as its own, each for its step, and come opened.
func TestStepBodiesSealedAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t, ringBoth)
	j := markedJob()
	j.Then = &core.PushParams{Topic: "t.next", Body: json.RawMessage(`"step ` + marker + `"`),
		Then: &core.PushParams{Topic: "t.last", Body: json.RawMessage(`"last ` + marker + `"`)}}
	storetest.Put(t, b.ctx, b.s, j)
	require.Contains(t, string(j.Then.Then.Body), marker, "the caller's steps are left as they were")

	raw, err := b.mem.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.NotNil(t, raw.Then)
	require.NotNil(t, raw.Then.Then)
	for _, body := range []json.RawMessage{raw.Then.Body, raw.Then.Then.Body} {
		require.NotContains(t, string(body), marker)
		_, sealed := keyring.BodyKey(body)
		require.True(t, sealed, string(body))
	}
	require.NotEqual(t, string(raw.Then.Body), string(raw.Then.Then.Body))

	got, err := b.s.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.JSONEq(t, string(j.Then.Body), string(got.Then.Body))
	require.JSONEq(t, string(j.Then.Then.Body), string(got.Then.Then.Body))
	again, err := b.mem.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, raw.Then.Body, again.Then.Body, "opening left the store's copy sealed")
}

func TestRecordsSealedAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t, ringBoth)
	value := []byte(`{"delivery":{"secret":"` + marker + `"}}`)
	for _, kind := range []string{core.KindTopic, core.KindSchedule} {
		rev, err := b.s.PutRecord(b.ctx, &core.PutRecordParams{Kind: kind, Name: "n", Value: value})
		require.NoError(t, err)
		raw, err := b.mem.GetRecord(b.ctx, kind, "n")
		require.NoError(t, err)
		require.NotContains(t, string(raw.Value), marker, kind)
		got, err := b.s.GetRecord(b.ctx, kind, "n")
		require.NoError(t, err)
		require.Equal(t, value, got.Value)
		require.Equal(t, rev, got.Revision)
		list, err := b.s.ListRecords(b.ctx, kind)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, value, list[0].Value)
	}
	// Other kinds hold nothing of the users': kept as they are.
	_, err := b.s.PutRecord(b.ctx, &core.PutRecordParams{Kind: core.KindCursor, Name: "n", Value: []byte("c")})
	require.NoError(t, err)
	raw, err := b.mem.GetRecord(b.ctx, core.KindCursor, "n")
	require.NoError(t, err)
	require.Equal(t, "c", string(raw.Value))
}

// TestPlaintextBeforeEncryption reads what a store kept before encryption
// was switched on: plaintext, as it is.
func TestPlaintextBeforeEncryption(t *testing.T) {
	t.Parallel()
	b := setup(t, ringBoth)
	j := markedJob()
	storetest.Put(t, b.ctx, b.mem, j)
	_, err := b.mem.PutRecord(b.ctx, &core.PutRecordParams{Kind: core.KindTopic, Name: "t", Value: []byte(`{"a":1}`)})
	require.NoError(t, err)
	got, err := b.s.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, string(j.Body), string(got.Body))
	r, err := b.s.GetRecord(b.ctx, core.KindTopic, "t")
	require.NoError(t, err)
	require.Equal(t, `{"a":1}`, string(r.Value))
	page, err := b.s.ListJobs(b.ctx, &core.ListJobsParams{Topic: "t", State: core.StateReady, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, string(j.Body), string(page.Jobs[0].Body))
}

// TestUnknownKey: what a ring without the key reads is an error that
// names the key, and a claimed job is buried, never delivered.
func TestUnknownKey(t *testing.T) {
	t.Parallel()
	b := setup(t, ringBoth)
	j := markedJob()
	storetest.Put(t, b.ctx, b.s, j)
	other := keyring.New(b.mem, keyring.Config{Ring: mustParse(t, ringK1)})

	_, err := other.GetJob(b.ctx, j.ID)
	require.ErrorIs(t, err, keyring.ErrUnknownKey)
	require.ErrorContains(t, err, `job `+j.ID+`: keyring: sealed with key "k2"`)
	_, err = other.ListJobs(b.ctx, &core.ListJobsParams{Topic: "t", State: core.StateReady, Limit: 10})
	require.ErrorIs(t, err, keyring.ErrUnknownKey)

	jobs, err := other.ClaimJobs(b.ctx, &core.ClaimJobsParams{Topic: "t", Max: 5})
	require.NoError(t, err)
	require.Empty(t, jobs)
	dead, err := b.s.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDead, dead.State)
	require.Contains(t, dead.LastError, `sealed with key "k2", which is not in the key ring`)
	require.JSONEq(t, string(j.Body), string(dead.Body), "the body is kept for a ring with the key")
}

func TestImportSeals(t *testing.T) {
	t.Parallel()
	b := setup(t, ringBoth)
	j := markedJob()
	j.State = core.StateReady
	done, err := b.s.ImportJobs(b.ctx, []*core.Job{j})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, done)
	raw, err := b.mem.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.NotContains(t, string(raw.Body), marker)
	got, err := b.s.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.JSONEq(t, string(j.Body), string(got.Body))
}

// TestSearchFindsPlaintext: core's body search reads the listing, which
// the store opens, so it finds what the ciphertext hides.
func TestSearchFindsPlaintext(t *testing.T) {
	t.Parallel()
	b := setup(t, ringBoth)
	engine, err := core.NewEngine(core.EngineConfig{Store: b.s, Deliverers: map[string]core.Deliverer{}})
	require.NoError(t, err)
	var want []string
	for i := range 30 {
		j := storetest.NewJob("t", time.Now().Add(time.Hour))
		if i%3 == 0 {
			j.Body = json.RawMessage(`{"secret":"` + marker + `"}`)
			want = append(want, j.ID)
		}
		storetest.Put(t, b.ctx, b.s, j)
	}
	var got []string
	after := ""
	for {
		page, err := engine.SearchJobs(b.ctx, &core.SearchJobsParams{
			ListJobsParams: core.ListJobsParams{Topic: "t", State: core.StateScheduled, Limit: 4, After: after},
			Contains:       marker,
		})
		require.NoError(t, err)
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	require.ElementsMatch(t, want, got)
}

func TestVerify(t *testing.T) {
	t.Parallel()
	b := setup(t, ringBoth)
	require.NoError(t, b.s.Verify(b.ctx), "an empty store")
	storetest.Put(t, b.ctx, b.mem, markedJob()) // plaintext from before
	require.NoError(t, b.s.Verify(b.ctx))
	k1 := keyring.New(b.mem, keyring.Config{Ring: mustParse(t, ringK1)})
	require.NoError(t, k1.Verify(b.ctx))

	later := storetest.NewJob("later", time.Now().Add(time.Hour))
	storetest.Put(t, b.ctx, b.s, later)
	err := k1.Verify(b.ctx)
	require.ErrorIs(t, err, keyring.ErrUnknownKey)
	require.ErrorContains(t, err, `topic "later", scheduled jobs: job `+later.ID+`: keyring: sealed with key "k2"`)

	_, err = b.s.PutRecord(b.ctx, &core.PutRecordParams{Kind: core.KindTopic, Name: "hooks", Value: []byte(`{}`)})
	require.NoError(t, err)
	require.ErrorContains(t, k1.Verify(b.ctx), `topic "hooks": keyring: sealed with key "k2"`)
}
