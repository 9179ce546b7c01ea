package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/keyring"
	"github.com/delayq/delayq/transports/wire"
)

// ExportOptions are the options of Service.Export.
type ExportOptions struct {
	// Plaintext asks for the bodies in clear from a store with encryption
	// at rest, whose export otherwise seals them (Config.Encryption).
	Plaintext bool
}

// Export passes every schedule to schedule, then every scheduled, ready,
// reserved and dead job to job, those of the caller's topics for a token
// restricted to some; an error of either ends it. With encryption at rest
// the job bodies and the schedules' come sealed with the current key
// (keyring.Ring.SealBody), unless opts.Plaintext. Errors: also
// errors.ErrUnsupported when the backend cannot export, the store's.
func (s *Service) Export(ctx context.Context, opts ExportOptions, schedule func(*core.Schedule) error, job func(*core.Job) error) error {
	var ring *keyring.Ring
	if s.encryption != nil && !opts.Plaintext {
		ring = s.encryption.Ring()
	}
	schedules, err := s.ListSchedules(ctx)
	for _, sc := range schedules {
		if ring != nil {
			sc.Job.Body = ring.SealBody(keyring.ScheduleBodyID(sc.Name), sc.Job.Body)
		}
		if err = schedule(sc); err != nil {
			break
		}
	}
	if err == nil {
		err = s.engine.Export(ctx, func(j *core.Job) error {
			if !Allows(ctx, j.Topic) {
				return nil
			}
			if ring != nil {
				j.Body = ring.SealBody(j.ID, j.Body)
			}
			return job(j)
		})
	}
	return Describe(err, errors.ErrUnsupported, "export is not supported by this backend")
}

// openImported replaces a body an export sealed (Export) by its
// plaintext, for the job or schedule of id. Errors: a *core.FieldError of
// body when it does not open, or encryption is off.
func (s *Service) openImported(id string, body []byte) ([]byte, error) {
	key, sealed := keyring.BodyKey(body)
	if !sealed {
		return body, nil
	}
	if s.encryption == nil {
		return nil, core.Invalid("body", "the body is sealed with key %q and encryption at rest is off: import it into a delayq started with --encryption-keys holding that key", key)
	}
	plain, err := s.encryption.Ring().OpenBody(id, body)
	if err != nil {
		return nil, core.Invalid("body", "%v", err)
	}
	return plain, nil
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
// be a token for every topic (AllowImportedID); a body an export sealed
// is opened, in place. Errors wrap wire.ErrPermissionDenied, or are a
// *core.FieldError of a body that does not open.
func (s *Service) CheckImport(ctx context.Context, j *core.Job) error {
	if err := s.AllowTopic(ctx, j.Topic); err != nil {
		return err
	}
	if err := AllowImportedID(ctx, j.ID); err != nil {
		return err
	}
	body, err := s.openImported(j.ID, j.Body)
	j.Body = body
	return err
}

// ImportSchedule imports sc: false when a schedule of its name exists
// (skipped). A token restricted to some topics may import only theirs.
// Errors: wire.ErrPermissionDenied, the engine's.
func (s *Service) ImportSchedule(ctx context.Context, sc *core.Schedule) (bool, error) {
	if err := s.AllowTopic(ctx, sc.Topic); err != nil {
		return false, err
	}
	body, err := s.openImported(keyring.ScheduleBodyID(sc.Name), sc.Job.Body)
	if err != nil {
		return false, err
	}
	sc.Job.Body = body
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
