package keyring

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/core"
)

// Bounds of Verify's sample.
const (
	// verifyTopics is how many topics Verify reads jobs of.
	verifyTopics = 50
	// verifyJobs is how many jobs of each state of a topic it reads.
	verifyJobs = 4
)

// Verify reads a sample of what the store holds through the ring: every
// topic configuration and schedule, and the first jobs of each state of
// the first topics, so that a ring that lacks a key the store's data was
// sealed with is an error at start rather than at delivery. Plaintext
// (written before encryption was switched on) passes. Errors: a
// *KeyError naming the key and what it sealed, those of the store.
func (s *Store) Verify(ctx context.Context) error {
	for _, kind := range []string{core.KindTopic, core.KindSchedule} {
		if _, err := s.ListRecords(ctx, kind); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
	}
	topics, err := s.ListTopicStates(ctx)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, t := range topics[:min(len(topics), verifyTopics)] {
		for _, st := range core.States {
			if _, err := s.ListJobs(ctx, &core.ListJobsParams{Topic: t.Name, State: st, Limit: verifyJobs}); err != nil {
				return fmt.Errorf("verify: topic %q, %s jobs: %w", t.Name, st, err)
			}
		}
	}
	return nil
}
