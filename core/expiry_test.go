package core_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

func TestPushExpiryValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	now := b.clock.Now()
	past, soon, later := now.Add(-time.Second), now.Add(30*time.Minute), now.Add(2*time.Hour)
	cases := []struct {
		field, says string
		p           core.PushParams
	}{
		{"expires_in", "exclusive", core.PushParams{Topic: "t", ExpiresAt: &later, ExpiresIn: dur(time.Hour)}},
		{"expires_in", "positive", core.PushParams{Topic: "t", ExpiresIn: dur(0)}},
		{"expires_in", "positive", core.PushParams{Topic: "t", ExpiresIn: dur(-time.Second)}},
		{"expires_at", "in the past", core.PushParams{Topic: "t", ExpiresAt: &past}},
		{"expires_at", "in the past", core.PushParams{Topic: "t", ExpiresAt: &now}},
		{"expires_in", "in the past", core.PushParams{Topic: "t", RunAt: &past, ExpiresIn: dur(time.Millisecond)}},
		{"expires_at", "must be after run_at", core.PushParams{Topic: "t", Delay: dur(time.Hour), ExpiresAt: &soon}},
		{"expires_at", "must be after run_at", core.PushParams{Topic: "t", RunAt: &soon, ExpiresAt: &soon}},
		{"expires_at", "at most 24h0m0s after run_at", core.PushParams{Topic: "t", ExpiresIn: dur(25 * time.Hour)}},
	}
	for _, c := range cases {
		_, err := b.engine.Push(ctx, &c.p)
		require.ErrorIs(t, err, core.ErrInvalidArgument, c.says)
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe, c.says)
		require.Equal(t, c.field, fe.Field, c.says)
		require.Contains(t, err.Error(), c.says)
	}
	topics, err := b.engine.ListTopics(ctx)
	require.NoError(t, err)
	require.Empty(t, topics, "bad input changes nothing")

	for _, bad := range []time.Duration{-time.Second, 25 * time.Hour} {
		err := b.engine.PutTopic(ctx, &core.Topic{Name: "t", ExpiresIn: bad})
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe, "topic expires_in %s", bad)
		require.Equal(t, "expires_in", fe.Field)
	}
}

func TestPushExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	now := b.clock.Now()
	push := func(p core.PushParams) *core.Job {
		t.Helper()
		j, err := b.engine.Push(ctx, &p)
		require.NoError(t, err)
		got, err := b.engine.Get(ctx, j.ID)
		require.NoError(t, err)
		require.True(t, j.ExpiresAt.Equal(got.ExpiresAt), "stored as answered")
		return got
	}
	at := now.Add(90 * time.Minute).Add(1500 * time.Microsecond)
	require.True(t, core.StoreTime(at).Equal(push(core.PushParams{Topic: "t", ExpiresAt: &at}).ExpiresAt), "expires_at, at store precision")
	require.True(t, now.Add(time.Hour+time.Minute).Equal(push(core.PushParams{Topic: "t", Delay: dur(time.Hour), ExpiresIn: dur(time.Minute)}).ExpiresAt),
		"expires_in counts from run_at")
	require.True(t, push(core.PushParams{Topic: "t"}).ExpiresAt.IsZero(), "no expiry without one")

	require.NoError(t, b.engine.PutTopic(ctx, &core.Topic{Name: "t", ExpiresIn: 10 * time.Minute}))
	require.True(t, now.Add(15*time.Minute).Equal(push(core.PushParams{Topic: "t", Delay: dur(5 * time.Minute)}).ExpiresAt),
		"the topic's expires_in counts from run_at")
	require.True(t, now.Add(time.Minute).Equal(push(core.PushParams{Topic: "t", ExpiresIn: dur(time.Minute)}).ExpiresAt),
		"the job's own expiry wins")
	topic, err := b.engine.GetTopic(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, topic.ExpiresIn)
}

