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

// drainPoll is how often WaitSettled looks at the deliveries still held.
const drainPoll = 50 * time.Millisecond

// WaitSettled waits until every delivery this engine's Claim made (for pull
// consumers and subscribers of every transport) has ended: acknowledged,
// nacked or touched to its end here, or its lease run out (a delivery
// settled through another instance counts as held until then); or until
// ctx is done, returning its error. A drain waits for it so that the
// consumers of this instance can settle what they were sent before the
// API stops serving them. After Drain it also waits for the claims that
// were under way when the drain began, and then for what they delivered
// (a claim answered as the drain began was not waited for, its consumer's
// ack then refused by a stopped instance, and the job delivered twice).
func (e *Engine) WaitSettled(ctx context.Context) error {
	t := e.clock.NewTicker(drainPoll)
	defer t.Stop()
	for e.claiming.Load() > 0 || e.leases.held(e.clock.Now()) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.Chan():
		}
	}
	return nil
}

// HeldDeliveries returns how many deliveries this engine's Claim made are
// held now: not yet settled, their leases not run out; what WaitSettled
// waits for, so that a shutdown can say what it waits for.
func (e *Engine) HeldDeliveries() int {
	return e.leases.held(e.clock.Now())
}
