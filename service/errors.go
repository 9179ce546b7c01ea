package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Describe gives err the message format when err matches target, so that
// clients read `job "x" not found` rather than "not found". Other errors,
// and a conflict that carries the existing job (its message is the
// store's), are returned as they are.
func Describe(err, target error, format string, args ...any) error {
	if err == nil || !errors.Is(err, target) {
		return err
	}
	if ce, ok := errors.AsType[*core.ConflictError](err); ok && ce.Job != nil {
		return err
	}
	return wire.WithMessage(fmt.Sprintf(format, args...), err)
}

// DescribeLease gives the errors of the lease operations on job id (ack,
// nack, touch) their messages: a lost lease and a job not found say so and
// name the job. Other errors are returned as they are.
func DescribeLease(err error, id string) error {
	err = Describe(err, core.ErrLeaseLost, "the lease of job %q is lost: the delivery expired, was finished or was handed out again", id)
	return Describe(err, core.ErrNotFound, "job %q not found", id)
}

// describeLease is DescribeLease with the job read to say why a lease is
// lost: a job never delivered has no lease to lose (the client's lease is
// unknown, a typo or another job's), a reserved one was handed out again,
// one cancelled while it ran says so, another finished one says how it
// ended. A batch's items keep DescribeLease's
// message, without a read each.
func (s *Service) describeLease(ctx context.Context, err error, id string) error {
	if !errors.Is(err, core.ErrLeaseLost) {
		return DescribeLease(err, id)
	}
	job, gerr := s.engine.Get(ctx, id)
	if gerr != nil {
		return DescribeLease(err, id)
	}
	var why string
	switch {
	case len(job.History) == 0:
		return wire.WithMessage(fmt.Sprintf("the lease is unknown: job %q was never delivered (it is %s)", id, job.State), err)
	case job.State == core.StateReserved:
		why = fmt.Sprintf("the job was handed out again (attempt %d), after this delivery expired, or the lease is unknown", job.Attempt)
	case job.History[len(job.History)-1].Outcome == core.OutcomeCancelled:
		why = fmt.Sprintf("the job was cancelled while its delivery (attempt %d) ran", job.History[len(job.History)-1].Attempt)
	default:
		last := job.History[len(job.History)-1]
		why = fmt.Sprintf("the job is %s; its last delivery (attempt %d) %s", job.State, last.Attempt, cmp.Or(outcomeWords[last.Outcome], "ended"))
	}
	return wire.WithMessage(fmt.Sprintf("the lease of job %q is lost: %s", id, why), err)
}

// outcomeWords says how a delivery ended, for describeLease.
var outcomeWords = map[string]string{
	core.OutcomeAcked:        "was acked",
	core.OutcomeRetried:      "was nacked, for a retry",
	core.OutcomeBuried:       "was nacked for good",
	core.OutcomeLeaseExpired: "expired unsettled",
	core.OutcomeReleased:     "was released unsent",
}

// serverSide reports whether err is the server's fault (the backend is
// down, a bug), not the request's.
func serverSide(err error) bool {
	code := wire.ToError(err).Code
	return code == wire.CodeInternal || code == wire.CodeUnavailable || code == wire.CodeUnimplemented
}

// batchError returns the first error of a batch when every item failed
// with a server-side error (the backend is down), so that the batch is
// retried as one; when only some did, it logs the first once for the
// batch, not once per item.
func (s *Service) batchError(what string, n int, errAt func(i int) error) error {
	var first error
	failed := 0
	for i := range n {
		if err := errAt(i); err != nil && serverSide(err) {
			first = cmp.Or(first, err)
			failed++
		}
	}
	switch {
	case failed == n:
		return first
	case failed > 0:
		s.log.Warn("service: items of a batch failed server-side", "batch", what, "failed", failed, "first", first)
	}
	return nil
}

// CheckBatch bounds the items of a batch under field: an error wrapping
// core.ErrInvalidArgument for none, core.ErrTooLarge for more than the
// engine's Limits().MaxBatch, both a *core.FieldError on field. A
// transport that decodes a batch lazily calls it on the count first, so
// that a batch over the bound costs no decoding.
func (s *Service) CheckBatch(field string, n int) error {
	return CheckBatchLimit(field, n, s.engine.Limits().MaxBatch)
}

// CheckBatchLimit is CheckBatch with limit for the engine's MaxBatch.
func CheckBatchLimit(field string, n, limit int) error {
	switch {
	case n == 0 && field == "jobs":
		return core.Invalid(field, "jobs must hold at least one job")
	case n == 0:
		return core.Invalid(field, "%s must hold at least one item", field)
	case n > limit:
		return core.TooLarge(field, "a batch holds at most %d %s, not %d", limit, field, n)
	}
	return nil
}

// ItemFailed reports whether err, from an item of an import, fails that
// item alone (a bad item, one too large, one the token may not bring)
// rather than the whole import (the store's failure, after which the
// import may be sent again as a whole).
func ItemFailed(err error) bool {
	return errors.Is(err, core.ErrInvalidArgument) || errors.Is(err, core.ErrTooLarge) || errors.Is(err, wire.ErrPermissionDenied)
}
