package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

func TestTrimHistory(t *testing.T) {
	t.Parallel()
	var small []core.Attempt
	for k := 1; k <= core.HistoryMax+10; k++ {
		small = append(small, core.Attempt{Attempt: k})
	}
	got := core.TrimHistory(small)
	require.Len(t, got, core.HistoryMax)
	require.Equal(t, 11, got[0].Attempt, "the oldest dropped")

	long := strings.Repeat("x", core.MaxErrorLen)
	var big []core.Attempt
	for k := 1; k <= 10; k++ {
		big = append(big, core.Attempt{Attempt: k, Error: long, Instance: "host", Consumer: "10.0.0.1:1"})
	}
	per := core.AttemptSize(&big[0])
	require.Equal(t, 32+core.MaxErrorLen+len("host")+len("10.0.0.1:1"), per)
	got = core.TrimHistory(big)
	require.Len(t, got, core.HistoryMaxBytes/per)
	require.Equal(t, 10, got[len(got)-1].Attempt, "the newest kept")
}

func TestTrail(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return at.Add(time.Duration(n) * time.Second) }
	j := &core.Job{
		State: core.StateCancelled, UpdatedAt: sec(9), LastError: "boom",
		Changes: []core.Change{
			{At: sec(0), Kind: core.ChangeCreated, Via: core.OriginHTTP, Token: "team-a"},
			{At: sec(5), Kind: core.ChangeRequeued},
		},
		History: []core.Attempt{
			{Attempt: 1, StartedAt: sec(1), EndedAt: sec(2), Via: core.ViaPull, Instance: "host-a", Consumer: "10.0.0.1:1",
				Outcome: core.OutcomeBuried, Error: "boom"},
			{Attempt: 1, StartedAt: sec(6), EndedAt: sec(9), Via: core.ViaWebSocket, Outcome: core.OutcomeCancelled},
		},
	}
	require.Equal(t, []core.TrailEntry{
		{At: sec(0), Event: core.TrailCreated, Via: core.OriginHTTP, Token: "team-a"},
		{At: sec(1), Event: core.TrailDelivered, Via: core.ViaPull, Instance: "host-a", Consumer: "10.0.0.1:1", Attempt: 1,
			Outcome: core.OutcomeBuried, EndedAt: sec(2), Error: "boom"},
		{At: sec(5), Event: core.TrailRequeued},
		{At: sec(6), Event: core.TrailDelivered, Via: core.ViaWebSocket, Attempt: 1, Outcome: core.OutcomeCancelled, EndedAt: sec(9)},
		{At: sec(9), Event: core.TrailCancelled},
	}, core.Trail(j))

	expired := &core.Job{State: core.StateDead, LastError: core.JobExpired, UpdatedAt: sec(3),
		Changes: []core.Change{{At: sec(0), Kind: core.ChangeCreated, Via: core.OriginSchedule}}}
	require.Equal(t, []core.TrailEntry{
		{At: sec(0), Event: core.TrailCreated, Via: core.OriginSchedule},
		{At: sec(3), Event: core.TrailExpired},
	}, core.Trail(expired))

	long := &core.Job{State: core.StateReady}
	for k := range core.ChangesMax {
		long.Changes = append(long.Changes, core.Change{At: sec(k), Kind: core.ChangeReplaced})
	}
	for k := range core.HistoryMax {
		long.History = append(long.History, core.Attempt{Attempt: k + 1, StartedAt: sec(100 + k), Outcome: core.OutcomeRetried})
	}
	trail := core.Trail(long)
	require.Len(t, trail, core.TrailMax)
	require.Equal(t, core.TrailDelivered, trail[0].Event, "the oldest entries dropped: the changes")
	require.Equal(t, core.HistoryMax, trail[len(trail)-1].Attempt)
}

func TestAppendChange(t *testing.T) {
	t.Parallel()
	var c []core.Change
	for k := range core.ChangesMax + 3 {
		before := c
		c = core.AppendChange(c, core.Change{Kind: core.ChangeReplaced, Token: string(rune('a' + k))})
		require.Len(t, before, min(k, core.ChangesMax), "the changes given are not changed")
	}
	require.Len(t, c, core.ChangesMax)
	require.Equal(t, "d", c[0].Token)
}

func TestCleanName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "10.0.0.1:5555", core.CleanName("10.0.0.1:5555"))
	require.Equal(t, "a_b_c_d_e", core.CleanName("a,b/c|d\ne"))
	require.Len(t, core.CleanName(strings.Repeat("é", 40)), core.NameMaxLen, "cut on a rune boundary")
}

// TestTrailOfEngine: a push keeps how it came and the token, a claim the
// engine's instance and the consumer's address, and Import gives a job
// without changes one by import.
func TestTrailOfEngine(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { _ = store.Close() })
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: clock, Instance: "host/1"})
	require.NoError(t, err)
	ctx := context.Background()

	res, err := e.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{{Topic: "t", ID: "j1"}}, Via: core.OriginGRPC, Token: "ops,1"})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1, Via: core.ViaPull, Consumer: "10.0.0.1:40000"})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.NoError(t, e.Ack(ctx, &core.AckJobParams{ID: "j1", Lease: jobs[0].Lease}))
	j, err := e.Get(ctx, "j1")
	require.NoError(t, err)
	now := clock.Now().UTC()
	require.Equal(t, []core.TrailEntry{
		{At: now, Event: core.TrailCreated, Via: core.OriginGRPC, Token: "ops_1"},
		{At: now, Event: core.TrailDelivered, Via: core.ViaPull, Instance: "host_1", Consumer: "10.0.0.1:40000", Attempt: 1,
			Outcome: core.OutcomeAcked, EndedAt: now},
	}, core.Trail(j))

	id := core.NewID()
	imp, err := e.Import(ctx, []*core.Job{{ID: id, Topic: "t", RunAt: now, TTR: time.Minute, MaxAttempts: 1,
		State: core.StateReady, CreatedAt: now.Add(-time.Hour)}})
	require.NoError(t, err)
	require.NoError(t, imp[0].Err)
	require.True(t, imp[0].Imported)
	j, err = e.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, []core.Change{{At: now.Add(-time.Hour), Kind: core.ChangeCreated, Via: core.OriginImport}}, j.Changes)
	dead, err := e.Import(ctx, []*core.Job{{ID: core.NewID(), Topic: "t", RunAt: now, TTR: time.Minute, MaxAttempts: 1,
		State: core.StateReady, Changes: []core.Change{{At: now, Kind: "moved"}}}})
	require.NoError(t, err)
	require.ErrorIs(t, dead[0].Err, core.ErrInvalidArgument, "an unknown kind of change")
}
