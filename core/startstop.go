package core

import (
	"context"
	"errors"
	"sync"
)

// startStop is the life cycle of one of the engine's background services
// (River's startstop is the model): start runs the service's loop in a
// goroutine under a context of its own, once; stop cancels that context
// and waits for the loop to return. No context is kept: only the cancel
// and a channel closed when the loop returned.
type startStop struct {
	// wake asks the loop to run a round now (nudge), when its owner made it.
	wake chan struct{}

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// errStarted answers a second start, or a start after stop.
var errStarted = errors.New("core: already started or stopped")

// start runs loop in a goroutine with a context that keeps ctx's values
// but not its cancellation (stop ends it), and returns at once.
func (s *startStop) start(ctx context.Context, loop func(ctx context.Context)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return errStarted
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		loop(ctx)
	}()
	return nil
}

// stop cancels the loop's context and waits until the loop returned or
// ctx is done, returning ctx's error then; the loop still ends later, and
// wait waits for it. Idempotent; safe before start.
func (s *startStop) stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait waits until the loop returned; at once when it never started.
func (s *startStop) wait() {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// nudge asks the loop to run a round now; a nudge while one is pending,
// or before start, is dropped.
func (s *startStop) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
