package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
)

// AllowIntake takes n jobs from the intake quota of id (none for a nil id,
// the API without tokens, or a token without a quota), all or none, so that
// a refused batch stores nothing. Over the quota it returns a
// *RateLimitError (rate_limited, with how long to wait); more jobs than the
// token's burst, which no wait would allow, a *core.FieldError wrapping
// core.ErrTooLarge on jobs. Every transport that takes jobs with a token
// calls it, so that one quota holds whichever way jobs come.
func AllowIntake(id *auth.Identity, n int) error {
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
	return &RateLimitError{
		Message:    fmt.Sprintf("token %q is over its intake quota: %d more jobs are allowed in %s", id.Name, n, wait.Round(time.Millisecond)),
		RetryAfter: wait,
	}
}

// AllowDelivery checks what a token restricted to some topics may configure
// of a topic's delivery, since it reaches beyond its topics: it returns an
// error wrapping ErrPermissionDenied when t names an on_dead topic the token
// may not use (where the topic's notices would put jobs), sets
// delivery.error_body (which would show it the answers of whatever service
// its webhook names), sets delivery.success (whose verdict, seen in each
// job's outcome, tells what the answer holds, a bit per topic), or names a
// NATS delivery.subject that is neither delayq.deliver.<topic> of a topic
// the token may use nor matched by one of natsSubjects
// (--nats-delivery-subjects). A delivery.error_body or delivery.success
// that t keeps as engine has them for the topic, with the same
// destination, passes: the token chose neither, and learns nothing its
// jobs' outcomes did not tell it (a form that sends the whole topic back
// to change its rate, say). A nil id and tokens for every topic pass. The
// messages name no subject or topic, so that a refusal tells nothing of
// what others configured. Subjects delayq keeps for itself are refused to
// every token by the NATS deliverer. Errors: also the engine's, reading
// the topic.
func AllowDelivery(ctx context.Context, engine *core.Engine, id *auth.Identity, t *core.Topic, natsSubjects []string) error {
	if id == nil || !id.Restricted() {
		return nil
	}
	if t.OnDead != "" && !id.AllowsTopic(t.OnDead) {
		return WithMessage(fmt.Sprintf("token %q may name as on_dead only a topic it may use", id.Name), ErrPermissionDenied)
	}
	if t.Delivery.ErrorBody || t.Delivery.Success != "" {
		kept, err := keepsAnswerFields(ctx, engine, t)
		if err != nil {
			return err
		}
		switch {
		case kept:
		case t.Delivery.ErrorBody:
			return WithMessage(fmt.Sprintf("token %q may not set delivery.error_body: only a token for every topic may", id.Name), ErrPermissionDenied)
		default:
			return WithMessage(fmt.Sprintf("token %q may not set delivery.success: only a token for every topic may", id.Name), ErrPermissionDenied)
		}
	}
	subject := t.Delivery.Subject
	if t.Delivery.Type != core.DeliveryNATS || subject == "" {
		return nil
	}
	if topic, ok := strings.CutPrefix(subject, natsDeliverPrefix); ok && core.ValidateTopicName(topic) == nil && id.AllowsTopic(topic) {
		return nil
	}
	for _, p := range natsSubjects {
		if auth.MatchTopic(p, subject) {
			return nil
		}
	}
	return WithMessage(fmt.Sprintf("token %q may name as delivery.subject only %s<topic> of a topic it may use, or a subject the server allows (--nats-delivery-subjects)", id.Name, natsDeliverPrefix), ErrPermissionDenied)
}

// AllowImportedID checks the id of a job an import brings: an id of the
// engine's derived forms (core.IsDerivedID: a unique key's, a schedule
// slot's, a notice's) is taken only from a token for every topic, since
// such an id in one topic blocks the key, slot or notice it stands for in
// another, and whether it was skipped would tell that the other's job
// exists. It returns an error wrapping ErrPermissionDenied otherwise. A
// nil id (the API without tokens) and tokens for every topic pass; the
// engine still checks that a k- id is the job's own key's id.
func AllowImportedID(id *auth.Identity, jobID string) error {
	if id == nil || !id.Restricted() || !core.IsDerivedID(jobID) {
		return nil
	}
	return WithMessage(fmt.Sprintf("token %q may not import a job whose id has the form k-, s- or n- and 32 hex digits (delayq's own ids): only a token for every topic may", id.Name), ErrPermissionDenied)
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
