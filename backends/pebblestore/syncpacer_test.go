package pebblestore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// pacerAt returns a pacer on a clock the test moves, and a func that runs
// one fsync cycle: n writes wait for their fsync, the cycle lasts took,
// then Pebble asks for the next interval.
func pacerAt(t *testing.T) (p *syncPacer, cycle func(n int, took time.Duration) time.Duration) {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	p = newSyncPacer(func() time.Time { return now })
	return p, func(n int, took time.Duration) time.Duration {
		for range n {
			p.waited()
		}
		now = now.Add(took)
		return p.interval()
	}
}

func TestSyncPacerSlowPushesShareFsyncs(t *testing.T) {
	p, cycle := pacerAt(t)
	assert.Equal(t, walMinSyncInterval, p.interval(), "first ask, nothing known yet")
	// One push a millisecond: a cycle of the interval and a 150 µs fsync
	// sees about two.
	for range 50 {
		assert.Equal(t, walMinSyncInterval, cycle(2, walMinSyncInterval+150*time.Microsecond))
	}
	// Idle: a lone push after a second.
	assert.Equal(t, walMinSyncInterval, cycle(1, time.Second))
}

func TestSyncPacerFastPushesWaitLess(t *testing.T) {
	_, cycle := pacerAt(t)
	// 20 000 pushes a second, as 32 callers that push again once answered
	// make: the interval settles where walSyncGroup of them come, 200 µs.
	var got time.Duration
	for range 100 {
		got = cycle(10, 500*time.Microsecond)
	}
	assert.InDelta(t, 200*time.Microsecond, got, float64(5*time.Microsecond))
	// The load stops: back to walMinSyncInterval within a few cycles.
	for range 10 {
		got = cycle(0, walMinSyncInterval)
	}
	assert.Equal(t, walMinSyncInterval, got)
}

// Under a steady load the interval settles on one value: going by each
// cycle's count alone (no wait after a cycle in which walSyncGroup writes
// came, else walMinSyncInterval) would make long and short cycles
// alternate.
func TestSyncPacerSteadyUnderSteadyLoad(t *testing.T) {
	_, cycle := pacerAt(t)
	var intervals []time.Duration
	d := walMinSyncInterval
	for range 200 {
		// 12 000 writes a second over the cycle's interval and fsync.
		took := d + 150*time.Microsecond
		d = cycle(int(12_000*took.Seconds()+0.5), took)
		intervals = append(intervals, d)
	}
	last := intervals[len(intervals)-20:]
	for _, d := range last {
		assert.InDelta(t, float64(last[0]), float64(d), float64(40*time.Microsecond), "intervals %v", last)
		assert.Less(t, d, walMinSyncInterval/3)
	}
}
