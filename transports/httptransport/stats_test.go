package httptransport_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/transports/httptransport"
)

// fakeCounters are the cumulative counters a test moves between samples.
type fakeCounters struct {
	mu sync.Mutex
	c  httptransport.StatsCounters
}

func (f *fakeCounters) read(context.Context) (httptransport.StatsCounters, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// A copy, as a registry's read is.
	c := httptransport.StatsCounters{Intake: maps.Clone(f.c.Intake), Deliveries: maps.Clone(f.c.Deliveries),
		Retries: maps.Clone(f.c.Retries), Deaths: maps.Clone(f.c.Deaths), Lateness: map[string]httptransport.Histogram{}}
	for k, h := range f.c.Lateness {
		h.Counts = append([]float64(nil), h.Counts...)
		c.Lateness[k] = h
	}
	return c, nil
}

type statsAnswer struct {
	Interval string `json:"interval"`
	Samples  []struct {
		Time                time.Time          `json:"time"`
		IntakePerSecond     map[string]float64 `json:"intake_per_second"`
		DeliveriesPerSecond map[string]float64 `json:"deliveries_per_second"`
		RetriesPerSecond    map[string]float64 `json:"retries_per_second"`
		DeathsPerSecond     map[string]float64 `json:"deaths_per_second"`
		LatenessP50         *float64           `json:"lateness_p50"`
		LatenessP99         *float64           `json:"lateness_p99"`
		Claims              float64            `json:"claims"`
	} `json:"samples"`
	Topics   []string                     `json:"topics"`
	Breakers []httptransport.BreakerState `json:"breakers"`
}

