package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Allows reports whether the caller of ctx may use topic: without an
// identity, or with a token whose patterns match it. Listings keep only
// what it allows, and a conflict shows its existing job only when it
// allows the job's topic (ids are shared by every topic).
func Allows(ctx context.Context, topic string) bool {
	id := IdentityFrom(ctx)
	return id == nil || id.AllowsTopic(topic)
}

// Visible is e as the caller of ctx may see it: a conflict's existing job
// only when Allows its topic, since ids are shared by every topic and a
// job's body is not every caller's to read. Both APIs answer errors
// through it.
func Visible(ctx context.Context, e wire.Error) wire.Error {
	if e.Job != nil && !Allows(ctx, e.Job.Topic) {
		e.Job = nil
	}
	return e
}

// keepAllowed returns the items of list whose topic the caller of ctx may
// use, in list's array.
func keepAllowed[T any](ctx context.Context, list []T, topic func(T) string) []T {
	out := list[:0]
	for _, it := range list {
		if Allows(ctx, topic(it)) {
			out = append(out, it)
		}
	}
	return out
}

// AllowTopic returns nil when the caller of ctx may use topic, else an
// error wrapping wire.ErrPermissionDenied.
func (s *Service) AllowTopic(ctx context.Context, topic string) error {
	id := IdentityFrom(ctx)
	if id == nil || id.AllowsTopic(topic) {
		return nil
	}
	s.log.Info("service: permission denied", "token", id.Name, "topic", topic)
	return wire.WithMessage(fmt.Sprintf("token %q may not use topic %q", id.Name, topic), wire.ErrPermissionDenied)
}

// AllowPush returns nil when the caller of ctx may use p's topic and
// every topic its next steps name (p.Then, and theirs), else an error
// wrapping wire.ErrPermissionDenied.
func (s *Service) AllowPush(ctx context.Context, p *core.PushParams) error {
	if err := s.AllowTopic(ctx, p.Topic); err != nil {
		return err
	}
	for step := p.Then; step != nil; step = step.Then {
		if !Allows(ctx, step.Topic) {
			id := IdentityFrom(ctx)
			s.log.Info("service: permission denied", "token", id.Name, "topic", step.Topic)
			return wire.WithMessage(fmt.Sprintf("token %q may name in then only topics it may use, not %q", id.Name, step.Topic), wire.ErrPermissionDenied)
		}
	}
	return nil
}

// AllowJob returns nil when the caller of ctx may use the topic of the
// stored job jobID, when no such job exists (left to the operation, which
// answers not found or creates it), or when its token is not restricted to
// some topics, which skips the read. Otherwise it returns an error
// wrapping wire.ErrPermissionDenied, or the store's error.
func (s *Service) AllowJob(ctx context.Context, jobID string) error {
	id := IdentityFrom(ctx)
	if id == nil || !id.Restricted() {
		return nil
	}
	job, err := s.engine.Get(ctx, jobID)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if id.AllowsTopic(job.Topic) {
		return nil
	}
	// The message names the job, which the caller gave, and not its
	// topic, which is not the caller's to learn.
	s.log.Info("service: permission denied", "token", id.Name, "topic", job.Topic)
	return wire.WithMessage(fmt.Sprintf("token %q may not use job %q", id.Name, job.ID), wire.ErrPermissionDenied)
}

// AllowIntake takes n jobs from the intake quota of the caller of ctx
// (none without an identity or for a token without a quota), all or none,
// so that a refused batch stores nothing. Over the quota it returns a
// *wire.RateLimitError (rate_limited, with how long to wait); more jobs
// than the token's burst, which no wait would allow, a *core.FieldError
// wrapping core.ErrTooLarge on jobs. Every operation that takes jobs calls
// it, so that one quota holds whichever way jobs come.
func (s *Service) AllowIntake(ctx context.Context, n int) error {
	id := IdentityFrom(ctx)
	if id == nil {
		return nil
	}
	if burst, ok := id.IntakeBurst(); ok && n > burst {
		return core.TooLarge("jobs", "token %q may send at most %d jobs at once (its intake_burst), not %d", id.Name, burst, n)
	}
	wait, ok := id.AllowIntake(n)
	if ok {
		return nil
	}
	s.log.Info("service: intake quota exceeded", "token", id.Name, "jobs", n, "wait", wait)
	return &wire.RateLimitError{
		Message:    fmt.Sprintf("token %q is over its intake quota: %d more jobs are allowed in %s", id.Name, n, wait.Round(time.Millisecond)),
		RetryAfter: wait,
	}
}

