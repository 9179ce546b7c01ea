package redisstore

import (
	"context"
	"errors"

	"github.com/delayq/delayq/core"
)

// ListJobs implements core.Store; not yet.
func (s *Store) ListJobs(context.Context, *core.ListJobsParams) (core.JobPage, error) {
	return core.JobPage{}, errors.New("redisstore: list jobs: not implemented yet")
}
