package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/delayq/delayq/core"
)

// Pauses between the tries of waitForBackend: doubled from the first up
// to the last.
const (
	backendRetryFirst = 250 * time.Millisecond
	backendRetryMax   = 5 * time.Second
)

// waitForBackend calls open until it returns a store, fails with an error
// that is not core.ErrUnavailable, or wait (0: no retry) would pass before
// the next try, logging each unavailable try: a backend that is starting
// or electing a leader as delayq starts (a Redis loading its data, a NATS
// stream whose leader was just restarted) is waited for rather than exited
// on. A shutdown (ctx done) ends the wait with the last error.
func waitForBackend[S any](ctx context.Context, log *slog.Logger, wait time.Duration, open func() (S, error)) (S, error) {
	deadline := time.Now().Add(wait)
	pause := backendRetryFirst
	for try := 1; ; try++ {
		s, err := open()
		if err == nil || !errors.Is(err, core.ErrUnavailable) || time.Now().Add(pause).After(deadline) {
			return s, err
		}
		log.Warn("backend unavailable at start: trying again", "try", try, "in", pause, "until", deadline.UTC().Format(time.RFC3339), "err", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return s, err
		case <-t.C:
		}
		pause = min(2*pause, backendRetryMax)
	}
}
