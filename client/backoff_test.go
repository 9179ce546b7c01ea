package client

import (
	"testing"
	"time"
)

// TestBackoff checks the reconnection pauses: doubling from min to max,
// each within the upper half of its step, and back to min after reset.
func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, r := range []struct {
		name  string
		randN func(int64) int64
		want  []time.Duration
	}{
		{"lowest", func(int64) int64 { return 0 },
			[]time.Duration{50, 100, 200, 400, 500, 500}},
		{"highest", func(n int64) int64 { return n - 1 },
			[]time.Duration{100, 200, 400, 800, 1000, 1000}},
	} {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			b := backoff{min: 100 * time.Millisecond, max: time.Second, randN: r.randN}
			for i, want := range r.want {
				if got := b.next(); got != want*time.Millisecond {
					t.Fatalf("pause %d = %s, want %s", i, got, want*time.Millisecond)
				}
			}
			b.reset()
			if got := b.next(); got > 100*time.Millisecond || got < 50*time.Millisecond {
				t.Fatalf("after reset: %s, want 50ms to 100ms", got)
			}
		})
	}
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	for range 100 {
		if d := b.next(); d < 50*time.Millisecond || d > time.Second {
			t.Fatalf("pause %s out of [50ms, 1s]", d)
		}
	}
}

// TestTouchInterval checks that a lease is touched at half its remaining
// time, never more often than touchMinInterval.
func TestTouchInterval(t *testing.T) {
	t.Parallel()
	for remaining, want := range map[time.Duration]time.Duration{
		30 * time.Second:       15 * time.Second,
		time.Second:            500 * time.Millisecond,
		150 * time.Millisecond: touchMinInterval,
		-time.Second:           touchMinInterval,
	} {
		if got := touchInterval(remaining); got != want {
			t.Errorf("touchInterval(%s) = %s, want %s", remaining, got, want)
		}
	}
}
