package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// subscribed is a Subscription run by a test: its deliveries come on
// sent, and Run's answer on done.
type subscribed struct {
	sub  *core.Subscription
	sent chan *core.Job
	done chan error
}

// subscribe runs a subscription to topic t with prefetch; send fails
// for the ids in fail.
func subscribe(t *testing.T, b *testBundle, p core.SubscriptionParams, fail ...string) (*subscribed, context.CancelFunc) {
	t.Helper()
	p.Topic = "t"
	sub, err := b.engine.NewSubscription(p)
	require.NoError(t, err)
	s := &subscribed{sub: sub, sent: make(chan *core.Job, 100), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		s.done <- sub.Run(ctx, func(j *core.Job) error {
			for _, id := range fail {
				if j.ID == id {
					return errors.New("send failed")
				}
			}
			s.sent <- j
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s, cancel
}

// next returns the next delivery sent.
func (s *subscribed) next(t *testing.T) *core.Job {
	t.Helper()
	select {
	case j := <-s.sent:
		return j
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery sent")
		return nil
	}
}

// none checks that nothing is sent while the subscription waits on the
// clock (its only timer, or both when it has a recheck).
func (s *subscribed) none(t *testing.T, b *testBundle, waiters int) {
	t.Helper()
	require.NoError(t, b.clock.BlockUntilContext(context.Background(), waiters))
	select {
	case j := <-s.sent:
		t.Fatalf("job %s sent without credit", j.ID)
	default:
	}
}

func push(t *testing.T, b *testBundle, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		j, err := b.engine.Push(context.Background(), &core.PushParams{Topic: "t", TTR: time.Minute, MaxAttempts: 3})
		require.NoError(t, err)
		ids[i] = j.ID
	}
	return ids
}

// TestSubscriptionCredit: a subscription holds at most its prefetch, and a
// delivery ended through the engine, whichever transport called it (ack,
// nack, a touch that finds the lease gone), gives its credit back at once;
// a touch that keeps the lease does not.
func TestSubscriptionCredit(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	push(t, b, 4)
	s, _ := subscribe(t, b, core.SubscriptionParams{Prefetch: 2})
	first, second := s.next(t), s.next(t)
	s.none(t, b, 1) // waits for the first lease to expire

	_, err := b.engine.Touch(ctx, &core.TouchJobParams{ID: first.ID, Lease: first.Lease})
	require.NoError(t, err)
	s.none(t, b, 1)

	require.NoError(t, b.engine.Ack(ctx, &core.AckJobParams{ID: first.ID, Lease: first.Lease}))
	third := s.next(t)
	s.none(t, b, 1)

	require.NoError(t, b.engine.Nack(ctx, &core.NackParams{ID: second.ID, Lease: second.Lease, Delay: dur(time.Hour)}))
	fourth := s.next(t)
	s.none(t, b, 1)

	// Settled through another instance: the store alone knows. A touch
	// here finds the lease gone, which ends it here too.
	_, err = b.store.AckJob(ctx, &core.AckJobParams{ID: third.ID, Lease: third.Lease})
	require.NoError(t, err)
	s.none(t, b, 1)
	_, err = b.engine.Touch(ctx, &core.TouchJobParams{ID: third.ID, Lease: third.Lease})
	require.ErrorIs(t, err, core.ErrConflict)
	require.NoError(t, b.engine.Ack(ctx, &core.AckJobParams{ID: fourth.ID, Lease: fourth.Lease}))
	// Both credits are back: two more jobs go out at once.
	push(t, b, 2)
	s.next(t)
	s.next(t)
}

// TestSubscriptionLeaseExpiry: a lease that runs out gives its credit
// back when it expires, and the job comes again to the subscription.
func TestSubscriptionLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	push(t, b, 1)
	s, _ := subscribe(t, b, core.SubscriptionParams{Prefetch: 1})
	first := s.next(t)
	s.none(t, b, 1)
	b.clock.Advance(time.Minute)
	again := s.next(t)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, first.Attempt+1, again.Attempt)
}

