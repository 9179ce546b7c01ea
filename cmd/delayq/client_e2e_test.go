package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/client"
)

// newClient returns a client of the service at url, closed at the end of
// the test.
func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// requireAPIError requires err to match sentinel and to be an *APIError
// with the status, and returns it.
func requireAPIError(t *testing.T, err error, sentinel error, status int) *client.APIError {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	ae, ok := errors.AsType[*client.APIError](err)
	require.True(t, ok, "%T is not an *APIError: %v", err, err)
	require.Equal(t, status, ae.StatusCode, "%v", err)
	return ae
}

// runSubscriber runs c.Subscribe in the background and returns a function
// that stops it and returns its result; the test's cleanup stops it too.
func runSubscriber(t *testing.T, c *client.Client, topic string, p *client.SubscribeParams) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Subscribe(ctx, topic, p) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(20 * time.Second):
				result = errors.New("Subscribe did not return within 20s of its ctx ending")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitJob polls job id until cond holds, and returns it.
func waitJob(t *testing.T, c *client.Client, id string, cond func(*client.Job) bool) *client.Job {
	t.Helper()
	var j *client.Job
	require.Eventually(t, func() bool {
		var err error
		j, err = c.Get(t.Context(), id)
		require.NoError(t, err)
		return cond(j)
	}, 20*time.Second, 20*time.Millisecond, "job %s: %+v", id, j)
	return j
}

// inState is a waitJob condition: the job is in state.
func inState(state string) func(*client.Job) bool {
	return func(j *client.Job) bool { return j.State == state }
}

