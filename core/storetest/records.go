package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// putRecord puts a record with the revision rev and returns its new one,
// requiring no error.
func (b *testBundle) putRecord(t *testing.T, s core.Store, kind, name, value string, rev uint64) uint64 {
	t.Helper()
	got, err := s.PutRecord(b.ctx, &core.PutRecordParams{Kind: kind, Name: name, Value: []byte(value), Revision: rev})
	require.NoError(t, err, "put record %s/%s at revision %d", kind, name, rev)
	require.NotZero(t, got, "a stored record's revision")
	return got
}

// requireRecord requires the record to hold value at revision rev.
func (b *testBundle) requireRecord(t *testing.T, s core.Store, kind, name, value string, rev uint64) {
	t.Helper()
	got, err := s.GetRecord(b.ctx, kind, name)
	require.NoError(t, err, "get record %s/%s", kind, name)
	require.Equal(t, kind, got.Kind)
	require.Equal(t, name, got.Name)
	require.Equal(t, value, string(got.Value), "value of %s/%s", kind, name)
	require.Equal(t, rev, got.Revision, "revision of %s/%s", kind, name)
}

// testRecords: records are created once, changed and deleted only at the
// revision they have, listed by kind in name order, byte for byte, and
// seen alike by every instance; a record made again never gets a revision
// it had.
func testRecords(t *testing.T, b *testBundle) {
	const kind, other = "widget", "gadget"
	_, err := b.store.GetRecord(b.ctx, kind, "a")
	require.ErrorIs(t, err, core.ErrNotFound)
	list, err := b.store.ListRecords(b.ctx, kind)
	require.NoError(t, err)
	require.Empty(t, list)

	value := "bin\x00ary\n{\"x\":1}\xff"
	r1 := b.putRecord(t, b.store, kind, "a.b-c_d", value, 0)
	b.requireRecord(t, b.store, kind, "a.b-c_d", value, r1)
	_, err = b.store.PutRecord(b.ctx, &core.PutRecordParams{Kind: kind, Name: "a.b-c_d", Value: []byte("again")})
	require.ErrorIs(t, err, core.ErrConflict, "a create of an existing record")
	var ce *core.ConflictError
	require.ErrorAs(t, err, &ce)
	_, err = b.store.PutRecord(b.ctx, &core.PutRecordParams{Kind: kind, Name: "missing", Value: []byte("x"), Revision: r1})
	require.ErrorIs(t, err, core.ErrConflict, "a revision of a record that does not exist")
	_, err = b.store.GetRecord(b.ctx, kind, "missing")
	require.ErrorIs(t, err, core.ErrNotFound, "a refused put stores nothing")

	// Compare-and-set: the revision read wins once.
	r2 := b.putRecord(t, b.store, kind, "a.b-c_d", "two", r1)
	require.NotEqual(t, r1, r2)
	_, err = b.store.PutRecord(b.ctx, &core.PutRecordParams{Kind: kind, Name: "a.b-c_d", Value: []byte("stale"), Revision: r1})
	require.ErrorIs(t, err, core.ErrConflict, "a put at a stale revision")
	other2 := b.open(t)
	b.requireRecord(t, other2, kind, "a.b-c_d", "two", r2)

	// Delete: refused at a stale revision, then applied.
	require.ErrorIs(t, b.store.DeleteRecord(b.ctx, &core.DeleteRecordParams{Kind: kind, Name: "a.b-c_d", Revision: r1}), core.ErrConflict)
	b.requireRecord(t, b.store, kind, "a.b-c_d", "two", r2)
	require.NoError(t, other2.DeleteRecord(b.ctx, &core.DeleteRecordParams{Kind: kind, Name: "a.b-c_d", Revision: r2}))
	_, err = b.store.GetRecord(b.ctx, kind, "a.b-c_d")
	require.ErrorIs(t, err, core.ErrNotFound)
	require.ErrorIs(t, b.store.DeleteRecord(b.ctx, &core.DeleteRecordParams{Kind: kind, Name: "a.b-c_d", Revision: r2}), core.ErrNotFound)
	_, err = b.store.PutRecord(b.ctx, &core.PutRecordParams{Kind: kind, Name: "a.b-c_d", Value: []byte("x"), Revision: r2})
	require.ErrorIs(t, err, core.ErrConflict, "a deleted record's revision")
	r3 := b.putRecord(t, b.store, kind, "a.b-c_d", "three", 0)
	require.NotContains(t, []uint64{r1, r2}, r3, "a record made again gets a new revision")

	// Listing: one kind, sorted by name; kinds are apart.
	b.putRecord(t, b.store, kind, "0first", "", 0)
	b.putRecord(t, b.store, other, "a.b-c_d", "gadget", 0)
	list, err = other2.ListRecords(b.ctx, kind)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "0first", list[0].Name)
	require.Empty(t, list[0].Value)
	require.Equal(t, "a.b-c_d", list[1].Name)
	require.Equal(t, "three", string(list[1].Value))
	require.Equal(t, r3, list[1].Revision)
	require.Equal(t, kind, list[1].Kind)
	list, err = b.store.ListRecords(b.ctx, other)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "gadget", string(list[0].Value))
	b.requireRecord(t, b.store, kind, "a.b-c_d", "three", r3)

	// Bad input changes nothing.
	for _, p := range []*core.PutRecordParams{nil, {Kind: "", Name: "n"}, {Kind: "Bad Kind", Name: "n"}, {Kind: kind, Name: ""}, {Kind: kind, Name: "a\x00b"}} {
		_, err := b.store.PutRecord(b.ctx, p)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "put %+v", p)
	}
	require.ErrorIs(t, b.store.DeleteRecord(b.ctx, &core.DeleteRecordParams{Kind: kind, Name: "a.b-c_d"}), core.ErrInvalidArgument, "a delete needs a revision")
	_, err = b.store.GetRecord(b.ctx, "", "x")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = b.store.ListRecords(b.ctx, "")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	b.requireRecord(t, b.store, kind, "a.b-c_d", "three", r3)
}

