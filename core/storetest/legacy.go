package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// LegacySchedule returns a schedule as the release before records stored
// it, fired once: a store's migration test writes it in the store's
// earlier format and checks it with RequireScheduleMigrated. Its only
// slots are on 29 February, so that the engine the check starts, on the
// real clock, fires nothing between the migration and the read of the
// cursor.
func LegacySchedule(name string) *core.Schedule {
	now := core.StoreTime(time.Now())
	return &core.Schedule{
		Name: name, Cron: "0 0 29 2 *", TimeZone: "Europe/Paris", Topic: "reports",
		Job:       core.ScheduleJob{Body: json.RawMessage(`{"report":"daily"}`), Key: "k", TTR: 45 * time.Second, MaxAttempts: 3},
		Missed:    core.MissedAll,
		CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour),
		Cursor: now.Add(-10 * time.Minute),
	}
}

// RequireScheduleMigrated starts an engine on store, as a new release
// starts on data of the earlier one, and requires it to read want (written
// in the store's earlier format) as it was, cursor included, and the
// earlier format to hold no schedule any more; a second start moves
// nothing again.
func RequireScheduleMigrated(t *testing.T, ctx context.Context, store core.Store, want *core.Schedule) {
	t.Helper()
	e, err := core.NewEngine(core.EngineConfig{Store: store})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(context.WithoutCancel(ctx)) })
	got, err := e.GetSchedule(ctx, want.Name)
	require.NoError(t, err, "the schedule of the earlier format is read")
	requireSameSchedule(t, want, got)
	list, err := e.ListSchedules(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	legacy, ok := store.(core.LegacySchedules)
	require.True(t, ok, "the store reads the earlier format")
	old, err := legacy.LegacySchedules(ctx)
	require.NoError(t, err)
	require.Empty(t, old, "the earlier format is dropped once moved")
	n, err := core.MigrateSchedules(ctx, store)
	require.NoError(t, err)
	require.Zero(t, n)
}

func requireSameSchedule(t *testing.T, want, got *core.Schedule) {
	t.Helper()
	require.True(t, want.SameDefinition(got), "want %+v\n got %+v", want, got)
	require.True(t, want.CreatedAt.Equal(got.CreatedAt) && want.UpdatedAt.Equal(got.UpdatedAt),
		"times: want %s %s, got %s %s", want.CreatedAt, want.UpdatedAt, got.CreatedAt, got.UpdatedAt)
	require.True(t, want.Cursor.Equal(got.Cursor), "cursor: want %s, got %s", want.Cursor, got.Cursor)
}

// LegacyTopic returns a topic configuration as the release before topic
// records stored it (Configured set): a store's migration test writes it
// in the store's earlier format and checks it with RequireTopicMigrated.
func LegacyTopic(name string) *core.Topic {
	return &core.Topic{
		Name: name, TTR: 45 * time.Second, MaxAttempts: 7,
		Backoff:    core.Backoff{Initial: 2 * time.Second, Max: time.Hour, Factor: 1.5, Delays: []time.Duration{time.Minute, 0}},
		UniqueKeys: core.UniqueKeysReject, MaxInFlight: 3, OnDead: name + ".dead",
		Rate:       core.Rate{Limit: 5, Period: time.Second, Burst: 10},
		Configured: true,
	}
}

// RequireTopicMigrated starts an engine on store, as a new release starts
// on data of the earlier one, and requires it to read want (written in the
// store's earlier format) as it was, as a configured topic, and the
// earlier format to hold no configuration any more; a second start moves
// nothing again.
func RequireTopicMigrated(t *testing.T, ctx context.Context, store core.Store, want *core.Topic) {
	t.Helper()
	e, err := core.NewEngine(core.EngineConfig{Store: store})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(context.WithoutCancel(ctx)) })
	got, err := e.GetTopic(ctx, want.Name)
	require.NoError(t, err, "the topic of the earlier format is read")
	w := *want
	w.Configured = true
	require.Equal(t, &w, got)
	list, err := e.ListTopics(ctx)
	require.NoError(t, err)
	require.Equal(t, []*core.Topic{&w}, list)
	legacy, ok := store.(core.LegacyTopics)
	require.True(t, ok, "the store reads the earlier format")
	old, err := legacy.LegacyTopics(ctx)
	require.NoError(t, err)
	require.Empty(t, old, "the earlier format is dropped once moved")
	n, err := core.MigrateTopics(ctx, store)
	require.NoError(t, err)
	require.Zero(t, n)
}