// TestClaimEndsExpiredJobs: a claimed job whose expiry has come is not
// handed out but buried with last_error "expired" (its on_dead notice
// says so); a claim that took only expired jobs goes on waiting for a
// live one.
func TestClaimEndsExpiredJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := b.engine
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "orders", OnDead: "orders.dead"}))
	short, err := e.Push(ctx, &core.PushParams{Topic: "orders", ExpiresIn: dur(time.Minute), Priority: -1})
	require.NoError(t, err)
	long, err := e.Push(ctx, &core.PushParams{Topic: "orders", ExpiresIn: dur(time.Hour)})
	require.NoError(t, err)
	b.clock.Advance(time.Minute)

	got, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "orders", Max: 10, Via: core.ViaPull})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, long.ID, got[0].ID, "the job not expired yet")
	dead, err := e.Get(ctx, short.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDead, dead.State)
	require.Equal(t, core.JobExpired, dead.LastError)
	require.Zero(t, dead.Attempt, "ended without a delivery: no attempt spent")
	require.NotEmpty(t, dead.History)
	require.Equal(t, core.OutcomeReleased, dead.History[len(dead.History)-1].Outcome, "the claim's lease ended, its attempt given back")
	listed, err := e.ListDead(ctx, &core.ListDeadJobsParams{Topic: "orders", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, core.JobExpired, listed[0].LastError)

	e.FollowDeaths(ctx)
	notices, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "orders.dead", Max: 10})
	require.NoError(t, err)
	require.Len(t, notices, 1)
	var n core.DeadNotice
	require.NoError(t, json.Unmarshal(notices[0].Body, &n))
	require.Equal(t, short.ID, n.Job.ID)
	require.Equal(t, core.JobExpired, n.Job.LastError)

	// A claim that meets only an expired job waits on for a live one.
	gone, err := e.Push(ctx, &core.PushParams{Topic: "later", ExpiresIn: dur(time.Second)})
	require.NoError(t, err)
	b.clock.Advance(time.Second)
	claimed := make(chan []*core.Job, 1)
	go func() {
		jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "later", Max: 1, Wait: time.Minute})
		if err != nil {
			jobs = nil
		}
		claimed <- jobs
	}()
	require.Eventually(t, func() bool {
		j, err := e.Get(ctx, gone.ID)
		return err == nil && j.State == core.StateDead
	}, 5*time.Second, time.Millisecond, "the expired job ended by the waiting claim")
	live, err := e.Push(ctx, &core.PushParams{Topic: "later"})
	require.NoError(t, err)
	jobs := <-claimed
	require.Len(t, jobs, 1)
	require.Equal(t, live.ID, jobs[0].ID)
}

// TestSweepExpired: the sweep ends the expired ready jobs of a topic
// nobody consumes (dead, last_error "expired") and leaves the others; a
// second sweep finds nothing more.
func TestSweepExpired(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := b.engine
	gone, err := e.Push(ctx, &core.PushParams{Topic: "idle", ExpiresIn: dur(time.Minute)})
	require.NoError(t, err)
	kept, err := e.Push(ctx, &core.PushParams{Topic: "idle", ExpiresIn: dur(time.Hour)})
	require.NoError(t, err)
	plain, err := e.Push(ctx, &core.PushParams{Topic: "other"})
	require.NoError(t, err)
	require.Zero(t, e.SweepExpired(ctx), "nothing expired yet")
	b.clock.Advance(time.Minute)

	require.Equal(t, 1, e.SweepExpired(ctx))
	dead, err := e.Get(ctx, gone.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDead, dead.State)
	require.Equal(t, core.JobExpired, dead.LastError)
	for _, id := range []string{kept.ID, plain.ID} {
		j, err := e.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, core.StateReady, j.State)
	}
	require.Zero(t, e.SweepExpired(ctx))
}

// topicLists counts the ListJobs calls per topic of the store it wraps.
type topicLists struct {
	core.Store
	mu    sync.Mutex
	lists map[string]int
}

func (s *topicLists) ListJobs(ctx context.Context, p *core.ListJobsParams) (core.JobPage, error) {
	s.mu.Lock()
	s.lists[p.Topic]++
	s.mu.Unlock()
	return s.Store.ListJobs(ctx, p)
}

// TestSweepReadsOnlyExpiringTopics: the sweep reads no job of a topic
// whose jobs cannot expire (a backlog it read 10 000 jobs of every 30 s),
// and still ends the jobs of a topic given one with its own expiry (the
// push recorded the topic first) and of a topic whose configuration
// gives them one.
func TestSweepReadsOnlyExpiringTopics(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = mem.Close() })
	store := &topicLists{Store: mem, lists: map[string]int{}}
	ctx := context.Background()
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock})
	require.NoError(t, err)
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "configured", ExpiresIn: time.Minute}))
	var pushed []string
	for _, p := range []core.PushParams{
		{Topic: "backlog"}, {Topic: "backlog"},
		{Topic: "own", ExpiresIn: dur(time.Minute)}, {Topic: "own"},
		{Topic: "configured"},
	} {
		j, err := e.Push(ctx, &p)
		require.NoError(t, err)
		pushed = append(pushed, j.ID)
	}
	recs, err := mem.ListRecords(ctx, core.KindExpiring)
	require.NoError(t, err)
	require.Len(t, recs, 1, "only the topic without ExpiresIn is recorded")
	require.Equal(t, "own", recs[0].Name)

	clock.Advance(time.Minute)
	require.Equal(t, 2, e.SweepExpired(ctx))
	require.Zero(t, store.lists["backlog"], "no job of a topic that cannot expire is read")
	require.NotZero(t, store.lists["own"])
	require.NotZero(t, store.lists["configured"])
	for i, want := range []core.State{core.StateReady, core.StateReady, core.StateDead, core.StateReady, core.StateDead} {
		j, err := e.Get(ctx, pushed[i])
		require.NoError(t, err)
		require.Equal(t, want, j.State, pushed[i])
	}
}