// TestSubscriptionRecheck: with a recheck, a delivery settled through
// another instance gives its credit back when the subscription reads it
// back, before its lease expires.
func TestSubscriptionRecheck(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	push(t, b, 2)
	s, _ := subscribe(t, b, core.SubscriptionParams{Prefetch: 1, Recheck: time.Second})
	first := s.next(t)
	_, err := b.store.AckJob(ctx, &core.AckJobParams{ID: first.ID, Lease: first.Lease})
	require.NoError(t, err)
	s.none(t, b, 2) // the lease's expiry and the recheck
	b.clock.Advance(time.Second)
	s.next(t)
}

// TestSubscriptionRecheckTellsCancel: a running job cancelled through
// another instance is told to the subscriber once, by the first recheck
// after the delivery was held for Recheck, and gives the credit back; a
// delivery held for less is not read back yet.
func TestSubscriptionRecheckTellsCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	push(t, b, 1)
	_, err := b.engine.Push(ctx, &core.PushParams{Topic: "t", TTR: time.Minute, MaxAttempts: 3, Delay: dur(1500 * time.Millisecond)})
	require.NoError(t, err)
	told := make(chan string, 4)
	s, _ := subscribe(t, b, core.SubscriptionParams{Prefetch: 1, Recheck: time.Second,
		CancelledFunc: func(id string) { told <- id }})
	first := s.next(t)
	other, err := core.NewEngine(core.EngineConfig{Store: b.store, Clock: b.clock})
	require.NoError(t, err)
	require.NoError(t, other.Cancel(ctx, &core.CancelJobParams{ID: first.ID, Running: true}))
	s.none(t, b, 2) // the lease's expiry and the recheck

	b.clock.Advance(time.Second) // the recheck finds it, the credit comes back
	require.Equal(t, first.ID, <-told)
	s.none(t, b, 2) // the claim's wait for the next due job, and the recheck
	b.clock.Advance(500 * time.Millisecond)
	second := s.next(t)
	require.NoError(t, other.Cancel(ctx, &core.CancelJobParams{ID: second.ID, Running: true}))
	s.none(t, b, 2)

	// Held for half a Recheck at the next one: not read back. The recheck
	// after is waited for by its timer.
	b.clock.Advance(500 * time.Millisecond)
	s.none(t, b, 2)
	require.Empty(t, told)
	b.clock.Advance(time.Second)
	require.Equal(t, second.ID, <-told)
	b.clock.Advance(time.Second)
	s.none(t, b, 2)
	require.Empty(t, told, "told once")
}

// TestSubscriptionRelease: Release hands back what the subscription
// holds: a delivery sent (or whose send failed, which may have reached
// the subscriber) with its attempt counted, one claimed and never sent
// with its attempt given back; each with last_error "subscriber
// disconnected", due at once. The engine's record of deliveries in flight
// is empty after, so a drain does not wait for them.
func TestSubscriptionRelease(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	ids := push(t, b, 3)
	// One claim takes the three in order; the send of the second fails,
	// so the third is never sent.
	s, cancel := subscribe(t, b, core.SubscriptionParams{Prefetch: 3}, ids[1])
	require.Equal(t, ids[0], s.next(t).ID)
	require.EqualError(t, <-s.done, "send failed")
	s.done <- nil // for the cleanup
	cancel()

	require.Equal(t, 3, s.sub.Release(ctx))
	for i, id := range ids {
		j, err := b.engine.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, core.StateReady, j.State, id)
		require.Equal(t, core.SubscriptionReleaseReason, j.LastError, id)
		if i < 2 {
			require.Equal(t, 1, j.Attempt, "sent, or its send began: the attempt counts")
		} else {
			require.Equal(t, 0, j.Attempt, "never sent: the attempt is given back")
		}
	}
	require.Zero(t, s.sub.Release(ctx), "nothing is held after a release")
	short, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	require.NoError(t, b.engine.WaitSettled(short))
}

// TestNewSubscriptionValidation: a bad topic or prefetch is refused.
func TestNewSubscriptionValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, p := range []core.SubscriptionParams{
		{Topic: "a..b", Prefetch: 1},
		{Topic: "t", Prefetch: 0},
		{Topic: "t", Prefetch: core.SubscriptionPrefetchMax + 1},
		{Topic: "t", Prefetch: 1, ClaimWait: core.ClaimWaitLimit + 1},
	} {
		_, err := b.engine.NewSubscription(p)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "%+v", p)
	}
}
