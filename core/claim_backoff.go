package core

import (
	"context"
	"time"
)

// ClaimBackoff paces a loop that claims jobs (the engine's dispatchers, a
// WebSocket subscriber's claim loop) while its claims fail, so that a store
// that is down is not asked again in a tight loop: it waits 100ms after the
// first failure in a row, doubling to 3.2s from the sixth on. The zero
// value is not usable; make one with NewClaimBackoff. A ClaimBackoff
// belongs to one loop and is not safe for concurrent use.
type ClaimBackoff struct {
	clock    Clock
	failures int
}

// NewClaimBackoff returns a ClaimBackoff that waits on clock.
func NewClaimBackoff(clock Clock) *ClaimBackoff { return &ClaimBackoff{clock: clock} }

// Failed counts a failed claim and returns how long Wait will wait before
// the next one, for the caller to log.
func (b *ClaimBackoff) Failed() time.Duration {
	b.failures++
	return b.delay()
}

// Wait waits the pause after the failures counted so far, and reports
// false when ctx ended first.
func (b *ClaimBackoff) Wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-b.clock.After(b.delay()):
		return true
	}
}

// Succeeded forgets the failures counted, after a claim that worked.
func (b *ClaimBackoff) Succeeded() { b.failures = 0 }

// delay is the pause after b.failures failures in a row.
func (b *ClaimBackoff) delay() time.Duration {
	return time.Duration(1<<min(b.failures, 6)) * 50 * time.Millisecond
}