// TestClientE2E runs the Go client (module github.com/delayq/delayq/client)
// against a real `delayq serve`: every call, its typed errors, and the
// WebSocket subscriber.
func TestClientE2E(t *testing.T) {
	t.Parallel()
	srv := startServer(t, defaultArgs(t.TempDir())...)
	dq := newClient(t, client.Config{URL: srv.HTTPURL})

	t.Run("PushAndGet", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		body := json.RawMessage(`{ "order" : 42, "html": "<b>" }`)
		before := time.Now()
		pushed, err := dq.Push(ctx, &client.PushParams{
			Topic: "c.push", Body: body, Delay: time.Hour, ID: "c-push-1", Key: "order-42",
			TTR: 45 * time.Second, MaxAttempts: 3, Priority: -3, BackoffDelays: []time.Duration{time.Minute, 3 * time.Minute},
		})
		require.NoError(t, err)
		require.Equal(t, "c-push-1", pushed.ID)
		require.Equal(t, "c.push", pushed.Topic)
		require.Equal(t, client.StateScheduled, pushed.State)
		require.False(t, pushed.Replaced)
		require.WithinDuration(t, before.Add(time.Hour), pushed.RunAt, 5*time.Second)

		j, err := dq.Get(ctx, "c-push-1")
		require.NoError(t, err)
		require.Equal(t, string(body), string(j.Body), "the body is kept byte for byte")
		require.Equal(t, "order-42", j.Key)
		require.Equal(t, 45*time.Second, j.TTR)
		require.Equal(t, 3, j.MaxAttempts)
		require.Equal(t, -3, j.Priority)
		require.Equal(t, []time.Duration{time.Minute, 3 * time.Minute}, j.BackoffDelays)
		require.Equal(t, client.StateScheduled, j.State)
		require.True(t, j.RunAt.Equal(pushed.RunAt))

		// Any other body is marshalled; run_at in the past is due now.
		pushed, err = dq.Push(ctx, &client.PushParams{Topic: "c.push", Body: map[string]any{"n": 1}, RunAt: time.Now().Add(-time.Minute)})
		require.NoError(t, err)
		require.Equal(t, client.StateReady, pushed.State)
		require.Len(t, pushed.ID, 26, "a ULID")
		j, err = dq.Get(ctx, pushed.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"n": 1}`, string(j.Body))

		// 409 with the job that has the id.
		_, err = dq.Push(ctx, &client.PushParams{Topic: "c.push", ID: "c-push-1"})
		ae := requireAPIError(t, err, client.ErrConflict, 409)
		require.NotErrorIs(t, err, client.ErrLeaseLost)
		require.NotNil(t, ae.Job)
		require.Equal(t, "c-push-1", ae.Job.ID)
		require.Equal(t, "order-42", ae.Job.Key)

		// 400 with the field.
		_, err = dq.Push(ctx, &client.PushParams{Topic: "c.push", MaxAttempts: 2000})
		ae = requireAPIError(t, err, client.ErrInvalidArgument, 400)
		require.Equal(t, "max_attempts", ae.Field)
		_, err = dq.Push(ctx, &client.PushParams{Topic: "c.push", Delay: -time.Second})
		require.Equal(t, "delay", requireAPIError(t, err, client.ErrInvalidArgument, 400).Field)

		// 404.
		_, err = dq.Get(ctx, "c-no-such-job")
		requireAPIError(t, err, client.ErrNotFound, 404)
	})

	t.Run("PushBatch", func(t *testing.T) {
		t.Parallel()
		results, err := dq.PushBatch(t.Context(), []*client.PushParams{
			{Topic: "c.batch", ID: "c-batch-1", Delay: time.Hour},
			{Topic: "c.batch", Body: json.RawMessage(`[1, 2]`)},
			{Topic: "c.batch", ID: "c-batch-1"},
			{Topic: "bad..topic"},
		})
		require.NoError(t, err)
		require.Len(t, results, 4)
		require.NoError(t, results[0].Err)
		require.Equal(t, "c-batch-1", results[0].Pushed.ID)
		require.NoError(t, results[1].Err)
		require.Equal(t, client.StateReady, results[1].Pushed.State)
		require.ErrorIs(t, results[2].Err, client.ErrConflict)
		ae, ok := errors.AsType[*client.APIError](results[2].Err)
		require.True(t, ok)
		require.NotNil(t, ae.Job, "the conflicting job comes with the item's error")
		require.Equal(t, "c-batch-1", ae.Job.ID)
		require.ErrorIs(t, results[3].Err, client.ErrInvalidArgument)
		require.Nil(t, results[3].Pushed)

		_, err = dq.PushBatch(t.Context(), nil)
		require.ErrorIs(t, err, client.ErrInvalidArgument)
	})

	t.Run("KeysAndCancel", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		for _, id := range []string{"c-key-a", "c-key-b"} {
			_, err := dq.Push(ctx, &client.PushParams{Topic: "c.keys", ID: id, Key: "kk", Delay: time.Hour})
			require.NoError(t, err)
		}
		_, err := dq.Push(ctx, &client.PushParams{Topic: "c.keys", ID: "c-key-c", Key: "kk", TTR: time.Hour})
		require.NoError(t, err)
		_, err = dq.Push(ctx, &client.PushParams{Topic: "c.keys", ID: "c-key-other", Key: "other", Delay: time.Hour})
		require.NoError(t, err)

		page, err := dq.FindByKey(ctx, &client.FindByKeyParams{Topic: "c.keys", Key: "kk", Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []string{"c-key-a", "c-key-b"}, jobIDs(page.Jobs))
		require.Equal(t, "c-key-b", page.NextAfter)
		page, err = dq.FindByKey(ctx, &client.FindByKeyParams{Topic: "c.keys", Key: "kk", Limit: 2, After: page.NextAfter})
		require.NoError(t, err)
		require.Equal(t, []string{"c-key-c"}, jobIDs(page.Jobs))
		require.Empty(t, page.NextAfter)
		_, err = dq.FindByKey(ctx, &client.FindByKeyParams{Topic: "c.keys"})
		require.Equal(t, "key", requireAPIError(t, err, client.ErrInvalidArgument, 400).Field)

		require.NoError(t, dq.Cancel(ctx, "c-key-a"))
		requireAPIError(t, dq.Cancel(ctx, "c-key-a"), client.ErrNotFound, 404)

		// c is held by a consumer: cancel conflicts, cancel by key leaves it.
		ds, err := dq.Claim(ctx, "c.keys", &client.ClaimParams{Max: 5, Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.Equal(t, "c-key-c", ds[0].ID)
		requireAPIError(t, dq.Cancel(ctx, "c-key-c"), client.ErrConflict, 409)
		cancelled, err := dq.CancelByKey(ctx, "c.keys", "kk")
		require.NoError(t, err)
		require.Equal(t, []string{"c-key-b"}, cancelled.Cancelled)
		require.Equal(t, []string{"c-key-c"}, cancelled.Reserved)
		// CancelRunning ends its delivery: the consumer's ack is refused.
		require.NoError(t, dq.CancelRunning(ctx, "c-key-c"))
		requireAPIError(t, dq.Ack(ctx, ds[0].ID, ds[0].Lease), client.ErrLeaseLost, 409)
		cancelled, err = dq.CancelByKey(ctx, "c.keys", "kk")
		require.NoError(t, err)
		require.Empty(t, cancelled.Cancelled)
		require.Empty(t, cancelled.Reserved)

		j, err := dq.Get(ctx, "c-key-other")
		require.NoError(t, err)
		require.Equal(t, client.StateScheduled, j.State, "another key's job is left")
	})

	t.Run("Replace", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pushed, err := dq.Replace(ctx, &client.PushParams{Topic: "c.replace", ID: "c-replace-1", Delay: time.Hour, Body: 1})
		require.NoError(t, err)
		require.False(t, pushed.Replaced, "created")
		pushed, err = dq.Replace(ctx, &client.PushParams{Topic: "c.replace", ID: "c-replace-1", Body: 2, TTR: time.Hour})
		require.NoError(t, err)
		require.True(t, pushed.Replaced)
		require.Equal(t, client.StateReady, pushed.State)
		j, err := dq.Get(ctx, "c-replace-1")
		require.NoError(t, err)
		require.Equal(t, "2", string(j.Body))

		ds, err := dq.Claim(ctx, "c.replace", &client.ClaimParams{Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		_, err = dq.Replace(ctx, &client.PushParams{Topic: "c.replace", ID: "c-replace-1"})
		requireAPIError(t, err, client.ErrConflict, 409)
		require.NoError(t, dq.Ack(ctx, ds[0].ID, ds[0].Lease))

		_, err = dq.Replace(ctx, &client.PushParams{Topic: "c.replace"})
		require.ErrorIs(t, err, client.ErrInvalidArgument, "Replace needs an id")

		// A topic with unique keys replaces by key on push.
		_, err = dq.PutTopic(ctx, "c.unique", &client.TopicConfig{UniqueKeys: "replace"})
		require.NoError(t, err)
		first, err := dq.Push(ctx, &client.PushParams{Topic: "c.unique", Key: "order-7", Delay: time.Hour})
		require.NoError(t, err)
		require.False(t, first.Replaced)
		second, err := dq.Push(ctx, &client.PushParams{Topic: "c.unique", Key: "order-7", Delay: 2 * time.Hour})
		require.NoError(t, err)
		require.True(t, second.Replaced)
		require.Equal(t, first.ID, second.ID)
	})

	t.Run("ClaimAckNackTouch", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		_, err := dq.Push(ctx, &client.PushParams{Topic: "c.pull", ID: "c-pull-1", Body: json.RawMessage(`"x"`), TTR: 5 * time.Second, Delay: 200 * time.Millisecond})
		require.NoError(t, err)
		ds, err := dq.Claim(ctx, "c.pull", &client.ClaimParams{Max: 10, Wait: 10 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		d := ds[0]
		require.Equal(t, "c-pull-1", d.ID)
		require.Equal(t, "c.pull", d.Topic)
		require.Equal(t, `"x"`, string(d.Body))
		require.Equal(t, 1, d.Attempt)
		require.NotEmpty(t, d.Lease)
		require.False(t, d.LeaseExpiresAt.IsZero())

		expires, err := dq.Touch(ctx, d.ID, d.Lease)
		require.NoError(t, err)
		require.False(t, expires.Before(d.LeaseExpiresAt))
		require.NoError(t, dq.Ack(ctx, d.ID, d.Lease))
		err = dq.Ack(ctx, d.ID, d.Lease)
		requireAPIError(t, err, client.ErrLeaseLost, 409)
		require.ErrorIs(t, err, client.ErrConflict)
		_, err = dq.Touch(ctx, d.ID, d.Lease)
		require.ErrorIs(t, err, client.ErrLeaseLost)
		requireAPIError(t, dq.Ack(ctx, "c-no-such-job", "lease"), client.ErrNotFound, 404)

		// A nack with a delay of 0 and an error: retried at once, the error kept.
		_, err = dq.Push(ctx, &client.PushParams{Topic: "c.pull", ID: "c-pull-2", TTR: 5 * time.Second})
		require.NoError(t, err)
		ds, err = dq.Claim(ctx, "c.pull", &client.ClaimParams{Wait: 10 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		zero := time.Duration(0)
		require.NoError(t, dq.Nack(ctx, ds[0].ID, ds[0].Lease, &client.NackParams{Delay: &zero, Error: "printer on fire"}))
		require.ErrorIs(t, dq.Nack(ctx, ds[0].ID, ds[0].Lease, nil), client.ErrLeaseLost)
		ds, err = dq.Claim(ctx, "c.pull", &client.ClaimParams{Wait: 10 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.Equal(t, 2, ds[0].Attempt)
		j, err := dq.Get(ctx, "c-pull-2")
		require.NoError(t, err)
		require.Equal(t, "printer on fire", j.LastError)
		require.Equal(t, client.StateReserved, j.State)
		require.NoError(t, dq.Ack(ctx, ds[0].ID, ds[0].Lease))

		// Nothing due: no deliveries, no error.
		ds, err = dq.Claim(ctx, "c.pull", nil)
		require.NoError(t, err)
		require.Empty(t, ds)
	})

	t.Run("AckAndNackBatches", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		for range 5 {
			_, err := dq.Push(ctx, &client.PushParams{Topic: "c.settle", TTR: time.Hour})
			require.NoError(t, err)
		}
		ds, err := dq.Claim(ctx, "c.settle", &client.ClaimParams{Max: 5, Wait: 10 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 5)

		results, err := dq.AckBatch(ctx, []client.AckItem{
			{ID: ds[0].ID, Lease: ds[0].Lease}, {ID: ds[1].ID, Lease: ds[1].Lease},
			{ID: ds[1].ID, Lease: ds[1].Lease}, {ID: "c-no-such-job", Lease: "x"},
		})
		require.NoError(t, err)
		require.Len(t, results, 4)
		require.NoError(t, results[0].Err)
		require.Equal(t, ds[0].ID, results[0].ID)
		require.NoError(t, results[1].Err)
		require.ErrorIs(t, results[2].Err, client.ErrLeaseLost, "the same delivery twice")
		require.ErrorIs(t, results[3].Err, client.ErrNotFound)
		require.Equal(t, "c-no-such-job", results[3].ID)

		hour := time.Hour
		results, err = dq.NackBatch(ctx, []client.NackItem{
			{ID: ds[2].ID, Lease: ds[2].Lease, NackParams: client.NackParams{Delay: &hour, Error: "later"}},
			{ID: ds[3].ID, Lease: ds[3].Lease},
			{ID: ds[4].ID, Lease: ""},
		})
		require.NoError(t, err)
		require.Len(t, results, 3)
		require.NoError(t, results[0].Err)
		require.NoError(t, results[1].Err)
		require.ErrorIs(t, results[2].Err, client.ErrInvalidArgument)
		j, err := dq.Get(ctx, ds[2].ID)
		require.NoError(t, err)
		require.Equal(t, client.StateScheduled, j.State)
		require.Equal(t, "later", j.LastError)
		require.NoError(t, dq.Ack(ctx, ds[4].ID, ds[4].Lease))

		_, err = dq.AckBatch(ctx, nil)
		require.ErrorIs(t, err, client.ErrInvalidArgument)
	})

	t.Run("DeadAndRequeue", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		_, err := dq.Push(ctx, &client.PushParams{Topic: "c.dead", ID: "c-dead-1", MaxAttempts: 1})
		require.NoError(t, err)
		ds, err := dq.Claim(ctx, "c.dead", &client.ClaimParams{Wait: 10 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		requireAPIError(t, dq.Requeue(ctx, "c-dead-1"), client.ErrConflict, 409)
		require.NoError(t, dq.Nack(ctx, ds[0].ID, ds[0].Lease, &client.NackParams{Error: "gave up"}))

		dead, err := dq.ListDead(ctx, "c.dead", 10)
		require.NoError(t, err)
		require.Equal(t, []string{"c-dead-1"}, jobIDs(dead))
		require.Equal(t, "gave up", dead[0].LastError)
		require.Equal(t, client.StateDead, dead[0].State)

		require.NoError(t, dq.Requeue(ctx, "c-dead-1"))
		j, err := dq.Get(ctx, "c-dead-1")
		require.NoError(t, err)
		require.Equal(t, client.StateReady, j.State)
		require.Equal(t, 0, j.Attempt)
		requireAPIError(t, dq.Requeue(ctx, "c-no-such-job"), client.ErrNotFound, 404)
		_, err = dq.ListDead(ctx, "c.dead", 5000)
		require.ErrorIs(t, err, client.ErrInvalidArgument)
	})

	t.Run("Topics", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		cfg := &client.TopicConfig{
			Delivery: client.DeliveryConfig{Type: "consumer"}, TTR: 20 * time.Second, MaxAttempts: 4,
			Backoff: client.BackoffConfig{Delays: []time.Duration{time.Second, 2 * time.Minute}}, Concurrency: 3,
			Retention: 36 * time.Hour,
			Events:    client.EventsConfig{Topic: "c.topic.audit", On: []string{"done", "dead"}},
		}
		topic, err := dq.PutTopic(ctx, "c.topic", cfg)
		require.NoError(t, err)
		require.Equal(t, "c.topic", topic.Name)
		require.Equal(t, "consumer", topic.Delivery.Type)
		require.Equal(t, 20*time.Second, topic.TTR)
		require.Equal(t, 4, topic.MaxAttempts)
		require.Equal(t, []time.Duration{time.Second, 2 * time.Minute}, topic.Backoff.Delays)
		require.Equal(t, 3, topic.Concurrency)
		require.Equal(t, 36*time.Hour, topic.Retention)
		require.Equal(t, cfg.Events, topic.Events)
		require.True(t, topic.Configured)
		require.False(t, topic.Paused)

		pushed, err := dq.Push(ctx, &client.PushParams{Topic: "c.topic", Delay: time.Hour})
		require.NoError(t, err)
		job, err := dq.Get(ctx, pushed.ID)
		require.NoError(t, err)
		require.Equal(t, 36*time.Hour, job.Retention, "the topic's retention goes with its jobs")
		got, err := dq.GetTopic(ctx, "c.topic")
		require.NoError(t, err)
		require.Equal(t, int64(1), got.Counts.Scheduled)
		require.Equal(t, topic.TTR, got.TTR)

		topics, err := dq.ListTopics(ctx)
		require.NoError(t, err)
		names := make([]string, len(topics))
		for i, tp := range topics {
			names[i] = tp.Name
		}
		require.Contains(t, names, "c.topic")
		require.True(t, slices.IsSorted(names))

		paused, err := dq.PauseTopic(ctx, "c.topic")
		require.NoError(t, err)
		require.True(t, paused.Paused)
		resumed, err := dq.ResumeTopic(ctx, "c.topic")
		require.NoError(t, err)
		require.False(t, resumed.Paused)

		require.NoError(t, dq.DeleteTopic(ctx, "c.topic"))
		requireAPIError(t, dq.DeleteTopic(ctx, "c.topic"), client.ErrNotFound, 404)
		got, err = dq.GetTopic(ctx, "c.topic")
		require.NoError(t, err, "it has a job still")
		require.False(t, got.Configured)
		_, err = dq.GetTopic(ctx, "c.no-such-topic")
		requireAPIError(t, err, client.ErrNotFound, 404)

		_, err = dq.PutTopic(ctx, "c.topic.bad", &client.TopicConfig{Delivery: client.DeliveryConfig{Type: "webhook"}})
		ae := requireAPIError(t, err, client.ErrInvalidArgument, 400)
		require.Equal(t, "delivery.url", ae.Field)
		_, err = dq.PutTopic(ctx, "c.topic.bad", &client.TopicConfig{TTR: 24 * time.Hour})
		require.Equal(t, "ttr", requireAPIError(t, err, client.ErrInvalidArgument, 400).Field)
		_, err = dq.PutTopic(ctx, "c.topic.bad", &client.TopicConfig{Events: client.EventsConfig{On: []string{"done"}}})
		require.Equal(t, "events.topic", requireAPIError(t, err, client.ErrInvalidArgument, 400).Field)
	})

	t.Run("WebhookOptionsAndRate", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		topic, err := dq.PutTopic(ctx, "c.hook", &client.TopicConfig{
			Delivery: client.DeliveryConfig{Type: "webhook", URL: "http://127.0.0.1:9/hook", Secret: "s1", PreviousSecret: "s0", AllowJobURL: true},
			Rate:     client.RateConfig{Limit: 10, Burst: 2}, MaxInFlight: 3,
		})
		require.NoError(t, err)
		require.True(t, topic.Delivery.SecretSet)
		require.True(t, topic.Delivery.PreviousSecretSet)
		require.True(t, topic.Delivery.AllowJobURL)
		require.Equal(t, client.RateConfig{Limit: 10, Period: time.Second, Burst: 2}, topic.Rate)
		require.Equal(t, 3, topic.MaxInFlight)
		pushed, err := dq.Push(ctx, &client.PushParams{Topic: "c.hook", URL: "http://127.0.0.1:9/own", Delay: time.Hour})
		require.NoError(t, err)
		j, err := dq.Get(ctx, pushed.ID)
		require.NoError(t, err)
		require.Equal(t, "http://127.0.0.1:9/own", j.URL)
		_, err = dq.PutTopic(ctx, "c.hook.bad", &client.TopicConfig{Rate: client.RateConfig{Burst: 2}})
		require.Equal(t, "rate.limit", requireAPIError(t, err, client.ErrInvalidArgument, 400).Field)
	})

	t.Run("Schedules", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		start := time.Now().Add(time.Hour).Truncate(time.Minute)
		s, err := dq.PutSchedule(ctx, "c.tick", &client.ScheduleConfig{Cron: "*/10 * * * * *", TimeZone: "Europe/Paris",
			Topic: "c.ticks", Start: start, Missed: "all", MissedLimit: 3,
			Job: client.ScheduleJob{Body: map[string]int{"n": 1}, Key: "tick", TTR: 2 * time.Minute, MaxAttempts: 4, Priority: -2}})
		require.NoError(t, err)
		require.Equal(t, "c.tick", s.Name)
		require.Equal(t, 2*time.Minute, s.Job.TTR)
		require.JSONEq(t, `{"n":1}`, string(s.Job.Body.(json.RawMessage)))
		require.True(t, s.Start.Equal(start))
		require.Len(t, s.NextRuns, 3)
		require.True(t, s.NextRuns[0].Equal(start), "the first slot is start: %v", s.NextRuns)
		require.True(t, s.LastSlot.IsZero())

		got, err := dq.GetSchedule(ctx, "c.tick", 0)
		require.NoError(t, err)
		require.Empty(t, got.NextRuns)
		require.Equal(t, s.UpdatedAt, got.UpdatedAt)
		list, err := dq.ListSchedules(ctx, 1)
		require.NoError(t, err)
		require.NotEmpty(t, list)

		_, err = dq.PutSchedule(ctx, "c.bad", &client.ScheduleConfig{Cron: "@every 1ms", Topic: "c.ticks"})
		var apiErr *client.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, "cron", apiErr.Field)
		require.NoError(t, dq.DeleteSchedule(ctx, "c.tick"))
		require.ErrorIs(t, dq.DeleteSchedule(ctx, "c.tick"), client.ErrNotFound)
		_, err = dq.GetSchedule(ctx, "c.tick", -1)
		require.ErrorIs(t, err, client.ErrNotFound)
	})

	t.Run("ExportAndImport", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		for _, id := range []string{"c-exp-1", "c-exp-2"} {
			_, err := dq.Push(ctx, &client.PushParams{Topic: "c.export", ID: id, Body: json.RawMessage(`{"a": [1, 2]}`), Delay: time.Hour})
			require.NoError(t, err)
		}
		var lines [][]byte
		err := dq.Export(ctx, func(line json.RawMessage) error {
			var j client.Job
			require.NoError(t, json.Unmarshal(line, &j))
			if j.Topic == "c.export" {
				require.Equal(t, `{"a": [1, 2]}`, string(j.Body))
				require.Equal(t, client.StateScheduled, j.State)
				lines = append(lines, bytes.Clone(line))
			}
			return nil
		})
		require.NoError(t, err)
		require.Len(t, lines, 2)

		stop := errors.New("enough")
		require.ErrorIs(t, dq.Export(ctx, func(json.RawMessage) error { return stop }), stop)
		n := 0
		for _, err := range dq.ExportSeq(ctx) {
			require.NoError(t, err)
			n++
			break
		}
		require.Equal(t, 1, n)

		// The exported jobs are known (skipped), a new one is imported, a
		// bad line fails alone.
		// A Job marshals into the export form.
		var job client.Job
		require.NoError(t, json.Unmarshal(lines[0], &job))
		job.ID = "c-imp-1"
		fresh, err := json.Marshal(job)
		require.NoError(t, err)
		input := strings.Join([]string{string(lines[0]), string(lines[1]), string(fresh), `{"id": "c-imp-bad", "topic": "c.export"}`}, "\n")
		imported, err := dq.Import(ctx, strings.NewReader(input))
		require.NoError(t, err)
		require.Equal(t, 1, imported.Imported)
		require.Equal(t, 2, imported.Skipped)
		require.Equal(t, 1, imported.Failed)
		require.Len(t, imported.Errors, 1)
		require.Equal(t, 4, imported.Errors[0].Line)
		require.ErrorIs(t, imported.Errors[0].Err, client.ErrInvalidArgument)
		j, err := dq.Get(ctx, "c-imp-1")
		require.NoError(t, err)
		require.Equal(t, client.StateScheduled, j.State)
		require.JSONEq(t, `{"a": [1, 2]}`, string(j.Body), "encoding/json compacts a marshalled body")
		require.True(t, job.RunAt.Equal(j.RunAt))
	})

	t.Run("SubscribeAcksAndNacks", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		seen := make(chan string, 16)
		stop := runSubscriber(t, dq, "c.sub", &client.SubscribeParams{
			Prefetch: 4, Concurrency: 2,
			HandlerFunc: func(ctx context.Context, d *client.Delivery) error {
				seen <- d.ID
				var body struct{ Fail, Later bool }
				if err := json.Unmarshal(d.Body, &body); err != nil {
					return err
				}
				switch {
				case body.Fail:
					return errors.New("cannot close order")
				case body.Later:
					return client.RetryIn(time.Hour, errors.New("come back later"))
				}
				return nil
			},
		})
		for _, p := range []*client.PushParams{
			{Topic: "c.sub", ID: "c-sub-ok-1", Body: map[string]bool{"fail": false}},
			{Topic: "c.sub", ID: "c-sub-ok-2", Body: map[string]bool{"fail": false}},
			{Topic: "c.sub", ID: "c-sub-bad", Body: map[string]bool{"fail": true}, MaxAttempts: 1},
			{Topic: "c.sub", ID: "c-sub-later", Body: map[string]bool{"later": true}},
		} {
			_, err := dq.Push(ctx, p)
			require.NoError(t, err)
		}
		waitJob(t, dq, "c-sub-ok-1", inState(client.StateDone))
		waitJob(t, dq, "c-sub-ok-2", inState(client.StateDone))
		bad := waitJob(t, dq, "c-sub-bad", inState(client.StateDead))
		require.Equal(t, "cannot close order", bad.LastError)
		later := waitJob(t, dq, "c-sub-later", inState(client.StateScheduled))
		require.Equal(t, "come back later", later.LastError)
		require.WithinDuration(t, time.Now().Add(time.Hour), later.RunAt, time.Minute, "retried after the handler's delay")
		require.NoError(t, stop())
		close(seen)
		var ids []string
		for id := range seen {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		require.Equal(t, []string{"c-sub-bad", "c-sub-later", "c-sub-ok-1", "c-sub-ok-2"}, ids, "each delivered once")
	})

	t.Run("SubscribeRunsConcurrencyHandlersAtOnce", func(t *testing.T) {
		t.Parallel()
		const concurrency = 3
		var mu sync.Mutex
		running, most := 0, 0
		all := make(chan struct{})
		stop := runSubscriber(t, dq, "c.concurrent", &client.SubscribeParams{
			Prefetch: 8, Concurrency: concurrency,
			HandlerFunc: func(ctx context.Context, d *client.Delivery) error {
				mu.Lock()
				running++
				most = max(most, running)
				if running == concurrency {
					select {
					case <-all:
					default:
						close(all)
					}
				}
				mu.Unlock()
				defer func() {
					mu.Lock()
					running--
					mu.Unlock()
				}()
				// The first handlers wait until concurrency of them run.
				select {
				case <-all:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		})
		var ids []string
		for range 2 * concurrency {
			pushed, err := dq.Push(t.Context(), &client.PushParams{Topic: "c.concurrent"})
			require.NoError(t, err)
			ids = append(ids, pushed.ID)
		}
		for _, id := range ids {
			j := waitJob(t, dq, id, inState(client.StateDone))
			require.Equal(t, 1, j.Attempt)
		}
		require.NoError(t, stop())
		require.Equal(t, concurrency, most, "at most Concurrency handlers ran at once, and that many did")
	})

	t.Run("SubscribeKeepsTheLeaseOfASlowHandler", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		stop := runSubscriber(t, dq, "c.slow", &client.SubscribeParams{
			HandlerFunc: func(ctx context.Context, d *client.Delivery) error {
				calls.Add(1)
				// Work for three times the job's ttr.
				select {
				case <-time.After(3 * time.Second):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		})
		_, err := dq.Push(t.Context(), &client.PushParams{Topic: "c.slow", ID: "c-slow-1", TTR: time.Second})
		require.NoError(t, err)
		j := waitJob(t, dq, "c-slow-1", inState(client.StateDone))
		require.Equal(t, 1, j.Attempt, "delivered once")
		require.Empty(t, j.LastError)
		require.NoError(t, stop())
		require.Equal(t, int32(1), calls.Load())
	})

	t.Run("SubscribeKeepsTheLeasesOfDeliveriesWaitingForAHandler", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		stop := runSubscriber(t, dq, "c.queued", &client.SubscribeParams{
			Prefetch: 3, Concurrency: 1,
			HandlerFunc: func(ctx context.Context, d *client.Delivery) error {
				calls.Add(1)
				select {
				case <-time.After(1200 * time.Millisecond):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		})
		// One handler at a time: the last job waits more than twice its ttr.
		var ids []string
		for range 3 {
			pushed, err := dq.Push(t.Context(), &client.PushParams{Topic: "c.queued", TTR: time.Second})
			require.NoError(t, err)
			ids = append(ids, pushed.ID)
		}
		for _, id := range ids {
			j := waitJob(t, dq, id, inState(client.StateDone))
			require.Equal(t, 1, j.Attempt, "delivered once")
		}
		require.NoError(t, stop())
		require.Equal(t, int32(3), calls.Load())
	})

	t.Run("SubscribeStopHandsBack", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		for _, id := range []string{"c-stop-1", "c-stop-2"} {
			_, err := dq.Push(ctx, &client.PushParams{Topic: "c.stop", ID: id, TTR: time.Hour})
			require.NoError(t, err)
		}
		started := make(chan string, 2)
		stop := runSubscriber(t, dq, "c.stop", &client.SubscribeParams{
			Prefetch: 2, Concurrency: 1,
			HandlerFunc: func(ctx context.Context, d *client.Delivery) error {
				started <- d.ID
				<-ctx.Done()
				return ctx.Err()
			},
		})
		var held string
		select {
		case held = <-started:
		case <-time.After(15 * time.Second):
			t.Fatal("no delivery within 15s")
		}
		// Both were sent (prefetch 2): one runs, the other waits.
		require.Eventually(t, func() bool {
			tp, err := dq.GetTopic(ctx, "c.stop")
			require.NoError(t, err)
			return tp.Counts.Reserved == 2
		}, 10*time.Second, 20*time.Millisecond)
		require.NoError(t, stop())
		// Handed back at once, though their ttr is an hour: the one whose
		// handler ran and the one no handler took.
		for _, id := range []string{"c-stop-1", "c-stop-2"} {
			j := waitJob(t, dq, id, inState(client.StateReady))
			require.Equal(t, "subscriber disconnected", j.LastError, id)
			require.Equal(t, 1, j.Attempt, id)
		}
		require.Contains(t, []string{"c-stop-1", "c-stop-2"}, held)
		require.Len(t, started, 0, "no handler started after the stop")
	})

	t.Run("SubscribeReconnects", func(t *testing.T) {
		t.Parallel()
		proxy := startCutProxy(t, strings.TrimPrefix(srv.HTTPURL, "http://"))
		viaProxy := newClient(t, client.Config{URL: "http://" + proxy.addr()})
		r := startReconnecting(t, viaProxy, "c.reconnect", 200*time.Millisecond)
		r.pushHandled(t, dq, "c-reconnect-1")
		proxy.cut()
		r.requireLost(t)
		r.pushHandled(t, dq, "c-reconnect-2")
		require.NoError(t, r.stop())
	})

	t.Run("SubscribeRefused", func(t *testing.T) {
		t.Parallel()
		err := dq.Subscribe(t.Context(), "bad..topic", &client.SubscribeParams{
			HandlerFunc: func(context.Context, *client.Delivery) error { return nil },
		})
		requireAPIError(t, err, client.ErrInvalidArgument, 400)
		err = dq.Subscribe(t.Context(), "c.any", &client.SubscribeParams{})
		require.ErrorIs(t, err, client.ErrInvalidArgument, "no handler")
	})
}

// TestClientE2EAccess runs the client against a server with TLS and
// tokens: 401 without a token, 403 beyond a token's scope or topics, 429
// over its quota, and the subscriber over wss.
func TestClientE2EAccess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	const (
		admin   = "client-admin-secret-0123456789"
		pusher  = "client-pusher-secret-0123456789"
		limited = "client-limited-secret-0123456789"
	)
	tokens := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte(
		"- name: ops\n  token: "+admin+"\n  scopes: [admin]\n"+
			"- name: pusher\n  token: "+pusher+"\n  scopes: [push]\n  topics: [\"c.own.*\"]\n"+
			"- name: limited\n  token: "+limited+"\n  scopes: [push]\n  intake_rate: 0.01\n  intake_burst: 1\n"), 0o600))
	p := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off",
		"--tls-cert", certFile, "--tls-key", keyFile, "--tokens-file", tokens, "--max-subscribers", "1")
	base := strings.Replace(p.HTTPURL, "http://", "https://", 1)
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	as := func(token string) *client.Client {
		return newClient(t, client.Config{URL: base, Token: token, TLSConfig: tlsConfig})
	}
	ctx := t.Context()

	_, err := as("").Push(ctx, &client.PushParams{Topic: "c.own.a"})
	requireAPIError(t, err, client.ErrUnauthenticated, 401)

	_, err = as(pusher).Push(ctx, &client.PushParams{Topic: "c.own.a", ID: "c-own-1", Delay: time.Hour})
	require.NoError(t, err)
	_, err = as(pusher).Push(ctx, &client.PushParams{Topic: "c.other"})
	requireAPIError(t, err, client.ErrPermissionDenied, 403)
	// Any token reads topics (for the read-only UI), only its own.
	topics, err := as(pusher).ListTopics(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, topics)
	for _, tp := range topics {
		require.True(t, strings.HasPrefix(tp.Name, "c.own."), "topic %s of another token", tp.Name)
	}

	_, err = as(limited).Push(ctx, &client.PushParams{Topic: "c.limited"})
	require.NoError(t, err)
	_, err = as(limited).Push(ctx, &client.PushParams{Topic: "c.limited"})
	ae := requireAPIError(t, err, client.ErrRateLimited, 429)
	require.GreaterOrEqual(t, ae.RetryAfter, time.Second)

	// A client that does not trust the certificate gets no answer.
	untrusting := newClient(t, client.Config{URL: base, Token: admin})
	_, err = untrusting.Get(ctx, "c-own-1")
	require.ErrorIs(t, err, client.ErrUnavailable)
	_, ok := errors.AsType[*client.APIError](err)
	require.False(t, ok, "a transport failure is no APIError")

	// The subscriber over wss, with the token; refused for good without scope.
	err = as(pusher).Subscribe(ctx, "c.own.a", &client.SubscribeParams{
		HandlerFunc: func(context.Context, *client.Delivery) error { return nil },
	})
	requireAPIError(t, err, client.ErrPermissionDenied, 403)
	handled := make(chan string, 1)
	stop := runSubscriber(t, as(admin), "c.tls", &client.SubscribeParams{
		HandlerFunc: func(ctx context.Context, d *client.Delivery) error {
			handled <- d.ID
			return nil
		},
	})
	_, err = as(admin).Push(ctx, &client.PushParams{Topic: "c.tls", ID: "c-tls-1"})
	require.NoError(t, err)
	select {
	case id := <-handled:
		require.Equal(t, "c-tls-1", id)
	case <-time.After(15 * time.Second):
		t.Fatal("no delivery over wss within 15s")
	}
	waitJob(t, as(admin), "c-tls-1", inState(client.StateDone))

	// A second subscriber is over --max-subscribers: 503 with Retry-After,
	// which the subscriber reports and retries.
	refused := make(chan error, 1)
	stopSecond := runSubscriber(t, as(admin), "c.tls", &client.SubscribeParams{
		ErrorFunc: func(err error) {
			select {
			case refused <- err:
			default:
			}
		},
		HandlerFunc: func(context.Context, *client.Delivery) error { return nil },
	})
	select {
	case err := <-refused:
		ae := requireAPIError(t, err, client.ErrUnavailable, 503)
		require.Equal(t, time.Second, ae.RetryAfter)
	case <-time.After(15 * time.Second):
		t.Fatal("the second subscriber was not refused within 15s")
	}
	require.NoError(t, stopSecond())
	require.NoError(t, stop())
}

// reconnecting is a subscriber of one topic that reconnects quickly and
// reports the jobs it handled and the connections it lost.
type reconnecting struct {
	topic   string
	handled chan string
	lost    chan error
	stop    func() error
}

// startReconnecting runs a reconnecting subscriber of topic on c, waiting
// at most reconnectMax between attempts to connect again.
func startReconnecting(t *testing.T, c *client.Client, topic string, reconnectMax time.Duration) *reconnecting {
	t.Helper()
	r := &reconnecting{topic: topic, handled: make(chan string, 16), lost: make(chan error, 64)}
	r.stop = runSubscriber(t, c, topic, &client.SubscribeParams{
		ReconnectMin: 50 * time.Millisecond, ReconnectMax: reconnectMax,
		ErrorFunc: func(err error) {
			select {
			case r.lost <- err:
			default:
			}
		},
		HandlerFunc: func(ctx context.Context, d *client.Delivery) error {
			r.handled <- d.ID
			return nil
		},
	})
	return r
}

// pushHandled pushes job id through dq and requires the subscriber to
// handle it, and the job to be done, within 20 s.
func (r *reconnecting) pushHandled(t *testing.T, dq *client.Client, id string) {
	t.Helper()
	_, err := dq.Push(t.Context(), &client.PushParams{Topic: r.topic, ID: id})
	require.NoError(t, err)
	select {
	case got := <-r.handled:
		require.Equal(t, id, got)
	case <-time.After(20 * time.Second):
		t.Fatalf("job %s was not handled within 20s", id)
	}
	waitJob(t, dq, id, inState(client.StateDone))
}

// requireLost requires the subscriber to report a lost connection within
// 10 s.
func (r *reconnecting) requireLost(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.lost:
		require.ErrorContains(t, err, "reconnecting in")
	case <-time.After(10 * time.Second):
		t.Fatal("the lost connection was not reported within 10s")
	}
}

// jobIDs returns the ids of jobs.
func jobIDs(jobs []*client.Job) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// cutProxy forwards TCP connections to a target and can cut them all, to
// make a client's connection drop while the server runs on.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

// startCutProxy listens on a free loopback port and forwards to target
// until the end of the test.
func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

// accept forwards each connection until the listener closes.
func (p *cutProxy) accept() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = down.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, down, up)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		p.wg.Go(func() { pipe(up, down) })
		p.wg.Go(func() { pipe(down, up) })
	}
}

// cut closes every connection forwarded so far.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