// testRecordsRace: callers on two instances that put a record at the same
// revision at once, or create it at once, succeed one per revision; the
// others get a conflict.
func testRecordsRace(t *testing.T, b *testBundle) {
	const kind, name, workers, rounds = "race", "counter", 8, 5
	stores := []core.Store{b.store, b.open(t)}
	rev := uint64(0)
	for round := range rounds {
		var wins atomic.Int32
		var won atomic.Uint64
		var failures errs
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			s := stores[w%len(stores)]
			wg.Go(func() {
				<-start
				got, err := s.PutRecord(b.ctx, &core.PutRecordParams{Kind: kind, Name: name, Value: fmt.Appendf(nil, "%d/%d", round, w), Revision: rev})
				switch {
				case err == nil:
					wins.Add(1)
					won.Store(got)
				case !isConflict(err):
					failures.add(err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, failures.err())
		require.Equal(t, int32(1), wins.Load(), "round %d: one put wins at revision %d", round, rev)
		got, err := b.store.GetRecord(b.ctx, kind, name)
		require.NoError(t, err)
		require.Equal(t, won.Load(), got.Revision, "round %d", round)
		require.Contains(t, string(got.Value), fmt.Sprintf("%d/", round))
		rev = got.Revision
	}
}

// isConflict reports whether err is a conflict, as a *ConflictError.
func isConflict(err error) bool {
	var ce *core.ConflictError
	return errors.As(err, &ce)
}

// testRecordsRestart: records and their revisions outlive a restart of a
// durable store, and a put at the revision read before it applies.
func testRecordsRestart(t *testing.T, b *testBundle) {
	if !b.h.Durable {
		t.Skip("the backend is not durable")
	}
	const kind = "restart"
	r1 := b.putRecord(t, b.store, kind, "kept", "v1", 0)
	gone := b.putRecord(t, b.store, kind, "gone", "x", 0)
	require.NoError(t, b.store.DeleteRecord(b.ctx, &core.DeleteRecordParams{Kind: kind, Name: "gone", Revision: gone}))
	require.NoError(t, b.store.Close())
	b.store = b.open(t)
	b.requireRecord(t, b.store, kind, "kept", "v1", r1)
	_, err := b.store.GetRecord(b.ctx, kind, "gone")
	require.ErrorIs(t, err, core.ErrNotFound)
	r2 := b.putRecord(t, b.store, kind, "kept", "v2", r1)
	require.NotEqual(t, r1, r2)
	again := b.putRecord(t, b.store, kind, "gone", "y", 0)
	require.NotEqual(t, gone, again, "a record made again after a restart gets a new revision")
}
