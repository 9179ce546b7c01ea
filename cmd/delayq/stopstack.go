package main

import (
	"context"
	"log/slog"
	"time"
)

// stopStack holds the stops of what runServe started, to run last pushed
// first under one deadline: a start that fails part way and the shutdown
// after a signal unwind the same way, so that each stop is written once.
type stopStack struct {
	log   *slog.Logger
	steps []stopStep
}

// stopStep is one stop of a stopStack.
type stopStep struct {
	// failed is what the log says, at warn level with the error, when stop
	// returns one.
	failed string
	stop   func(ctx context.Context) error
}

// push adds a stop, to run before those pushed earlier.
func (s *stopStack) push(failed string, stop func(ctx context.Context) error) {
	s.steps = append(s.steps, stopStep{failed: failed, stop: stop})
}

// pushFunc adds a stop that takes no deadline and cannot fail.
func (s *stopStack) pushFunc(stop func()) {
	s.push("", func(context.Context) error { stop(); return nil })
}

// unwind runs every stop, last pushed first, within timeout in all, and
// empties the stack. A stop whose time ran out still runs the stops after
// it, which then get a done context.
func (s *stopStack) unwind(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for i := len(s.steps) - 1; i >= 0; i-- {
		if err := s.steps[i].stop(ctx); err != nil {
			s.log.Warn(s.steps[i].failed, "err", err)
		}
	}
	s.steps = nil
}
