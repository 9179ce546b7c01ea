package webhook

import (
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
)

// signalStore reports the outcomes the engine records, so tests wait on
// them instead of polling.
type signalStore struct {
	core.Store
	acked  chan string
	buried chan string
}

func (s *signalStore) AckJob(ctx context.Context, p *core.AckJobParams) (core.SettleResult, error) {
	res, err := s.Store.AckJob(ctx, p)
	if err == nil {
		s.acked <- p.ID
	}
	return res, err
}

func (s *signalStore) BuryJob(ctx context.Context, p *core.BuryJobParams) (core.SettleResult, error) {
	res, err := s.Store.BuryJob(ctx, p)
	if err == nil {
		s.buried <- p.ID
	}
	return res, err
}

type engineBundle struct {
	engine *core.Engine
	store  *signalStore
	// attempts receives the Delayq-Attempt of every delivery the receiver sees.
	attempts chan string
}

// setupEngine runs an engine over memstore with this package's Deliverer
// and a webhook topic "orders.close" posting to a receiver that answers the
// nth delivery (1-based) with status(n).
func setupEngine(t *testing.T, status func(n int64) int) *engineBundle {
	t.Helper()
	b := &engineBundle{attempts: make(chan string, 16)}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.attempts <- r.Header.Get("Delayq-Attempt")
		code := status(n.Add(1))
		w.WriteHeader(code)
		if code >= 300 {
			_, _ = io.WriteString(w, "nope")
		}
	}))
	t.Cleanup(srv.Close)

	store := memstore.New(memstore.Config{})
	b.store = &signalStore{Store: store, acked: make(chan string, 16), buried: make(chan string, 16)}
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
		require.Equal(t, job.ID, recv(t, b.store.acked))

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
		require.Equal(t, job.ID, recv(t, b.store.buried))

		got, err := b.engine.Get(ctx, job.ID)
		require.NoError(t, err)
		require.Equal(t, core.StateDead, got.State)
		require.Equal(t, 3, got.Attempt)
		require.Equal(t, "status 500", got.LastError, "the answer is withheld")
		require.Empty(t, b.attempts, "delivered after max_attempts")
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
