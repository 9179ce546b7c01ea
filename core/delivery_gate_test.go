package core_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// gatedDeliverer is a fakeDeliverer that is also a core.DeliveryGate
// answering from a script, then with its last answer for ever.
type gatedDeliverer struct {
	*fakeDeliverer
	mu     sync.Mutex
	script [][2]int // admits, wait in minutes
	asked  int
}

func (g *gatedDeliverer) DeliveryAdmits(*core.Topic) (int, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	a := g.script[min(g.asked, len(g.script))-1]
	return a[0], time.Duration(a[1]) * time.Minute
}

func (g *gatedDeliverer) askedSoFar() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked
}

// claimLog is a store that records, for each claim, its Max and how often
// the gate had been asked by then.
type claimLog struct {
	core.Store
	gate   *gatedDeliverer
	mu     sync.Mutex
	claims [][2]int // max, gate asks
}

func (s *claimLog) ClaimJobs(ctx context.Context, p *core.ClaimJobsParams) ([]*core.Job, error) {
	s.mu.Lock()
	s.claims = append(s.claims, [2]int{p.Max, s.gate.askedSoFar()})
	s.mu.Unlock()
	return s.Store.ClaimJobs(ctx, p)
}

func (s *claimLog) log() [][2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][2]int(nil), s.claims...)
}

// TestDispatchWaitsForGate: while the deliverer's gate refuses a topic's
// deliveries (its breaker is open) the dispatcher claims nothing and waits
// on the engine's clock for the time the gate names; while it admits one
// probe, claims take one job at most.
func TestDispatchWaitsForGate(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	g := &gatedDeliverer{fakeDeliverer: &fakeDeliverer{got: make(chan *core.Job, 10)},
		script: [][2]int{{0, 1}, {0, 1}, {1, 0}}}
	store := &claimLog{Store: b.store, gate: g}
	e, err := core.NewEngine(core.EngineConfig{Store: store, Clock: b.clock,
		Deliverers: map[string]core.Deliverer{core.DeliveryWebhook: g}})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "hook", Concurrency: 5,
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"}}))
	for i := range 3 {
		_, err := e.Push(ctx, &core.PushParams{Topic: "hook", Body: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(ctx) })

	for range 3 {
		// The dispatcher waits on the fake clock: each minute passed lets
		// it ask the gate again.
		require.Eventually(t, func() bool {
			b.clock.Advance(time.Minute)
			return len(g.got) > 0
		}, 10*time.Second, 5*time.Millisecond)
		<-g.got
	}
	claims := store.log()
	require.NotEmpty(t, claims)
	require.Equal(t, 3, claims[0][1], "no claim before the gate admitted a delivery")
	for _, c := range claims {
		require.Equal(t, 1, c[0], "one probe admitted, one job claimed at a time: %v", claims)
	}
}

// notSentErr is a delivery refused unsent, as breaker.OpenError.
type notSentErr struct{ wait time.Duration }

func (e notSentErr) Error() string             { return "not sent: circuit breaker open" }
func (e notSentErr) Is(target error) bool      { return target == core.ErrNotSent }
func (e notSentErr) RetryAfter() time.Duration { return e.wait }

// TestDispatchRetriesRefusedLastAttempt: a delivery refused unsent on the
// job's last attempt is retried when the refusal ends, not buried, and the
// next attempt, sent, is the one that counts.
func TestDispatchRetriesRefusedLastAttempt(t *testing.T) {
	t.Parallel()
	d := &fakeDeliverer{got: make(chan *core.Job, 10), fail: []error{notSentErr{30 * time.Second}}}
	e := realEngine(t, d)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(ctx) })
	require.NoError(t, e.PutTopic(ctx, &core.Topic{Name: "hook", MaxAttempts: 1,
		Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://x"},
		Backoff:  core.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}))
	before := time.Now()
	j, err := e.Push(ctx, &core.PushParams{Topic: "hook"})
	require.NoError(t, err)
	require.Equal(t, 1, (<-d.got).Attempt)
	got := waitState(t, e, j.ID, core.StateScheduled)
	require.Equal(t, "not sent: circuit breaker open", got.LastError)
	require.Equal(t, 0, got.Attempt, "the refused attempt is given back")
	require.Equal(t, core.OutcomeReleased, got.History[len(got.History)-1].Outcome)
	require.WithinRange(t, got.RunAt, before.Add(30*time.Second-time.Millisecond), time.Now().Add(31*time.Second),
		"retried when the refusal ends, not after the 1ms backoff")
}
