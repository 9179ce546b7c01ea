package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// bodyRewriter returns the bundle's store as a core.BodyRewriter, or
// skips.
func (b *testBundle) bodyRewriter(t *testing.T) core.BodyRewriter {
	t.Helper()
	rw, ok := b.store.(core.BodyRewriter)
	if !ok {
		t.Skipf("%T is not a core.BodyRewriter", b.store)
	}
	return rw
}

// rewrite rewrites the body of j from old to body.
func (b *testBundle) rewrite(rw core.BodyRewriter, id string, old, body json.RawMessage) error {
	return rw.RewriteBody(b.ctx, &core.RewriteBodyParams{ID: id, Old: old, Body: body})
}

// sameButBody requires got to be want as of the same moment but for its
// body: state, attempt, lease, times and history.
func sameButBody(t *testing.T, want, got *core.Job, body json.RawMessage) {
	t.Helper()
	require.JSONEq(t, string(body), string(got.Body), "body of %s", want.ID)
	w, g := want.Clone(), got.Clone()
	w.Body, g.Body = nil, nil
	require.Equal(t, w, g, "all but the body of %s", want.ID)
}

// testRewriteBody: a rewrite changes the body of a job in any state and
// nothing else, and a lease taken before it settles after it; a body that
// changed meanwhile is a conflict that changes nothing.
func testRewriteBody(t *testing.T, b *testBundle) {
	rw := b.bodyRewriter(t)
	old, body := json.RawMessage(`{"n":1}`), json.RawMessage(`"sealed anew"`)

	later := NewJob("rw", time.Now().Add(time.Hour))
	later.Key = "k"
	b.put(t, later)
	before := b.get(t, later.ID)
	require.NoError(t, b.rewrite(rw, later.ID, old, body))
	sameButBody(t, before, b.get(t, later.ID), body)
	found, err := b.store.FindJobs(b.ctx, &core.FindJobsParams{Topic: "rw", Key: "k", Limit: 5})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.JSONEq(t, string(body), string(found[0].Body))

	// Reserved: the lease holds across the rewrite, and the ack finishes it.
	due := DueJob("rw-claim")
	b.put(t, due)
	claimed := b.claimOne(t, "rw-claim", time.Second)
	require.NoError(t, b.rewrite(rw, due.ID, old, body))
	sameButBody(t, claimed, b.get(t, due.ID), body)
	_, err = b.store.AckJob(b.ctx, &core.AckJobParams{ID: due.ID, Lease: claimed.Lease})
	require.NoError(t, err)
	done := b.requireState(t, due.ID, core.StateDone)
	require.JSONEq(t, string(body), string(done.Body))

	// Finished and dead jobs keep theirs too.
	require.NoError(t, b.rewrite(rw, due.ID, body, old))
	sameButBody(t, done, b.get(t, due.ID), old)
	dying := DueJob("rw-dead")
	b.put(t, dying)
	c := b.claimOne(t, "rw-dead", time.Second)
	_, err = b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: dying.ID, Lease: c.Lease, Error: "x"})
	require.NoError(t, err)
	dead := b.requireState(t, dying.ID, core.StateDead)
	require.NoError(t, b.rewrite(rw, dying.ID, old, body))
	sameButBody(t, dead, b.get(t, dying.ID), body)
	list, err := b.store.ListDeadJobs(b.ctx, &core.ListDeadJobsParams{Topic: "rw-dead", Limit: 5})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.JSONEq(t, string(body), string(list[0].Body))

	// A replace got there first: the rewrite of what was read conflicts.
	replaced := NewJob("rw", time.Now().Add(time.Hour))
	b.put(t, replaced)
	again := *replaced
	again.Body = json.RawMessage(`{"n":2}`)
	res := b.putResults(t, true, &again)
	require.NoError(t, res[0].Err)
	err = b.rewrite(rw, replaced.ID, old, body)
	require.ErrorIs(t, err, core.ErrConflict)
	require.JSONEq(t, `{"n":2}`, string(b.get(t, replaced.ID).Body))

	require.ErrorIs(t, b.rewrite(rw, core.NewID(), old, body), core.ErrNotFound)
}
