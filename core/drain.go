package core

import (
	"context"
	"fmt"
	"time"
)

// ErrDraining answers claims on an engine that drains (Engine.Drain): the
// instance is shutting down, and a consumer should claim from another.
var ErrDraining = fmt.Errorf("%w: draining: this instance is shutting down; claim from another", ErrUnavailable)

// Drain is the first step of a graceful shutdown: from now on Claim (the
// claims of pull consumers and subscribers of every transport) answers
// ErrDraining, claims waiting in Claim return what they have, and Ready
// reports ErrDraining, so that consumers and load balancers turn to other
// instances. Everything else goes on: pushes, reads, and the acks, nacks
// and touches of deliveries already made, so that they can finish here.
// Stop then stops the push deliveries, letting those in flight finish. It
// is idempotent.
func (e *Engine) Drain() {
	e.draining.Store(true)
	e.cancelDrain()
}

// DrainPoll is how often a transport waiting for its consumers to settle
// what they hold during a drain looks again (AwaitSettled).
const DrainPoll = 50 * time.Millisecond

// AwaitSettled waits until holding reports false or ctx is done, looking
// every DrainPoll on clock: a transport's wait, during a drain, for the
// deliveries its subscribers hold to be acknowledged (or their leases to
// run out) before the shutdown closes them and releases the rest. It
// returns ctx's error when ctx ended first.
func AwaitSettled(ctx context.Context, clock Clock, holding func(now time.Time) bool) error {
	t := clock.NewTicker(DrainPoll)
	defer t.Stop()
	for holding(clock.Now()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.Chan():
		}
	}
	return nil
}
