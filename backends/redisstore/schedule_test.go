package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// behindClock is the real clock set back by a fixed offset: an instance
// whose host's clock is late.
type behindClock struct {
	core.Clock
	by time.Duration
}

func (c behindClock) Now() time.Time { return c.Clock.Now().Add(-c.by) }

// TestSchedulesThreeInstances runs three engines on one Redis (a standalone
// server and a Cluster), one of them with its clock 3 s behind the others,
// on a schedule of a slot per second: every slot from the first to the
// last gets one job, with the slot's id and run_at.
func TestSchedulesThreeInstances(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(testing.TB) string{"Standalone": standaloneURL, "Cluster": clusterURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			prefix := uniquePrefix(t.Name())
			var engines []*core.Engine
			for i := range 3 {
				clock := core.RealClock()
				if i == 2 {
					clock = behindClock{Clock: clock, by: 3 * time.Second}
				}
				s := openStore(t, url(t), prefix, func(c *Config) { c.Clock = clock })
				e, err := core.NewEngine(core.EngineConfig{Store: s, Clock: clock, TopicRefresh: 250 * time.Millisecond})
				require.NoError(t, err)
				require.NoError(t, e.Start(ctx))
				t.Cleanup(func() { _ = e.Stop(context.Background()) })
				engines = append(engines, e)
			}
			const sched, topic = "every-second", "ticks"
			put, err := engines[0].PutSchedule(ctx, &core.Schedule{Name: sched, Cron: "* * * * * *", Topic: topic})
			require.NoError(t, err)
			const slots = 6
			seen := map[time.Time]string{}
			deadline := time.Now().Add(30 * time.Second)
			for len(seen) < slots+3 && time.Now().Before(deadline) {
				jobs, err := engines[0].Claim(ctx, &core.ClaimJobsParams{Topic: topic, Max: 100, Wait: 2 * time.Second})
				require.NoError(t, err)
				for _, j := range jobs {
					_, dup := seen[j.RunAt]
					require.False(t, dup, "slot %s fired twice", j.RunAt)
					seen[j.RunAt] = j.ID
					require.Equal(t, core.ScheduleID(sched, j.RunAt), j.ID)
					require.NoError(t, engines[1].Ack(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease}))
				}
			}
			require.GreaterOrEqual(t, len(seen), slots+3, "slots fired")
			var first, last time.Time
			for at := range seen {
				if first.IsZero() || at.Before(first) {
					first = at
				}
				if at.After(last) {
					last = at
				}
				require.True(t, at.After(put.UpdatedAt), "slot %s before the put", at)
			}
			for at := first; !at.After(last); at = at.Add(time.Second) {
				require.Contains(t, seen, at, "every slot from %s to %s fires", first, last)
			}
		})
	}
}
