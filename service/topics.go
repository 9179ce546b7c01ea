package service

import (
	"context"

	"github.com/delayq/delayq/core"
)

// ListTopics returns every topic that is configured, paused or has jobs,
// sorted by name; for a token restricted to some topics, only those.
func (s *Service) ListTopics(ctx context.Context) ([]*core.Topic, error) {
	ts, err := s.engine.ListTopics(ctx)
	return keepAllowed(ctx, ts, func(t *core.Topic) string { return t.Name }), err
}

// GetTopic reads a topic with its counts. Errors: core.ErrNotFound naming
// it when it is neither configured, paused nor has jobs,
// wire.ErrPermissionDenied.
func (s *Service) GetTopic(ctx context.Context, name string) (*core.Topic, error) {
	if err := s.AllowTopic(ctx, name); err != nil {
		return nil, err
	}
	t, err := s.engine.GetTopic(ctx, name)
	return t, Describe(err, core.ErrNotFound, "topic %q not found", name)
}

// PutTopic stores t's configuration and returns the topic as GetTopic
// shows it (as stored when that read fails). Errors: the engine's naming
// the field, wire.ErrPermissionDenied for a topic not the caller's or what
// AllowDelivery refuses.
func (s *Service) PutTopic(ctx context.Context, t *core.Topic) (*core.Topic, error) {
	if err := s.AllowTopic(ctx, t.Name); err != nil {
		return nil, err
	}
	if err := s.allowDelivery(ctx, t); err != nil {
		return nil, err
	}
	if err := s.engine.PutTopic(ctx, t); err != nil {
		return nil, err
	}
	return s.readBack(ctx, t), nil
}

// UpdateTopic changes the configuration of the topic called name with
// change (PATCH), which gets the configuration as stored and returns the
// new one; that is checked as PutTopic checks its topic. It returns the
// topic as GetTopic shows it. Errors: core.ErrNotFound for a topic with
// neither jobs nor configuration, change's, and PutTopic's.
func (s *Service) UpdateTopic(ctx context.Context, name string, change func(*core.Topic) (*core.Topic, error)) (*core.Topic, error) {
	if err := s.AllowTopic(ctx, name); err != nil {
		return nil, err
	}
	var stored *core.Topic
	err := s.engine.UpdateTopic(ctx, name, func(cur *core.Topic) (*core.Topic, error) {
		t, err := change(cur)
		if err != nil {
			return nil, err
		}
		t.Name = name
		if err := s.allowDelivery(ctx, t); err != nil {
			return nil, err
		}
		stored = t
		return t, nil
	})
	if err != nil {
		return nil, Describe(err, core.ErrNotFound, "topic %q not found", name)
	}
	return s.readBack(ctx, stored), nil
}

// allowDelivery is AllowDelivery, with the refusal logged.
func (s *Service) allowDelivery(ctx context.Context, t *core.Topic) error {
	err := s.AllowDelivery(ctx, t)
	if err != nil {
		if id := IdentityFrom(ctx); id != nil {
			s.log.Info("service: permission denied", "token", id.Name, "topic", t.Name, "on_dead", t.OnDead, "delivery.subject", t.Delivery.Subject, "err", err)
		}
	}
	return err
}

// readBack returns the topic t was stored as, with its counts, or t when
// that read fails.
func (s *Service) readBack(ctx context.Context, t *core.Topic) *core.Topic {
	stored, err := s.engine.GetTopic(ctx, t.Name)
	if err != nil {
		// Stored, but the read for counts failed: answer what was stored.
		s.log.Warn("service: reading a topic back after put failed", "topic", t.Name, "err", err)
		stored = t
		stored.Configured = true
	}
	return stored
}

// DeleteTopic drops a topic's configuration; its jobs stay. Errors:
// core.ErrNotFound when it had none, wire.ErrPermissionDenied.
func (s *Service) DeleteTopic(ctx context.Context, name string) error {
	if err := s.AllowTopic(ctx, name); err != nil {
		return err
	}
	return Describe(s.engine.DeleteTopic(ctx, name), core.ErrNotFound, "topic %q has no configuration", name)
}

// SetTopicPaused stops (paused) or starts again a topic's deliveries on
// every instance, and returns the topic as GetTopic shows it. Idempotent.
// Errors: the engine's for a bad name, wire.ErrPermissionDenied.
func (s *Service) SetTopicPaused(ctx context.Context, name string, paused bool) (*core.Topic, error) {
	if err := s.AllowTopic(ctx, name); err != nil {
		return nil, err
	}
	if err := s.engine.SetTopicPaused(ctx, name, paused); err != nil {
		return nil, err
	}
	t, err := s.engine.GetTopic(ctx, name)
	if err != nil {
		// Done, but the read back failed (or, resumed, the topic has
		// neither jobs nor configuration): answer what is known.
		t = &core.Topic{Name: name, Paused: paused}
	}
	return t, nil
}

// ListDead lists up to p.Limit dead jobs of p.Topic, oldest death first.
// Errors: the engine's for a bad topic or limit, wire.ErrPermissionDenied,
// and, as GetTopic answers, core.ErrNotFound for a topic with neither jobs
// nor configuration (a typo reads as one, not as a topic without dead
// jobs).
func (s *Service) ListDead(ctx context.Context, p *core.ListDeadJobsParams) ([]*core.Job, error) {
	if err := s.AllowTopic(ctx, p.Topic); err != nil {
		return nil, err
	}
	jobs, err := s.engine.ListDead(ctx, p)
	if err != nil || len(jobs) > 0 {
		return jobs, err
	}
	if _, err := s.engine.GetTopic(ctx, p.Topic); err != nil {
		return nil, Describe(err, core.ErrNotFound, "topic %q not found", p.Topic)
	}
	return jobs, nil
}
