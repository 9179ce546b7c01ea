package natsstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// This file reads the stream layout of delayq's first NATS store (records
// on <prefix>.job.<id> beside nine kinds of wake-up, in <PREFIX>_JOBS), so
// that New can move its jobs into the current layout (Config.Upgrade). It
// stays for one release and goes in the next.

// LegacyStream names the stream of the first layout of a prefix.
func LegacyStream(prefix string) string { return strings.ToUpper(prefix) + "_JOBS" }

// HasLegacyLayout reports whether the prefix still has the first layout's
// stream (one whose subjects include <prefix>.job.*). Errors:
// ErrUnavailable.
func HasLegacyLayout(ctx context.Context, js jetstream.JetStream, prefix string) (bool, error) {
	st, err := js.Stream(ctx, LegacyStream(prefix))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, unavailable("look for the first layout", err)
	}
	return slices.Contains(st.CachedInfo().Config.Subjects, prefix+".job.*"), nil
}

// ExportLegacy passes fn every job of the first layout's stream that is not
// finished as of now, as GetJob showed it there, each id once, in stream
// order of the records. Errors: fn's, ErrUnavailable.
func ExportLegacy(ctx context.Context, nc *nats.Conn, prefix string, now time.Time, fn func(*core.Job) error) error {
	sent := make(map[string]struct{})
	return scan(ctx, nc, LegacyStream(prefix), prefix+".job.*", time.Time{}, func(m *nats.Msg, _ uint64) (bool, error) {
		j, err := decodeRecord(m.Data)
		if err != nil {
			return false, fmt.Errorf("natsstore: first layout: record %s: %w", m.Subject, err)
		}
		if _, dup := sent[j.ID]; dup {
			return true, nil
		}
		j.AsOf(now)
		if j.State.Finished() {
			return true, nil
		}
		sent[j.ID] = struct{}{}
		return true, fn(j)
	})
}

// upgrade moves the jobs of the first layout into the store (as ImportJobs
// would: a reserved job ready, ids in use skipped, so a move cut short may
// run again) and then deletes the first layout's stream.
func (s *Store) upgrade(ctx context.Context) error {
	var batch []*core.Job
	moved, skipped := 0, 0
	flush := func() error {
		done, err := s.ImportJobs(ctx, batch)
		if err != nil {
			return err
		}
		for _, ok := range done {
			if ok {
				moved++
			} else {
				skipped++
			}
		}
		batch = batch[:0]
		return nil
	}
	err := ExportLegacy(ctx, s.nc, s.cfg.Prefix, s.now(), func(j *core.Job) error {
		if batch = append(batch, j); len(batch) == importBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("natsstore: move the first layout's jobs: %w", err)
	}
	if err := s.js.DeleteStream(ctx, LegacyStream(s.cfg.Prefix)); err != nil {
		return unavailable("delete the first layout's stream", err)
	}
	s.log.Info("natsstore: moved the jobs of the first stream layout", "stream", LegacyStream(s.cfg.Prefix), "moved", moved, "skipped", skipped)
	return nil
}
