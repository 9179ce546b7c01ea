package held

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// index records the calls of HoldFunc and DropFunc; the set's lock
// orders them.
type index struct {
	held    map[string]bool
	dropped []string
}

func newIndexed(prefetch int) (*Set, *index) {
	ix := &index{held: map[string]bool{}}
	s := New(Config{
		Prefetch: prefetch,
		HoldFunc: func(id string) { ix.held[id] = true },
		DropFunc: func(id string) {
			delete(ix.held, id)
			ix.dropped = append(ix.dropped, id)
		},
	})
	return s, ix
}

func leased(id, lease string, expires time.Time) *core.Job {
	return &core.Job{ID: id, Lease: lease, LeaseExpiresAt: expires}
}

// TestSetCredit checks that holding takes credit and that a forget under
// the delivery's lease, or its lease's expiry, gives it back, telling the
// index.
func TestSetCredit(t *testing.T) {
	t.Parallel()
	now := time.Now()
	s, ix := newIndexed(3)
	s.Hold([]*core.Job{leased("a", "la", now.Add(10*time.Second)), leased("b", "lb", now.Add(20*time.Second))})
	free, next := s.Credit(now)
	require.Equal(t, 1, free)
	require.Equal(t, now.Add(10*time.Second), next)
	require.Equal(t, map[string]bool{"a": true, "b": true}, ix.held)
	require.Equal(t, map[string]string{"a": "la", "b": "lb"}, s.Leases())

	// Claimed again while held: that lease was lost, its credit not taken twice.
	s.Hold([]*core.Job{leased("a", "la2", now.Add(10*time.Second))})
	free, _ = s.Credit(now)
	require.Equal(t, 1, free)

	s.Forget("a", "la") // an old lease: nothing
	free, _ = s.Credit(now)
	require.Equal(t, 1, free)
	s.Forget("a", "la2")
	free, _ = s.Credit(now)
	require.Equal(t, 2, free)
	require.Equal(t, []string{"a"}, ix.dropped)

	// b's lease, extended, expires at the new time.
	s.Extend("b", "lb", now.Add(30*time.Second))
	s.Extend("b", "other", now.Add(time.Hour)) // not its lease: ignored
	free, next = s.Credit(now.Add(25 * time.Second))
	require.Equal(t, 2, free)
	require.Equal(t, now.Add(30*time.Second), next)
	free, next = s.Credit(now.Add(30 * time.Second))
	require.Equal(t, 3, free)
	require.True(t, next.IsZero(), "nothing held")
	require.Equal(t, []string{"a", "b"}, ix.dropped)
	require.Empty(t, ix.held)
}

// TestSetWait checks what ends a Wait: credit coming back, a lease
// expiring, the recheck interval, the context.
func TestSetWait(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClock()
	s := New(Config{Prefetch: 1})
	s.Hold([]*core.Job{leased("a", "la", clock.Now().Add(10*time.Second))})
	_, next := s.Credit(clock.Now())

	type woken struct{ ok, recheckDue bool }
	wait := func(ctx context.Context, recheck time.Duration) <-chan woken {
		out := make(chan woken, 1)
		go func() {
			ok, due := s.Wait(ctx, clock, next, recheck)
			out <- woken{ok, due}
		}()
		return out
	}

	// The lease expires first.
	got := wait(t.Context(), time.Minute)
	require.NoError(t, clock.BlockUntilContext(t.Context(), 2))
	clock.Advance(10 * time.Second)
	require.Equal(t, woken{ok: true}, <-got)

	// The recheck interval passes first.
	next = clock.Now().Add(time.Hour)
	got = wait(t.Context(), time.Second)
	require.NoError(t, clock.BlockUntilContext(t.Context(), 2))
	clock.Advance(time.Second)
	require.Equal(t, woken{ok: true, recheckDue: true}, <-got)

	// Credit comes back.
	got = wait(t.Context(), 0)
	require.NoError(t, clock.BlockUntilContext(t.Context(), 1))
	s.Forget("a", "la")
	require.Equal(t, woken{ok: true}, <-got)

	// The context ends.
	ctx, cancel := context.WithCancel(t.Context())
	got = wait(ctx, 0)
	cancel()
	require.Equal(t, woken{}, <-got)
}

// TestSetRelease checks that Release nacks every held delivery with delay 0
// and ReleaseReason, counts only those released, reports other failures,
// and leaves the set empty.
func TestSetRelease(t *testing.T) {
	t.Parallel()
	now := time.Now()
	s, ix := newIndexed(4)
	s.Hold([]*core.Job{
		leased("ok", "l1", now.Add(time.Minute)),
		leased("settled", "l2", now.Add(time.Minute)),
		leased("gone", "l3", now.Add(time.Minute)),
		leased("down", "l4", now.Add(time.Minute)),
	})
	type ctxKey struct{}
	// The nacks run at once: they report on channels.
	nacks := make(chan core.NackParams, 4)
	type failure struct {
		id  string
		err error
	}
	failures := make(chan failure, 4)
	errDown := errors.New("store down")
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "kept"))
	cancel() // the caller's context ended: the releases still run, with its values
	n := s.Release(ctx, &ReleaseParams{
		Timeout: time.Minute,
		NackFunc: func(ctx context.Context, p *core.NackParams) error {
			if ctx.Err() != nil || ctx.Value(ctxKey{}) != "kept" {
				return errors.New("not the caller's context without its cancellation")
			}
			nacks <- *p
			switch p.ID {
			case "settled":
				return core.ErrConflict
			case "gone":
				return core.ErrNotFound
			case "down":
				return errDown
			}
			return nil
		},
		FailedFunc: func(id string, err error) {
			failures <- failure{id, err}
		},
	})
	require.Equal(t, 1, n)
	close(nacks)
	close(failures)
	nacked := map[string]core.NackParams{}
	for p := range nacks {
		nacked[p.ID] = p
	}
	require.Len(t, nacked, 4)
	var failed []failure
	for f := range failures {
		failed = append(failed, f)
	}
	require.Equal(t, []failure{{"down", errDown}}, failed)
	for id, p := range nacked {
		require.NotNil(t, p.Delay, id)
		require.Zero(t, *p.Delay, id)
		require.Equal(t, ReleaseReason, p.Error, id)
	}
	require.Equal(t, "l1", nacked["ok"].Lease)
	require.Empty(t, s.Leases())
	require.Empty(t, ix.held)
	require.Zero(t, s.Release(t.Context(), &ReleaseParams{}), "nothing left to release")
}
