package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// The subtests of ClaimJobsParams.KeyRate, the rate per key. Its tokens
// come back with time: they run on a store the harness opens on a fake
// clock (Harness.OpenClock), which they advance. A store that refuses a
// topic with rate.per_key (core.TopicChecker) skips them.

// perSecond is the rate per key of most subtests: one token a second, none
// saved up.
var perSecond = core.Rate{Limit: 1, Period: time.Second, Burst: 1, PerKey: true}

// clockedBundle is a store on a fake clock, and the clock.
type clockedBundle struct {
	*testBundle
	clock *coretest.FakeClock
	src   core.ClaimSource
}

// perKeyRate returns a bundle whose store is on a fake clock, in a
// namespace of its own, or skips t when the bundle's store refuses
// rate.per_key or the harness opens no store on a clock.
func (b *testBundle) perKeyRate(t *testing.T) *clockedBundle {
	t.Helper()
	if err := core.CheckTopicOn(b.store, &core.Topic{Name: "pkr", Rate: perSecond}); err != nil {
		t.Skipf("the store refuses rate.per_key: %v", err)
	}
	if b.h.OpenClock == nil {
		t.Skip("the harness opens no store on a fake clock (Harness.OpenClock)")
	}
	clock := coretest.NewFakeClockAt(time.Now())
	cb := &clockedBundle{testBundle: &testBundle{h: b.h, ns: namespace(t), ctx: b.ctx}, clock: clock}
	cb.store = b.h.OpenClock(t, cb.ns, clock)
	require.NotNil(t, cb.store, "Harness.OpenClock returned nil")
	t.Cleanup(func() { _ = cb.store.Close() })
	src, ok := cb.store.(core.ClaimSource)
	require.True(t, ok, "%T is no core.ClaimSource", cb.store)
	cb.src = src
	return cb
}

// due returns jobs of topic, each with the key of keys at its place ("" for
// none), due on the bundle's clock in that order: the first a second ago,
// each next a millisecond later.
func (cb *clockedBundle) due(topic string, keys ...string) []*core.Job {
	start := cb.clock.Now().Add(-time.Second)
	jobs := make([]*core.Job, len(keys))
	for i, k := range keys {
		jobs[i] = keyed(topic, k, start.Add(time.Duration(i)*time.Millisecond))
	}
	return jobs
}

// take takes up to max jobs of topic now (TakeJobs, which never waits)
// with rate per key rate, key concurrency kc and fair.
func (cb *clockedBundle) take(t *testing.T, topic string, max int, rate core.Rate, kc int, fair bool) core.Taken {
	t.Helper()
	taken, err := cb.src.TakeJobs(cb.ctx, &core.ClaimJobsParams{Topic: topic, Max: max, KeyRate: rate, KeyConcurrency: kc, Fair: fair})
	require.NoError(t, err)
	require.NotNil(t, taken.Jobs)
	require.LessOrEqual(t, len(taken.Jobs), max)
	for _, j := range taken.Jobs {
		requireClaimed(t, j, topic)
	}
	return taken
}

// requireNothingUntil requires a take of topic to give nothing and to say
// to look again at at: when the earliest key waiting for a token gets it.
func (cb *clockedBundle) requireNothingUntil(t *testing.T, topic string, rate core.Rate, kc int, fair bool, at time.Time) {
	t.Helper()
	taken := cb.take(t, topic, 10, rate, kc, fair)
	require.Empty(t, ids(taken.Jobs), "nothing before %s", at)
	require.WithinDuration(t, at, taken.Next, time.Millisecond, "the next token")
}

// testPerKeyRateRefused: a store that refuses rate.per_key says so on the
// field, naming the backend, and refuses nothing else of a topic.
func testPerKeyRateRefused(t *testing.T, b *testBundle) {
	err := core.CheckTopicOn(b.store, &core.Topic{Name: "pkr", Rate: perSecond})
	if err == nil {
		t.Skip("the store honours rate.per_key")
	}
	var fe *core.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "rate.per_key", fe.Field)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.Contains(t, err.Error(), "backend", "the message names the backend")
	full := coretest.FullTopic(t)
	full.Rate.PerKey, full.KeyConcurrency, full.Fair = false, 0, false
	require.NoError(t, core.CheckTopicOn(b.store, full), "every other setting")
}

