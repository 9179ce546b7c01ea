package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

type engineBundle struct {
	engine *core.Engine
	store  *storetest.SignalStore
	// attempts receives the Delayq-Attempt of every delivery the receiver sees.
	attempts chan string
	// previous receives the Delayq-Previous-Status of every delivery, "-"
	// when absent.
	previous chan string
	// noRetry, when set, is the Delayq-No-Retry the receiver answers with.
	noRetry atomic.Value
}

// setupEngine runs an engine over memstore with this package's Deliverer
// and a webhook topic "orders.close" posting to a receiver that answers the
// nth delivery (1-based) with status(n).
func setupEngine(t *testing.T, status func(n int64) int) *engineBundle {
	t.Helper()
	b := &engineBundle{attempts: make(chan string, 16), previous: make(chan string, 16)}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.attempts <- r.Header.Get("Delayq-Attempt")
		b.previous <- cmp.Or(r.Header.Get("Delayq-Previous-Status"), "-")
		code := status(n.Add(1))
		if reason, ok := b.noRetry.Load().(string); ok {
			w.Header().Set("Delayq-No-Retry", reason)
		}
		w.WriteHeader(code)
		if code >= 300 {
			_, _ = io.WriteString(w, "nope")
		}
	}))
	t.Cleanup(srv.Close)

	store := memstore.New(memstore.Config{})
	b.store = &storetest.SignalStore{Store: store, Outcomes: make(chan storetest.Outcome, 16),
		Kinds: []storetest.OutcomeKind{storetest.OutcomeAck, storetest.OutcomeBury}}
	d := New(Config{})
	t.Cleanup(d.CloseIdleConnections)
	engine, err := core.NewEngine(core.EngineConfig{
		Store:      b.store,
		Deliverers: map[string]core.Deliverer{core.DeliveryWebhook: d},
	})
	require.NoError(t, err)
	b.engine = engine
	ctx := context.Background()
	require.NoError(t, engine.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, engine.Stop(ctx))
		require.NoError(t, store.Close())
	})

	require.NoError(t, engine.PutTopic(ctx, &core.Topic{
		Name:        "orders.close",
		Delivery:    core.Delivery{Type: core.DeliveryWebhook, URL: srv.URL + "/hook", Secret: "s3cr3t"},
		MaxAttempts: 3,
		Backoff:     core.Backoff{Initial: time.Millisecond, Max: time.Millisecond, Factor: 1, Jitter: -1},
	}))
	return b
}

// recv takes one value from ch; the deadline only guards against a hang.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		require.FailNow(t, "nothing received")
		panic("unreachable")
	}
}

func TestEngineDelivery(t *testing.T) {
	t.Parallel()

	t.Run("SucceedsOnThirdAttempt", func(t *testing.T) {
		t.Parallel()
		b := setupEngine(t, func(n int64) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		ctx := context.Background()
		job, err := b.engine.Push(ctx, &core.PushParams{Topic: "orders.close", Body: json.RawMessage(`{"order":42}`)})
		require.NoError(t, err)
		require.Equal(t, 3, job.MaxAttempts)

		for _, want := range []string{"1", "2", "3"} {
			require.Equal(t, want, recv(t, b.attempts))
		}
		for _, want := range []string{"-", "503", "503"} {
			require.Equal(t, want, recv(t, b.previous), "the previous answer's status, none on the first attempt")
		}
		require.Equal(t, job.ID, b.store.Wait(t, storetest.OutcomeAck, 1, 30*time.Second)[0])

		got, err := b.engine.Get(ctx, job.ID)
		require.NoError(t, err)
		require.Equal(t, core.StateDone, got.State)
		require.Equal(t, 3, got.Attempt)
	})

	t.Run("DeadAfterMaxAttempts", func(t *testing.T) {
		t.Parallel()
		b := setupEngine(t, func(int64) int { return http.StatusInternalServerError })
		ctx := context.Background()
		job, err := b.engine.Push(ctx, &core.PushParams{Topic: "orders.close", Body: json.RawMessage(`"x"`)})
		require.NoError(t, err)

		for _, want := range []string{"1", "2", "3"} {
			require.Equal(t, want, recv(t, b.attempts))
		}
		require.Equal(t, job.ID, b.store.Wait(t, storetest.OutcomeBury, 1, 30*time.Second)[0])

		got, err := b.engine.Get(ctx, job.ID)
		require.NoError(t, err)
		require.Equal(t, core.StateDead, got.State)
		require.Equal(t, 3, got.Attempt)
		require.Equal(t, "status 500", got.LastError, "the answer is withheld")
		require.Empty(t, b.attempts, "delivered after max_attempts")
	})

	t.Run("DeadAtOnceWhenReceiverStopsRetries", func(t *testing.T) {
		t.Parallel()
		b := setupEngine(t, func(int64) int { return http.StatusUnprocessableEntity })
		b.noRetry.Store("order 42 was deleted")
		ctx := context.Background()
		job, err := b.engine.Push(ctx, &core.PushParams{Topic: "orders.close", Body: json.RawMessage(`"x"`)})
		require.NoError(t, err)
		require.Equal(t, "1", recv(t, b.attempts))
		require.Equal(t, job.ID, b.store.Wait(t, storetest.OutcomeBury, 1, 30*time.Second)[0])
		got, err := b.engine.Get(ctx, job.ID)
		require.NoError(t, err)
		require.Equal(t, core.StateDead, got.State)
		require.Equal(t, 1, got.Attempt, "no retry, with 2 attempts left")
		require.Equal(t, "receiver stopped retries: order 42 was deleted (status 422)", got.LastError)
		require.Empty(t, b.attempts)
	})

	t.Run("InvalidTopicRefused", func(t *testing.T) {
		t.Parallel()
		b := setupEngine(t, func(int64) int { return http.StatusOK })
		err := b.engine.PutTopic(context.Background(), &core.Topic{
			Name:     "orders.bad",
			Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "https://svc/hook", Success: "status =="},
		})
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "delivery.success", fe.Field)
	})
}
