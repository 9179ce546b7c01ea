package keyring_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/keyring"
)

// Key rings of the tests: k1, k2, and k2 current with k1 old.
const (
	ringK1   = "k1 AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n"
	ringK2   = "k2 AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=\n"
	ringBoth = ringK2 + ringK1
)

// rekeyAll runs a whole pass by pages of limit and sums them.
func rekeyAll(t *testing.T, s *keyring.Store, limit int) keyring.RekeyPage {
	t.Helper()
	var sum keyring.RekeyPage
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "the pass ends")
		p, err := s.Rekey(t.Context(), &keyring.RekeyParams{After: after, Limit: limit})
		require.NoError(t, err)
		require.LessOrEqual(t, p.Scanned, limit)
		sum.Scanned += p.Scanned
		sum.Rekeyed += p.Rekeyed
		sum.Changed += p.Changed
		sum.Records += p.Records
		if p.Next == "" {
			return sum
		}
		after = p.Next
	}
}

// TestRekey: a pass seals every job (in every state) and record with the
// current key and changes nothing else, after which the old key can go.
func TestRekey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	old := keyring.New(mem, keyring.Config{Ring: mustParse(t, ringK1)})

	storetest.Put(t, ctx, mem, markedJob()) // plaintext from before encryption
	var ids []string
	for i := range 10 {
		j := storetest.NewJob(fmt.Sprintf("t%d", i%3), time.Now().Add(time.Duration(i%2)*time.Hour))
		j.Body = json.RawMessage(fmt.Sprintf(`{"secret":%q,"i":%d}`, marker, i))
		storetest.Put(t, ctx, old, j)
		ids = append(ids, j.ID)
	}
	claimed := storetest.Claim(t, ctx, old, "t0", 2, 0)
	require.Len(t, claimed, 2)
	_, err := old.AckJob(ctx, &core.AckJobParams{ID: claimed[0].ID, Lease: claimed[0].Lease})
	require.NoError(t, err)
	_, err = old.PutRecord(ctx, &core.PutRecordParams{Kind: core.KindTopic, Name: "t0", Value: []byte(`{"secret":"` + marker + `"}`)})
	require.NoError(t, err)

	before := map[string]*core.Job{}
	for _, id := range ids {
		j, err := old.GetJob(ctx, id)
		require.NoError(t, err)
		before[id] = j
	}

	rotated := keyring.New(mem, keyring.Config{Ring: mustParse(t, ringBoth)})
	sum := rekeyAll(t, rotated, 3)
	require.Equal(t, keyring.RekeyPage{Scanned: 11, Rekeyed: 11, Records: 1}, sum)
	again := rekeyAll(t, rotated, 3)
	require.Equal(t, keyring.RekeyPage{Scanned: 11}, again, "a second pass has nothing to do")

	onlyNew := keyring.New(mem, keyring.Config{Ring: mustParse(t, ringK2)})
	require.NoError(t, onlyNew.Verify(ctx))
	for _, id := range ids {
		raw, err := mem.GetJob(ctx, id)
		require.NoError(t, err)
		key, sealed := keyring.BodyKey(raw.Body)
		require.True(t, sealed)
		require.Equal(t, "k2", key)
		got, err := onlyNew.GetJob(ctx, id)
		require.NoError(t, err)
		require.Equal(t, before[id], got, "only the ciphertext changed")
	}
	r, err := onlyNew.GetRecord(ctx, core.KindTopic, "t0")
	require.NoError(t, err)
	require.Contains(t, string(r.Value), marker)
	// The lease taken before the pass settles after it.
	_, err = onlyNew.AckJob(ctx, &core.AckJobParams{ID: claimed[1].ID, Lease: claimed[1].Lease})
	require.NoError(t, err)
}

// TestRekeyWhileDelivering runs a pass while a consumer claims and acks:
// every job is delivered once, with its body, and ends done.
func TestRekeyWhileDelivering(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	old := keyring.New(mem, keyring.Config{Ring: mustParse(t, ringK1)})
	const n = 300
	want := map[string]string{}
	for i := range n {
		j := storetest.DueJob("t")
		j.Body = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		storetest.Put(t, ctx, old, j)
		want[j.ID] = string(j.Body)
	}
	rotated := keyring.New(mem, keyring.Config{Ring: mustParse(t, ringBoth)})
	got := map[string]string{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for len(got) < n {
			jobs, err := rotated.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "t", Max: 7, Wait: time.Second})
			if !assertNoError(t, err) {
				return
			}
			for _, j := range jobs {
				_, dup := got[j.ID]
				if dup {
					t.Errorf("job %s delivered twice", j.ID)
				}
				got[j.ID] = string(j.Body)
				_, err := rotated.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})
				if !assertNoError(t, err) {
					return
				}
			}
		}
	})
	sum := rekeyAll(t, rotated, 5)
	wg.Wait()
	require.Equal(t, want, got)
	require.LessOrEqual(t, sum.Rekeyed+sum.Changed, sum.Scanned)
	// Whatever the pass met it sealed again; a second pass finds the rest.
	rekeyAll(t, rotated, 50)
	onlyNew := keyring.New(mem, keyring.Config{Ring: mustParse(t, ringK2)})
	for id := range want {
		j, err := onlyNew.GetJob(ctx, id)
		require.NoError(t, err)
		require.Equal(t, core.StateDone, j.State)
		require.Equal(t, want[id], string(j.Body))
	}
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

func TestRekeyRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t, ringBoth)
	for _, p := range []keyring.RekeyParams{{Limit: 0}, {Limit: keyring.RekeyLimitMax + 1}, {Limit: 5, After: "nope!"}} {
		_, err := b.s.Rekey(b.ctx, &p)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
	}
	// A job the ring cannot open stops the pass, named.
	k9 := keyring.New(b.mem, keyring.Config{Ring: mustParse(t, "k9 CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=\n")})
	j := markedJob()
	storetest.Put(t, b.ctx, k9, j)
	_, err := b.s.Rekey(b.ctx, &keyring.RekeyParams{Limit: 5})
	require.ErrorIs(t, err, keyring.ErrUnknownKey)
	require.ErrorContains(t, err, "rekey: job "+j.ID)
}

// plainStore hides the capabilities of the store it holds.
type plainStore struct{ core.Store }

func TestRekeyUnsupported(t *testing.T) {
	t.Parallel()
	b := setup(t, ringK1)
	_, err := b.s.PutRecord(b.ctx, &core.PutRecordParams{Kind: core.KindSchedule, Name: "s", Value: []byte(`{}`)})
	require.NoError(t, err)
	storetest.Put(t, b.ctx, b.s, markedJob())
	s := keyring.New(plainStore{b.mem}, keyring.Config{Ring: mustParse(t, ringBoth)})
	page, err := s.Rekey(b.ctx, &keyring.RekeyParams{Limit: 5})
	require.ErrorIs(t, err, core.ErrUnsupported)
	require.Equal(t, 1, page.Records, "the records are sealed again all the same")
	r, err := b.mem.GetRecord(b.ctx, core.KindSchedule, "s")
	require.NoError(t, err)
	key, _ := keyring.KeyOf(r.Value)
	require.Equal(t, "k2", key)
}
