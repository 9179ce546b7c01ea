package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/delayq/delayq/keyring"
	"github.com/delayq/delayq/transports/wire"
)

// Rekey runs a page of re-encryption with the current key
// (keyring.Store.Rekey) and logs what it did. It needs an admin token not
// restricted to topics, since it goes over every topic's jobs. Errors:
// wire.ErrPermissionDenied; errors.ErrUnsupported when encryption at rest
// is off, or the backend cannot rewrite a job's body; those of Rekey.
func (s *Service) Rekey(ctx context.Context, params *keyring.RekeyParams) (keyring.RekeyPage, error) {
	if id := IdentityFrom(ctx); id != nil && id.Restricted() {
		s.log.Info("service: permission denied", "token", id.Name, "op", OpRekey, "reason", "restricted to topics")
		return keyring.RekeyPage{}, wire.WithMessage(fmt.Sprintf(
			"token %q is restricted to topics, and rekey goes over the jobs of every topic: it needs an admin token without topic patterns", id.Name),
			wire.ErrPermissionDenied)
	}
	if s.encryption == nil {
		return keyring.RekeyPage{}, wire.WithMessage("encryption at rest is off: start delayq with --encryption-keys", errors.ErrUnsupported)
	}
	page, err := s.encryption.Rekey(ctx, params)
	err = Describe(err, errors.ErrUnsupported, "this backend cannot rewrite a job's body in place: its topics and schedules were re-encrypted (%d), its jobs keep the key they were sealed with until they finish", page.Records)
	s.log.Info("rekey: page", "current_key", s.encryption.Ring().Current(), "scanned", page.Scanned, "rekeyed", page.Rekeyed,
		"changed", page.Changed, "records", page.Records, "more", page.Next != "", "err", err)
	return page, err
}