// testPerKeyRateKeys: each key has a bucket of its own: two keys at one a
// second each get a token at once where the topic's one bucket would give
// one; a key's jobs over its rate wait, ready, and go out at the refill
// times, one a second, in claim order, and a take says when the next
// token comes.
func testPerKeyRateKeys(t *testing.T, b *testBundle) {
	cb := b.perKeyRate(t)
	const topic = "pkr.keys"
	jobs := cb.due(topic, "a", "b", "a", "b", "a")
	cb.put(t, jobs...)
	a1, b1, a2, b2, a3 := jobs[0], jobs[1], jobs[2], jobs[3], jobs[4]
	start := cb.clock.Now()

	require.Equal(t, ids([]*core.Job{a1, b1}), ids(cb.take(t, topic, 10, perSecond, 0, false).Jobs), "a token of each key")
	cb.requireNothingUntil(t, topic, perSecond, 0, false, start.Add(time.Second))
	cb.requireCounts(t, topic, core.Counts{Ready: 3, Reserved: 2})

	cb.clock.Advance(999 * time.Millisecond)
	require.Empty(t, cb.take(t, topic, 10, perSecond, 0, false).Jobs, "not before the refill")
	cb.clock.Advance(time.Millisecond)
	require.Equal(t, ids([]*core.Job{a2, b2}), ids(cb.take(t, topic, 10, perSecond, 0, false).Jobs), "the next of each key at the refill")
	cb.requireNothingUntil(t, topic, perSecond, 0, false, start.Add(2*time.Second))
	cb.clock.Advance(time.Second)
	require.Equal(t, ids([]*core.Job{a3}), ids(cb.take(t, topic, 10, perSecond, 0, false).Jobs))
}

// testPerKeyRateUnkeyed: jobs without a key share one bucket of their own,
// apart from every key's: per_key never leaves them unlimited.
func testPerKeyRateUnkeyed(t *testing.T, b *testBundle) {
	cb := b.perKeyRate(t)
	const topic = "pkr.unkeyed"
	jobs := cb.due(topic, "", "", "a", "")
	cb.put(t, jobs...)
	require.Equal(t, ids([]*core.Job{jobs[0], jobs[2]}), ids(cb.take(t, topic, 10, perSecond, 0, false).Jobs), "one without a key, and a")
	cb.requireNothingUntil(t, topic, perSecond, 0, false, cb.clock.Now().Add(time.Second))
	cb.clock.Advance(time.Second)
	require.Equal(t, ids(jobs[1:2]), ids(cb.take(t, topic, 10, perSecond, 0, false).Jobs))
	cb.clock.Advance(time.Second)
	require.Equal(t, ids(jobs[3:]), ids(cb.take(t, topic, 10, perSecond, 0, false).Jobs))
}

// testPerKeyRateBurst: a key's bucket holds Burst tokens after a quiet
// time and fills at Limit a Period: a burst of 3 at 2 a second gives 3,
// then one every 500 ms.
func testPerKeyRateBurst(t *testing.T, b *testBundle) {
	cb := b.perKeyRate(t)
	const topic = "pkr.burst"
	rate := core.Rate{Limit: 2, Period: time.Second, Burst: 3, PerKey: true}
	jobs := cb.due(topic, repeat("k", 5)...)
	cb.put(t, jobs...)
	require.Equal(t, ids(jobs[:3]), ids(cb.take(t, topic, 10, rate, 0, false).Jobs), "the burst")
	cb.requireNothingUntil(t, topic, rate, 0, false, cb.clock.Now().Add(500*time.Millisecond))
	cb.clock.Advance(500 * time.Millisecond)
	require.Equal(t, ids(jobs[3:4]), ids(cb.take(t, topic, 10, rate, 0, false).Jobs))
	cb.clock.Advance(500 * time.Millisecond)
	require.Equal(t, ids(jobs[4:]), ids(cb.take(t, topic, 10, rate, 0, false).Jobs))
}

