package core

import (
	"context"
	"time"
)

// ClaimSource is what a store gives Claim, the one claim wait loop: it
// takes what is due now, says when more may be due, and signals changes on
// its Notifier. Every store implements it, and its ClaimJobs is Claim.
type ClaimSource interface {
	// TakeJobs takes up to params.Max due jobs of params.Topic now, fewer
	// under params.InFlightMax (Room) and none while the topic is paused,
	// as ClaimJobs would, but never waits for one (params.Wait is not
	// read; params are checked by Claim). With none taken, Taken says when
	// to look again. Errors: ErrClosed once the store closed, and the
	// store's own (ErrUnavailable).
	TakeJobs(ctx context.Context, params *ClaimJobsParams) (Taken, error)

	// ClaimNotifier returns the notifier on which the store signals its
	// topics' changes: Notify when a job of a topic becomes due, or due
	// sooner than the Next it answered, and when the topic is resumed;
	// Freed when a delivery of it ends; Close when the store closes.
	ClaimNotifier() *Notifier
}

// Taken is the answer of ClaimSource.TakeJobs.
type Taken struct {
	// Jobs taken, reserved; an empty slice, not nil, for none.
	Jobs []*Job
	// Next, when Jobs is empty, is when a job may be due: the earliest
	// run_at or lease expiry the store knows of the topic, or sooner where
	// it cannot signal every change (a shared store held back by
	// InFlightMax looks again within InFlightRecheck). Zero when it knows
	// of none: it will Notify.
	Next time.Time
	// Full says no job was taken because the topic has InFlightMax jobs
	// reserved: a Freed wakes the claim too.
	Full bool
}

// Claim is Store.ClaimJobs over a store's ClaimSource, the one claim wait
// loop: it takes what is due, and with nothing due waits until params.Wait
// runs out, for the earliest of the Next the store answered (on clock, so
// a job due at T is taken at T, not at a poll), a signal of the topic on
// the store's notifier, ctx or the store's close, then takes again. It
// returns an empty slice, not an error, when the wait or ctx ran out.
// Errors: ErrInvalidArgument when params is nil or Max < 1, ErrClosed when
// the store closes, and the store's own.
func Claim(ctx context.Context, src ClaimSource, clock Clock, params *ClaimJobsParams) ([]*Job, error) {
	if params == nil || params.Max < 1 {
		return nil, Invalid("max", "max must be at least 1")
	}
	var deadline, due Timer
	defer func() {
		for _, t := range []Timer{deadline, due} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	notifier := src.ClaimNotifier()
	last := params.Wait <= 0
	for {
		if ctx.Err() != nil {
			return []*Job{}, nil
		}
		// Watched before the take: a change after it wakes this claim.
		w := notifier.Watch(params.Topic)
		taken, err := src.TakeJobs(ctx, params)
		if err != nil || len(taken.Jobs) > 0 || last {
			w.Stop()
			if err != nil {
				return nil, err
			}
			return taken.Jobs, nil
		}
		if deadline == nil {
			deadline = clock.NewTimer(params.Wait)
		}
		var dueAt <-chan time.Time
		if !taken.Next.IsZero() {
			d := max(taken.Next.Sub(clock.Now()), 0)
			if due == nil {
				due = clock.NewTimer(d)
			} else {
				due.Reset(d)
			}
			dueAt = due.Chan()
		}
		woken := w.Due
		if taken.Full {
			woken = w.Freed
		}
		select {
		case <-woken:
		case <-dueAt:
		case <-deadline.Chan():
			last = true // one more take: what became due as the wait ran out
		case <-ctx.Done():
		}
		w.Stop()
		if dueAt != nil && !due.Stop() {
			// A fake clock's timer keeps a fire nobody read: drop it, so
			// that it does not wake the next wait.
			select {
			case <-due.Chan():
			default:
			}
		}
	}
}
