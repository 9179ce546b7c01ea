package client

import (
	"math/rand/v2"
	"time"
)

// backoff is the pause before a reconnection: doubling from min to max,
// each pause drawn from its upper half.
type backoff struct {
	min, max, cur time.Duration
	// randN returns a number in [0, n); math/rand/v2 when nil.
	randN func(n int64) int64
}

// reset starts the pauses over from min.
func (b *backoff) reset() { b.cur = 0 }

// next returns the next pause and doubles the following one.
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	}
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	return d/2 + time.Duration(b.rand(int64(d/2)+1))
}

func (b *backoff) rand(n int64) int64 {
	if b.randN != nil {
		return b.randN(n)
	}
	return randN(n)
}

// randN returns a uniform number in [0, n).
func randN(n int64) int64 { return rand.Int64N(n) }

// touchInterval is how long to wait before touching a lease that expires
// in remaining: half of it, at least touchMinInterval.
func touchInterval(remaining time.Duration) time.Duration {
	return max(remaining/2, touchMinInterval)
}