// testPerKeyRateKeyConcurrency: with KeyConcurrency a job needs a slot and
// a token: a job held back for a slot takes no token, and one whose key has
// a slot free waits for its token.
func testPerKeyRateKeyConcurrency(t *testing.T, b *testBundle) {
	cb := b.perKeyRate(t)
	const topic = "pkr.kc"
	rate := core.Rate{Limit: 1, Period: time.Second, Burst: 2, PerKey: true}
	jobs := cb.due(topic, "a", "a", "a")
	cb.put(t, jobs...)
	first := cb.take(t, topic, 10, rate, 1, false).Jobs
	require.Equal(t, ids(jobs[:1]), ids(first), "one slot")
	require.NoError(t, ack(cb.testBundle, first[0]))
	second := cb.take(t, topic, 10, rate, 1, false).Jobs
	require.Equal(t, ids(jobs[1:2]), ids(second), "the slot back, and the second token: none was taken while held back")
	require.NoError(t, ack(cb.testBundle, second[0]))
	cb.requireNothingUntil(t, topic, rate, 1, false, cb.clock.Now().Add(time.Second))
	cb.clock.Advance(time.Second)
	require.Equal(t, ids(jobs[2:]), ids(cb.take(t, topic, 10, rate, 1, false).Jobs))
}

// testPerKeyRateFair: fair takes serve the keys with a token in turn; a
// key without one is out of the ring until its refill, and comes back at
// the back of the ring.
func testPerKeyRateFair(t *testing.T, b *testBundle) {
	cb := b.perKeyRate(t)
	const topic = "pkr.fair"
	rate := core.Rate{Limit: 1, Period: time.Second, Burst: 2, PerKey: true}
	jobs := cb.due(topic, slices.Concat(repeat("a", 4), repeat("b", 2), repeat("c", 1))...)
	cb.put(t, jobs...)
	a, bb, c := jobs[:4], jobs[4:6], jobs[6]

	got := cb.take(t, topic, 10, rate, 0, true).Jobs
	require.Equal(t, ids([]*core.Job{a[0], bb[0], c, a[1], bb[1]}), ids(got), "in turn, two tokens a key")
	cb.requireNothingUntil(t, topic, rate, 0, true, cb.clock.Now().Add(time.Second))
	cb.clock.Advance(time.Second)
	got = cb.take(t, topic, 10, rate, 0, true).Jobs
	require.Equal(t, ids(a[2:3]), ids(got), "a's refill")
	cb.clock.Advance(time.Second)
	require.Empty(t, cb.take(t, topic, 10, rate, 3, true).Jobs, "with key_concurrency 3, a's three reserved: a token, no slot")
	require.NoError(t, ack(cb.testBundle, got[0]))
	require.Equal(t, ids(a[3:]), ids(cb.take(t, topic, 10, rate, 3, true).Jobs), "a slot, and the token kept")
}

// testPerKeyRateChanged: the rate is read at each take: jobs parked under
// one rate go out at the refill times of a new one, and all of them at
// once when per_key is turned off.
func testPerKeyRateChanged(t *testing.T, b *testBundle) {
	cb := b.perKeyRate(t)
	const topic = "pkr.changed"
	jobs := cb.due(topic, repeat("k", 4)...)
	cb.put(t, jobs...)
	require.Equal(t, ids(jobs[:1]), ids(cb.take(t, topic, 10, perSecond, 0, false).Jobs))
	cb.requireNothingUntil(t, topic, perSecond, 0, false, cb.clock.Now().Add(time.Second))

	faster := core.Rate{Limit: 10, Period: time.Second, Burst: 1, PerKey: true}
	cb.requireNothingUntil(t, topic, faster, 0, false, cb.clock.Now().Add(100*time.Millisecond))
	cb.clock.Advance(100 * time.Millisecond)
	require.Equal(t, ids(jobs[1:2]), ids(cb.take(t, topic, 10, faster, 0, false).Jobs), "at the new rate's refill")
	require.Equal(t, ids(jobs[2:]), ids(cb.take(t, topic, 10, core.Rate{}, 0, false).Jobs), "per_key off: the rest")
}

