package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// testJobURLKept: a job's own webhook URL comes back from GetJob and from
// every claim, through a retry, an expired lease, a bury and a requeue, and
// a replace takes the new job's URL, none included. Durable stores keep it
// through a restart too (testRestart).
func testJobURLKept(t *testing.T, b *testBundle) {
	const topic = "joburl.kept"
	const own = "https://hooks.example/orders/42?sig=a%20b"
	j := DueJob(topic)
	j.TTR = core.TTRMin
	j.URL = own
	plain := NewJob(topic, time.Now().Add(time.Hour))
	b.put(t, j, plain)
	require.Equal(t, own, b.get(t, j.ID).URL)
	require.Empty(t, b.get(t, plain.ID).URL)

	claim := func(what string, attempt int) *core.Job {
		t.Helper()
		c := b.claimOne(t, topic, dueWait)
		require.Equal(t, j.ID, c.ID, what)
		require.Equal(t, attempt, c.Attempt, what)
		require.Equal(t, own, c.URL, what)
		return c
	}
	c := claim("at first", 1)
	_, err := b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, Error: "status 503"})
	require.NoError(t, err)
	require.Equal(t, own, b.get(t, j.ID).URL, "after a retry")
	c = claim("after a retry", 2)
	b.passUntil(t, c.LeaseExpiresAt.Add(100*time.Millisecond))
	c = claim("after its lease expired", 3)
	_, err = b.store.BuryJob(b.ctx, &core.BuryJobParams{ID: c.ID, Lease: c.Lease, Error: "dead"})
	require.NoError(t, err)
	require.Equal(t, own, b.requireState(t, j.ID, core.StateDead).URL, "dead")
	require.Equal(t, own, listDead(t, b, topic, 10)[0].URL, "in the dead list")
	require.NoError(t, b.store.RequeueJob(b.ctx, j.ID))
	c = claim("after a requeue", 1)
	_, err = b.store.RetryJob(b.ctx, &core.RetryJobParams{ID: c.ID, Lease: c.Lease, RunAt: core.StoreTime(time.Now().Add(time.Hour))})
	require.NoError(t, err)

	// Replace takes the new job's URL, or none.
	moved := j.Clone()
	moved.URL = "http://127.0.0.1:9/other"
	noURL := plain.Clone()
	noURL.URL = ""
	withURL := plain.Clone()
	withURL.ID = plain.ID
	for _, r := range b.putResults(t, true, moved) {
		require.NoError(t, r.Err)
		require.True(t, r.Replaced)
	}
	require.Equal(t, moved.URL, b.get(t, j.ID).URL)
	moved.URL = ""
	b.putResults(t, true, moved)
	require.Empty(t, b.get(t, j.ID).URL, "replaced by a job without a url")
	withURL.URL = own
	b.putResults(t, true, withURL)
	require.Equal(t, own, b.get(t, plain.ID).URL, "replaced by a job with a url")
}
