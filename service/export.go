package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Export passes every schedule to schedule, then every scheduled, ready,
// reserved and dead job to job, those of the caller's topics for a token
// restricted to some; an error of either ends it. Errors: also
// errors.ErrUnsupported when the backend cannot export, the store's.
func (s *Service) Export(ctx context.Context, schedule func(*core.Schedule) error, job func(*core.Job) error) error {
	schedules, err := s.ListSchedules(ctx)
	for _, sc := range schedules {
		if err = schedule(sc); err != nil {
			break
		}
	}
	if err == nil {
		err = s.engine.Export(ctx, func(j *core.Job) error {
			if !Allows(ctx, j.Topic) {
				return nil
			}
			return job(j)
		})
	}
	return Describe(err, errors.ErrUnsupported, "export is not supported by this backend")
}

// Import imports jobs, each checked by CheckImport first, and says of each
// whether it was imported or skipped (its id was in use), or why it
// failed. An empty call asks only whether the backend can import. Errors:
// errors.ErrUnsupported when it cannot, the store's.
func (s *Service) Import(ctx context.Context, jobs []*core.Job) ([]core.ImportResult, error) {
	res, err := s.engine.Import(ctx, jobs)
	return res, Describe(err, errors.ErrUnsupported, "import is not supported by this backend")
}

// CheckImport checks a job an import brings before Import: the caller
// must be allowed its topic and, for an id of the engine's derived forms,
// be a token for every topic (AllowImportedID). Errors wrap
// wire.ErrPermissionDenied.
func (s *Service) CheckImport(ctx context.Context, j *core.Job) error {
	if err := s.AllowTopic(ctx, j.Topic); err != nil {
		return err
	}
	return AllowImportedID(ctx, j.ID)
}

// ImportSchedule imports sc: false when a schedule of its name exists
// (skipped). A token restricted to some topics may import only theirs.
// Errors: wire.ErrPermissionDenied, the engine's.
func (s *Service) ImportSchedule(ctx context.Context, sc *core.Schedule) (bool, error) {
	if err := s.AllowTopic(ctx, sc.Topic); err != nil {
		return false, err
	}
	return s.engine.ImportSchedule(ctx, sc)
}

// AllowBackup refuses a token restricted to topics, since a backup holds
// the jobs of every topic: an error wrapping wire.ErrPermissionDenied.
func (s *Service) AllowBackup(ctx context.Context) error {
	id := IdentityFrom(ctx)
	if id == nil || !id.Restricted() {
		return nil
	}
	s.log.Info("service: permission denied", "token", id.Name, "op", OpBackup, "reason", "restricted to topics")
	return wire.WithMessage(fmt.Sprintf(
		"token %q is restricted to topics, and a backup holds the jobs of every topic: it needs an admin token without topic patterns", id.Name),
		wire.ErrPermissionDenied)
}
