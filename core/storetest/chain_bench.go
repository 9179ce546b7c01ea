package storetest

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// ChainBurst runs a burst of n jobs through an engine over s, for the
// stores' chain benchmarks: pushed 100 a call, claimed and acknowledged
// 100 a call, each job with a next step (core.Job.Then) when then is set.
// It returns the burst (from the first push to the last ack) and, with
// steps, the time from the last ack until the engine, following the
// record of finished jobs every 50 ms, has made the last step; it fails
// tb on an error, or when the steps take more than a minute.
func ChainBurst(tb testing.TB, s core.Store, n int, then bool) (burst, steps time.Duration) {
	ctx := context.Background()
	e, err := core.NewEngine(core.EngineConfig{Store: s, TopicRefresh: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(tb, err)
	require.NoError(tb, e.Start(ctx))
	defer func() { _ = e.Stop(ctx) }()
	body := json.RawMessage(`{"order":42,"customer":"ada"}`)
	start := time.Now()
	for i := 0; i < n; i += 100 {
		batch := make([]*core.PushParams, min(100, n-i))
		for k := range batch {
			batch[k] = &core.PushParams{Topic: "chain", Body: body}
			if then {
				batch[k].Then = &core.PushParams{Topic: "chain.next", Body: body, Delay: new(time.Hour), Key: "order-42"}
			}
		}
		res, err := e.PushBatch(ctx, &core.PushBatchParams{Jobs: batch})
		require.NoError(tb, err)
		for _, r := range res {
			require.NoError(tb, r.Err)
		}
	}
	for acked := 0; acked < n; {
		jobs, err := e.Claim(ctx, &core.ClaimJobsParams{Topic: "chain", Max: 100, Wait: time.Second})
		require.NoError(tb, err)
		require.NotEmpty(tb, jobs, "%d of %d acknowledged", acked, n)
		acks := &core.AckJobsParams{}
		for _, j := range jobs {
			acks.Acks = append(acks.Acks, core.AckJobParams{ID: j.ID, Lease: j.Lease})
		}
		errs, err := e.AckBatch(ctx, acks)
		require.NoError(tb, err)
		for _, err := range errs {
			require.NoError(tb, err)
		}
		acked += len(jobs)
	}
	burst = time.Since(start)
	if !then {
		return burst, 0
	}
	lastAck := time.Now()
	for made := int64(0); made < int64(n); {
		require.Less(tb, time.Since(lastAck), time.Minute, "%d of %d steps made in a minute", made, n)
		time.Sleep(10 * time.Millisecond) // the follower runs every 50 ms; nothing tells when it made a step
		states, err := s.ListTopicStates(ctx)
		require.NoError(tb, err)
		made = 0
		for _, t := range states {
			if t.Name == "chain.next" {
				made = t.Counts.Scheduled
			}
		}
	}
	return burst, time.Since(lastAck)
}