// AllowDelivery checks what a token restricted to some topics may configure
// of a topic's delivery, since it reaches beyond its topics: it returns an
// error wrapping wire.ErrPermissionDenied when t names an on_dead or
// events.topic topic the token may not use (where the topic's notices or
// events would put jobs), sets
// delivery.error_body (which would show it the answers of whatever service
// its webhook names), sets delivery.success (whose verdict, seen in each
// job's outcome, tells what the answer holds, a bit per topic), or names a
// NATS delivery.subject that is neither delayq.deliver.<topic> of a topic
// the token may use nor matched by one of Config.NATSDeliverySubjects
// (--nats-delivery-subjects), or names a delivery.kafka_topic that no
// pattern of Config.KafkaDeliveryTopics (--kafka-delivery-topics)
// matches. A delivery.error_body or delivery.success
// that t keeps as engine has them for the topic, with the same
// destination, passes: the token chose neither, and learns nothing its
// jobs' outcomes did not tell it (a form that sends the whole topic back
// to change its rate, say). A caller without identity and tokens for every topic pass. The
// messages name no subject or topic, so that a refusal tells nothing of
// what others configured. Subjects delayq keeps for itself are refused to
// every token by the NATS deliverer. Errors: also the engine's, reading
// the topic.
func (s *Service) AllowDelivery(ctx context.Context, t *core.Topic) error {
	id := IdentityFrom(ctx)
	if id == nil || !id.Restricted() {
		return nil
	}
	if t.OnDead != "" && !id.AllowsTopic(t.OnDead) {
		return wire.WithMessage(fmt.Sprintf("token %q may name as on_dead only a topic it may use", id.Name), wire.ErrPermissionDenied)
	}
	if t.Events.Topic != "" && !id.AllowsTopic(t.Events.Topic) {
		return wire.WithMessage(fmt.Sprintf("token %q may name as events.topic only a topic it may use", id.Name), wire.ErrPermissionDenied)
	}
	if t.Delivery.ErrorBody || t.Delivery.Success != "" {
		kept, err := keepsAnswerFields(ctx, s.engine, t)
		if err != nil {
			return err
		}
		switch {
		case kept:
		case t.Delivery.ErrorBody:
			return wire.WithMessage(fmt.Sprintf("token %q may not set delivery.error_body: only a token for every topic may", id.Name), wire.ErrPermissionDenied)
		default:
			return wire.WithMessage(fmt.Sprintf("token %q may not set delivery.success: only a token for every topic may", id.Name), wire.ErrPermissionDenied)
		}
	}
	if t.Delivery.Type == core.DeliveryKafka {
		return s.allowKafkaTopic(id, t.Delivery.KafkaTopic)
	}
	subject := t.Delivery.Subject
	if t.Delivery.Type != core.DeliveryNATS || subject == "" {
		return nil
	}
	if topic, ok := strings.CutPrefix(subject, natsDeliverPrefix); ok && core.ValidateTopicName(topic) == nil && id.AllowsTopic(topic) {
		return nil
	}
	for _, p := range s.natsSubjects {
		if auth.MatchTopic(p, subject) {
			return nil
		}
	}
	return wire.WithMessage(fmt.Sprintf("token %q may name as delivery.subject only %s<topic> of a topic it may use, or a subject the server allows (--nats-delivery-subjects)", id.Name, natsDeliverPrefix), wire.ErrPermissionDenied)
}

// allowKafkaTopic lets the restricted token of id name kafkaTopic as a
// delivery.kafka_topic when one of Config.KafkaDeliveryTopics matches it:
// a Kafka topic is shared with whatever else reads and writes it, so no
// name is the token's own.
func (s *Service) allowKafkaTopic(id *auth.Identity, kafkaTopic string) error {
	for _, p := range s.kafkaTopics {
		if auth.MatchTopic(p, kafkaTopic) {
			return nil
		}
	}
	return wire.WithMessage(fmt.Sprintf("token %q may name as delivery.kafka_topic only a Kafka topic the server allows (--kafka-delivery-topics)", id.Name), wire.ErrPermissionDenied)
}

// AllowImportedID checks the id of a job an import brings for the caller of ctx: an id of the
// engine's derived forms (core.IsDerivedID: a unique key's, a schedule
// slot's, a notice's) is taken only from a token for every topic, since
// such an id in one topic blocks the key, slot or notice it stands for in
// another, and whether it was skipped would tell that the other's job
// exists. It returns an error wrapping wire.ErrPermissionDenied otherwise. A
// caller without identity (the API without tokens) and tokens for every topic pass; the
// engine still checks that a k- id is the job's own key's id.
func AllowImportedID(ctx context.Context, jobID string) error {
	id := IdentityFrom(ctx)
	if id == nil || !id.Restricted() || !core.IsDerivedID(jobID) {
		return nil
	}
	return wire.WithMessage(fmt.Sprintf("token %q may not import a job whose id has the form k-, s-, n-, e- or c- and 32 hex digits (delayq's own ids): only a token for every topic may", id.Name), wire.ErrPermissionDenied)
}

// natsDeliverPrefix is what a topic's default NATS delivery subject adds
// to its name.
var natsDeliverPrefix = core.Topic{Delivery: core.Delivery{Type: core.DeliveryNATS}}.WithDefaults().Delivery.Subject

// keepsAnswerFields reports whether t has the delivery.error_body and
// delivery.success of the topic as configured now, with the same
// destination: type, method, URL and subject, and allow_job_url, without
// which a kept condition would judge the answers of whatever URL a job
// names.
func keepsAnswerFields(ctx context.Context, engine *core.Engine, t *core.Topic) (bool, error) {
	stored, err := engine.GetTopic(ctx, t.Name)
	if errors.Is(err, core.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	now, want := stored.WithDefaults().Delivery, t.WithDefaults().Delivery
	return stored.Configured && now.Type == want.Type && now.Method == want.Method && now.URL == want.URL &&
		now.Subject == want.Subject && now.AllowJobURL == want.AllowJobURL &&
		now.ErrorBody == want.ErrorBody && now.Success == want.Success, nil
}