// testPerKeyRateParked: a job waiting for its key's token is ready to every
// reader (get, counts); it can be cancelled and replaced: at the refill the
// replaced one goes out with its new body, the cancelled one never.
func testPerKeyRateParked(t *testing.T, b *testBundle) {
	cb := b.perKeyRate(t)
	const topic = "pkr.parked"
	jobs := cb.due(topic, "k", "k", "k")
	cb.put(t, jobs...)
	require.Equal(t, ids(jobs[:1]), ids(cb.take(t, topic, 10, perSecond, 0, false).Jobs))
	cb.requireNothingUntil(t, topic, perSecond, 0, false, cb.clock.Now().Add(time.Second))
	cb.requireState(t, jobs[1].ID, core.StateReady)
	cb.requireCounts(t, topic, core.Counts{Ready: 2, Reserved: 1})

	require.NoError(t, cb.store.CancelJob(cb.ctx, &core.CancelJobParams{ID: jobs[1].ID}))
	replaced := jobs[2].Clone()
	replaced.Body = []byte(`{"n":2}`)
	res := cb.putResults(t, true, replaced)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Replaced)
	cb.requireCounts(t, topic, core.Counts{Ready: 1, Reserved: 1, Cancelled: 1})

	cb.clock.Advance(time.Second)
	got := cb.take(t, topic, 10, perSecond, 0, false).Jobs
	require.Equal(t, ids(jobs[2:]), ids(got), "the replaced job, not the cancelled one")
	require.JSONEq(t, `{"n":2}`, string(got[0].Body))
	require.Empty(t, cb.take(t, topic, 10, perSecond, 0, false).Jobs)
}

// testPerKeyRateRestart: a job parked for its key's token is ready on
// disk and outlives a restart. Where the buckets live in the store's
// memory (the local store) the restart refills them and the job goes out
// at once; where they live in the backend, shared by its instances (Redis),
// the key still waits and the job goes out at its token, not before.
func testPerKeyRateRestart(t *testing.T, b *testBundle) {
	cb := b.perKeyRate(t)
	if !b.h.Durable {
		t.Skip("the backend is not durable")
	}
	const topic = "pkr.restart"
	hourly := core.Rate{Limit: 1, Period: time.Hour, Burst: 1, PerKey: true}
	jobs := cb.due(topic, "k", "k")
	cb.put(t, jobs...)
	first := cb.take(t, topic, 10, hourly, 0, false).Jobs
	require.Equal(t, ids(jobs[:1]), ids(first))
	require.NoError(t, ack(cb.testBundle, first[0]))
	require.Empty(t, cb.take(t, topic, 10, hourly, 0, false).Jobs, "parked for an hour")
	token := cb.clock.Now().Add(time.Hour)

	require.NoError(t, cb.store.Close())
	cb.store = b.h.OpenClock(t, cb.ns, cb.clock)
	t.Cleanup(func() { _ = cb.store.Close() })
	cb.src = cb.store.(core.ClaimSource)
	cb.requireCounts(t, topic, core.Counts{Ready: 1, Done: 1})
	got := cb.take(t, topic, 10, hourly, 0, false)
	if len(got.Jobs) == 0 {
		// The bucket outlived the store: the key waits for its token.
		require.WithinDuration(t, token, got.Next, time.Millisecond, "the next token")
		cb.clock.Advance(time.Hour)
		got = cb.take(t, topic, 10, hourly, 0, false)
	}
	require.Equal(t, ids(jobs[1:]), ids(got.Jobs), "the parked job, once its key has a token")
}
