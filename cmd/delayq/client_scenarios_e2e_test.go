package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/internal/looport"
)

// TestClientScenarios runs the scenarios of clients/SCENARIOS.md, which
// every client of the repository runs, with the Go client against a real
// `delayq serve` on the local backend. S9, which restarts the server, is
// TestClientScenarioS9.
func TestClientScenarios(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--backend", "local", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-listen", "off")
	dq := newClient(t, client.Config{URL: srv.HTTPURL})

	t.Run("S1 push and pull", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p, err := dq.Push(ctx, &client.PushParams{Topic: "s1", Body: []byte(`{"order": 42}`), Key: "order-42", Priority: 3})
		require.NoError(t, err)
		ds, err := dq.Claim(ctx, "s1", &client.ClaimParams{Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		d := ds[0]
		require.Equal(t, p.ID, d.ID)
		require.Equal(t, "s1", d.Topic)
		require.Equal(t, `{"order": 42}`, string(d.Body), "byte for byte")
		require.Equal(t, 1, d.Attempt)
		require.NotEmpty(t, d.Lease)
		require.NoError(t, dq.Ack(ctx, d.ID, d.Lease))
		j, err := dq.Get(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, client.StateDone, j.State)
	})

	t.Run("S2 delay and run_at", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		delayed, err := dq.Push(ctx, &client.PushParams{Topic: "s2", Delay: time.Second})
		require.NoError(t, err)
		at, err := dq.Push(ctx, &client.PushParams{Topic: "s2", RunAt: time.Now().Add(1500 * time.Millisecond)})
		require.NoError(t, err)
		ds, err := dq.Claim(ctx, "s2", &client.ClaimParams{Max: 2})
		require.NoError(t, err)
		require.Empty(t, ds, "neither is due yet")
		got := map[string]bool{}
		for len(got) < 2 {
			ds, err := dq.Claim(ctx, "s2", &client.ClaimParams{Wait: 3 * time.Second})
			require.NoError(t, err)
			require.Len(t, ds, 1, "each comes within the wait")
			now := time.Now()
			j, err := dq.Get(ctx, ds[0].ID)
			require.NoError(t, err)
			require.False(t, now.Before(j.RunAt), "claimed at %s, before its run_at %s", now, j.RunAt)
			got[ds[0].ID] = true
			require.NoError(t, dq.Ack(ctx, ds[0].ID, ds[0].Lease))
		}
		require.True(t, got[delayed.ID] && got[at.ID])
	})

	t.Run("S3 errors", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		_, err := dq.Push(ctx, &client.PushParams{Topic: "bad topic!"})
		ae := requireAPIError(t, err, client.ErrInvalidArgument, http.StatusBadRequest)
		require.Equal(t, "invalid_argument", ae.Code)
		require.Equal(t, "topic", ae.Field)
		require.NotEmpty(t, ae.Message)
		_, err = dq.Get(ctx, "no-such-job")
		require.Equal(t, "not_found", requireAPIError(t, err, client.ErrNotFound, http.StatusNotFound).Code)
		p, err := dq.Push(ctx, &client.PushParams{Topic: "s3"})
		require.NoError(t, err)
		ds, err := dq.Claim(ctx, "s3", &client.ClaimParams{Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		err = dq.Ack(ctx, p.ID, "not-the-lease")
		require.Equal(t, "conflict", requireAPIError(t, err, client.ErrConflict, http.StatusConflict).Code)
	})

	t.Run("S4 retries and dead letters", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p, err := dq.Push(ctx, &client.PushParams{Topic: "s4", MaxAttempts: 2})
		require.NoError(t, err)
		for attempt := 1; attempt <= 2; attempt++ {
			ds, err := dq.Claim(ctx, "s4", &client.ClaimParams{Wait: 5 * time.Second})
			require.NoError(t, err)
			require.Len(t, ds, 1)
			require.Equal(t, attempt, ds[0].Attempt)
			require.NoError(t, dq.Nack(ctx, ds[0].ID, ds[0].Lease, &client.NackParams{Delay: new(time.Duration), Error: "failed"}))
		}
		j, err := dq.Get(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, client.StateDead, j.State)
		dead, err := dq.ListDead(ctx, "s4", 10)
		require.NoError(t, err)
		require.Equal(t, []string{p.ID}, jobIDs(dead))
		require.NoError(t, dq.Requeue(ctx, p.ID))
		j, err = dq.Get(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, client.StateReady, j.State)
		require.Equal(t, 0, j.Attempt)
		ds, err := dq.Claim(ctx, "s4", &client.ClaimParams{Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.Equal(t, 1, ds[0].Attempt)
	})

	t.Run("S5 cancel and replace", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		_, err := dq.Push(ctx, &client.PushParams{Topic: "s5", ID: "s5-job", Delay: time.Hour, Body: []byte(`1`)})
		require.NoError(t, err)
		r, err := dq.Replace(ctx, &client.PushParams{Topic: "s5", ID: "s5-job", Delay: time.Hour, Body: []byte(`2`)})
		require.NoError(t, err)
		require.True(t, r.Replaced)
		j, err := dq.Get(ctx, "s5-job")
		require.NoError(t, err)
		require.Equal(t, `2`, string(j.Body))
		require.NoError(t, dq.Cancel(ctx, "s5-job"))
		j, err = dq.Get(ctx, "s5-job")
		require.NoError(t, err)
		require.Equal(t, client.StateCancelled, j.State)
		requireAPIError(t, dq.Cancel(ctx, "s5-job"), client.ErrNotFound, http.StatusNotFound)
	})

	t.Run("S6 batches", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		rs, err := dq.PushBatch(ctx, []*client.PushParams{{Topic: "s6"}, {Topic: "bad topic!"}, {Topic: "s6"}})
		require.NoError(t, err)
		require.Len(t, rs, 3)
		require.NoError(t, rs[0].Err)
		ae, ok := errors.AsType[*client.APIError](rs[1].Err)
		require.True(t, ok, "%v", rs[1].Err)
		require.Equal(t, "invalid_argument", ae.Code)
		require.Equal(t, "topic", ae.Field)
		require.NoError(t, rs[2].Err)
		ds, err := dq.Claim(ctx, "s6", &client.ClaimParams{Max: 2, Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 2)
		res, err := dq.AckBatch(ctx, []client.AckItem{{ID: ds[0].ID, Lease: ds[0].Lease}, {ID: ds[1].ID, Lease: ds[1].Lease}, {ID: "no-such-job", Lease: "x"}})
		require.NoError(t, err)
		require.Len(t, res, 3)
		require.NoError(t, res[0].Err)
		require.NoError(t, res[1].Err)
		require.ErrorIs(t, res[2].Err, client.ErrNotFound)
	})

	t.Run("S7 topics", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		_, err := dq.PutTopic(ctx, "s7", &client.TopicConfig{TTR: 45 * time.Second, MaxAttempts: 7})
		require.NoError(t, err)
		tp, err := dq.GetTopic(ctx, "s7")
		require.NoError(t, err)
		require.Equal(t, 45*time.Second, tp.TTR)
		require.Equal(t, 7, tp.MaxAttempts)
		_, err = dq.PauseTopic(ctx, "s7")
		require.NoError(t, err)
		_, err = dq.Push(ctx, &client.PushParams{Topic: "s7"})
		require.NoError(t, err)
		ds, err := dq.Claim(ctx, "s7", &client.ClaimParams{Wait: 300 * time.Millisecond})
		require.NoError(t, err)
		require.Empty(t, ds, "paused")
		_, err = dq.ResumeTopic(ctx, "s7")
		require.NoError(t, err)
		ds, err = dq.Claim(ctx, "s7", &client.ClaimParams{Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Len(t, ds, 1)
	})

	t.Run("S8 subscriber", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		for range 2 {
			_, err := dq.Push(ctx, &client.PushParams{Topic: "s8"})
			require.NoError(t, err)
		}
		var mu sync.Mutex
		seen := map[string]int{}
		failed := ""
		handled := make(chan string, 16)
		runSubscriber(t, dq, "s8", &client.SubscribeParams{Prefetch: 2, HandlerFunc: func(_ context.Context, d *client.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			seen[d.ID]++
			if failed == "" {
				failed = d.ID // the first delivery fails once and comes again
				return client.RetryIn(0, errors.New("first try fails"))
			}
			handled <- d.ID
			return nil
		}})
		for range 3 {
			_, err := dq.Push(ctx, &client.PushParams{Topic: "s8"})
			require.NoError(t, err)
		}
		got := map[string]bool{}
		for len(got) < 5 {
			select {
			case id := <-handled:
				require.False(t, got[id], "job %s handled twice", id)
				got[id] = true
			case <-time.After(20 * time.Second):
				t.Fatalf("handled %d of 5 jobs", len(got))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, 2, seen[failed], "the failed delivery came again, once")
	})

	t.Run("S10 webhook verification with a rotated secret", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		// got has the Delayq-Id of each request a receiver was sent.
		got := make(chan string, 16)
		receiver := func(secret string) *httptest.Server {
			wr := &client.WebhookReceiver{Secrets: []string{secret}, HandlerFunc: func(_ context.Context, d *client.Delivery) error {
				if string(d.Body) == `"stop"` {
					return client.StopRetries("order gone")
				}
				return nil
			}}
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Get("Delayq-Id")
				wr.ServeHTTP(w, r)
			}))
			t.Cleanup(s.Close)
			return s
		}
		for _, secret := range []string{"new-secret", "old-secret"} {
			s := receiver(secret)
			topic := "s10-" + secret
			_, err := dq.PutTopic(ctx, topic, &client.TopicConfig{MaxAttempts: 3, Delivery: client.DeliveryConfig{
				Type: "webhook", URL: s.URL, Secret: "new-secret", PreviousSecret: "old-secret"}})
			require.NoError(t, err)
			p, err := dq.Push(ctx, &client.PushParams{Topic: topic, Body: []byte(`{"n":1}`)})
			require.NoError(t, err)
			require.Equal(t, p.ID, <-got)
			waitJob(t, dq, p.ID, inState(client.StateDone))
			stop, err := dq.Push(ctx, &client.PushParams{Topic: topic, Body: []byte(`"stop"`)})
			require.NoError(t, err)
			require.Equal(t, stop.ID, <-got)
			j := waitJob(t, dq, stop.ID, inState(client.StateDead))
			require.Equal(t, 1, j.Attempt, "dead after one attempt")
			require.Contains(t, j.LastError, "order gone")
		}
		// A receiver with a wrong secret refuses (401): the job is retried,
		// not done.
		s := receiver("wrong-secret")
		_, err := dq.PutTopic(ctx, "s10-wrong", &client.TopicConfig{MaxAttempts: 1, Delivery: client.DeliveryConfig{
			Type: "webhook", URL: s.URL, Secret: "new-secret"}})
		require.NoError(t, err)
		p, err := dq.Push(ctx, &client.PushParams{Topic: "s10-wrong"})
		require.NoError(t, err)
		require.Equal(t, p.ID, <-got)
		require.Equal(t, "status 401", waitJob(t, dq, p.ID, inState(client.StateDead)).LastError)
	})
}

// TestClientScenarioS9 is S9 of clients/SCENARIOS.md: the server is
// stopped and started again on the same port and data directory under a
// subscriber, which reconnects by itself and handles the jobs pushed
// after the restart.
func TestClientScenarioS9(t *testing.T) {
	t.Parallel()
	port, err := looport.Free(false) // no connection takes it while the server is stopped
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--backend", "local", "--data", t.TempDir(), "--http", addr, "--nats-listen", "off"}
	srv := startServer(t, args...)
	dq := newClient(t, client.Config{URL: srv.HTTPURL})
	r := startReconnecting(t, dq, "s9", 500*time.Millisecond)
	r.pushHandled(t, dq, "s9-before")
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 15*time.Second))
	r.requireLost(t)
	startServer(t, args...)
	r.pushHandled(t, dq, "s9-after")
	require.NoError(t, r.stop())
}