// TestStats samples counters twice and checks the rates, the lateness
// quantiles, the breakers, and what a token restricted to some topics sees.
func TestStats(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClock()
	bounds := []float64{0.001, 0.01, 0.1}
	fc := &fakeCounters{c: httptransport.StatsCounters{
		Intake:     map[string]float64{"orders.eu": 100, "mail": 7},
		Deliveries: map[string]float64{"orders.eu": 50},
		Retries:    map[string]float64{"orders.eu": 8},
		Deaths:     map[string]float64{"orders.eu": 2, "mail": 1},
		Lateness: map[string]httptransport.Histogram{
			"orders.eu": {Bounds: bounds, Counts: []float64{10, 10, 10}, Count: 10},
			"mail":      {Bounds: bounds, Counts: []float64{0, 0, 0}, Count: 0},
		},
	}}
	st := httptransport.NewStats(httptransport.StatsConfig{
		CountersFunc: fc.read,
		BreakersFunc: func() []httptransport.BreakerState {
			return []httptransport.BreakerState{{Name: "store", State: "closed"}, {Name: "hooks.example", Endpoint: true, State: "open"}}
		},
		Clock: clock,
	})
	b, _ := setupAuth(t, func(c *setupConfig) { c.stats = st })
	getPath := func(secret, path string) statsAnswer {
		res := b.do(t, http.MethodGet, path, nil, bearer(secret)...)
		requireStatus(t, res, http.StatusOK)
		var a statsAnswer
		require.NoError(t, json.Unmarshal(res.body, &a))
		return a
	}
	get := func(secret string) statsAnswer { return getPath(secret, "/v1/stats") }
	// The first sample is a baseline: no interval yet.
	st.Sample(t.Context())
	require.Empty(t, get(adminSecret).Samples)

	// 5s later: orders.eu took 50 more jobs (10/s), delivered 25 (5/s), of
	// which 10 failed (2/s) and 5 buried their job (1/s), and claimed 100 jobs: 50 within 1ms, 49 within 10ms, 1 within 100ms;
	// mail took 5 jobs and 100 claims, all within 1 ms.
	clock.Advance(5 * time.Second)
	fc.mu.Lock()
	fc.c.Intake["orders.eu"], fc.c.Intake["mail"] = 150, 12
	fc.c.Deliveries["orders.eu"] = 75
	fc.c.Retries["orders.eu"], fc.c.Deaths["orders.eu"] = 18, 7
	fc.c.Lateness["orders.eu"] = httptransport.Histogram{Bounds: bounds, Counts: []float64{60, 109, 110}, Count: 110}
	fc.c.Lateness["mail"] = httptransport.Histogram{Bounds: bounds, Counts: []float64{100, 100, 100}, Count: 100}
	fc.mu.Unlock()
	st.Sample(t.Context())

	all := get(adminSecret)
	require.Equal(t, "5s", all.Interval)
	require.Len(t, all.Samples, 1)
	s := all.Samples[0]
	require.Equal(t, map[string]float64{"orders.eu": 10, "mail": 1}, s.IntakePerSecond)
	require.Equal(t, map[string]float64{"orders.eu": 5}, s.DeliveriesPerSecond)
	require.Equal(t, map[string]float64{"orders.eu": 2}, s.RetriesPerSecond)
	require.Equal(t, map[string]float64{"orders.eu": 1}, s.DeathsPerSecond, "mail buried none in the interval")
	require.Equal(t, float64(200), s.Claims)
	require.NotNil(t, s.LatenessP50)
	// 150 of 200 claims within 1ms: the median is within the first bucket.
	require.InDelta(t, 0.001*100/150, *s.LatenessP50, 1e-9)
	// The 198th claim: 49 claims between 1ms and 10ms after 150.
	require.InDelta(t, 0.001+0.009*(198-150)/49.0, *s.LatenessP99, 1e-9)
	require.Equal(t, []string{"mail", "orders.eu"}, all.Topics)
	require.Len(t, all.Breakers, 2)

	// A token restricted to orders.> sees only orders.eu, its lateness
	// alone, and the store's breaker, not the endpoints.
	orders := get(ordersSecret)
	s = orders.Samples[0]
	require.Equal(t, map[string]float64{"orders.eu": 10}, s.IntakePerSecond)
	require.Equal(t, map[string]float64{"orders.eu": 2}, s.RetriesPerSecond)
	require.Equal(t, float64(100), s.Claims)
	require.InDelta(t, 0.001*50/50, *s.LatenessP50, 1e-9)
	require.InDelta(t, 0.001+0.009*(99-50)/49.0, *s.LatenessP99, 1e-9)
	require.Equal(t, []string{"orders.eu"}, orders.Topics)
	require.Equal(t, []httptransport.BreakerState{{Name: "store", State: "closed"}}, orders.Breakers)

	// One topic's samples, for its page: its rates and its lateness alone.
	mail := getPath(adminSecret, "/v1/stats?topic=mail")
	s = mail.Samples[0]
	require.Equal(t, map[string]float64{"mail": 1}, s.IntakePerSecond)
	require.Empty(t, s.DeliveriesPerSecond)
	require.Empty(t, s.RetriesPerSecond)
	require.Empty(t, s.DeathsPerSecond)
	require.Equal(t, float64(100), s.Claims)
	require.InDelta(t, 0.001*50/100, *s.LatenessP50, 1e-9)
	require.Equal(t, []string{"mail"}, mail.Topics)
	require.Len(t, mail.Breakers, 2, "the breakers are not a topic's")
	// A topic the token may not use is as one without samples.
	s = getPath(ordersSecret, "/v1/stats?topic=mail").Samples[0]
	require.Empty(t, s.IntakePerSecond)
	require.Nil(t, s.LatenessP50)

	// Nothing claimed in the next interval: no lateness.
	clock.Advance(5 * time.Second)
	st.Sample(t.Context())
	s = get(adminSecret).Samples[1]
	require.Nil(t, s.LatenessP50)
	require.Empty(t, s.IntakePerSecond)
}

// TestStatsRing checks that the ring keeps Window/Interval+1 samples, the
// newest, in order.
func TestStatsRing(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClock()
	n := 0.0
	st := httptransport.NewStats(httptransport.StatsConfig{
		CountersFunc: func(context.Context) (httptransport.StatsCounters, error) {
			n++
			return httptransport.StatsCounters{Intake: map[string]float64{"t": n * n}}, nil
		},
		Interval: time.Second,
		Window:   3 * time.Second,
		Clock:    clock,
	})
	b := setup(t, func(c *setupConfig) { c.stats = st })
	for range 10 {
		st.Sample(t.Context())
		clock.Advance(time.Second)
	}
	res := b.do(t, http.MethodGet, "/v1/stats", nil)
	requireStatus(t, res, http.StatusOK)
	var a statsAnswer
	require.NoError(t, json.Unmarshal(res.body, &a))
	require.Len(t, a.Samples, 4)
	// Sample k (from 2) has rate k²-(k-1)² = 2k-1: the last four are
	// samples 7 to 10.
	for i, s := range a.Samples {
		require.Equal(t, float64(2*(7+i)-1), s.IntakePerSecond["t"])
		if i > 0 {
			require.Equal(t, time.Second, s.Time.Sub(a.Samples[i-1].Time))
		}
	}
}
