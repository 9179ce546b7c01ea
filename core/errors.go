package core

import (
	"errors"
	"fmt"
)

// Sentinel errors returned by the engine and every store. Transports map each
// to one wire status in a single table.
var (
	// ErrNotFound is returned when no job or topic has the given name.
	ErrNotFound = errors.New("not found")
	// ErrConflict is returned when the job's state forbids the operation:
	// an id in use, a reserved job replaced or cancelled.
	ErrConflict = errors.New("conflict")
	// ErrLeaseLost is returned when a lease is not the job's current lease
	// or has expired. It is a conflict.
	ErrLeaseLost = fmt.Errorf("%w: lease lost", ErrConflict)
	// ErrInvalidArgument is wrapped by every validation error.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrTooLarge is returned when a body or batch exceeds its limit.
	ErrTooLarge = errors.New("too large")
	// ErrUnavailable is returned when the backend cannot be reached; callers
	// may retry later.
	ErrUnavailable = errors.New("unavailable")
	// ErrClosed is returned by a store or engine used after Close or Stop.
	ErrClosed = fmt.Errorf("%w: closed", ErrUnavailable)
	// ErrNotReplicated is returned when a write was done but the backend's
	// replicas did not confirm it in time (a store configured to wait for
	// them): it may be lost if the backend fails over, or may survive. It
	// is unavailable: retry, with the same job id for a put.
	ErrNotReplicated = fmt.Errorf("%w: not confirmed by replicas", ErrUnavailable)
	// ErrNotSent is wrapped (or matched by Is) by a delivery error that says
	// the job was refused before it was handed over, such as by an
	// endpoint's open circuit breaker: the engine retries the job when the
	// error's RetryAfter has passed and never buries it for that refusal,
	// even on its last attempt.
	ErrNotSent = errors.New("not sent")
)

// FieldError is a validation error that names the offending field.
type FieldError struct {
	// Field is the JSON name of the bad field, empty for the whole request.
	Field string
	// Message says what is wrong, for people.
	Message string
	// Err is ErrInvalidArgument or ErrTooLarge.
	Err error
}

// Error implements error.
func (e *FieldError) Error() string { return e.Message }

// Unwrap lets errors.Is match ErrInvalidArgument or ErrTooLarge.
func (e *FieldError) Unwrap() error { return e.Err }

// Invalid returns a FieldError wrapping ErrInvalidArgument.
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...), Err: ErrInvalidArgument}
}

// TooLarge returns a FieldError wrapping ErrTooLarge.
func TooLarge(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...), Err: ErrTooLarge}
}

// ConflictError is ErrConflict with the job that caused it, so a transport
// can show the existing job.
type ConflictError struct {
	// Job is the existing job, when known.
	Job *Job
	// Message says what conflicted.
	Message string
}

// Error implements error.
func (e *ConflictError) Error() string { return e.Message }

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// The conflicts every store reports, alike: their messages are for
// clients, and name the job, not the store.

// ExistsConflict is the conflict of a create of id over job, which exists
// and is not finished.
func ExistsConflict(id string, job *Job) *ConflictError {
	return &ConflictError{Job: job, Message: conflictSubject(id, job) + " already exists"}
}

// ReservedConflict is the conflict of a replace or cancel of id over job,
// whose delivery is in progress.
func ReservedConflict(id string, job *Job) *ConflictError {
	return &ConflictError{Job: job, Message: conflictSubject(id, job) + " is reserved"}
}

// NotDeadConflict is the conflict of a requeue of id over job, which is in
// state, not dead.
func NotDeadConflict(id string, job *Job, state State) *ConflictError {
	return &ConflictError{Job: job, Message: fmt.Sprintf("%s is %s, not dead", conflictSubject(id, job), state)}
}

// conflictSubject names the job of a conflict as its client knows it: a
// job of a unique_keys topic by its key and topic (its id, KeyID's, was
// never the client's), any other by its id.
func conflictSubject(id string, job *Job) string {
	if job != nil && job.Key != "" && id == KeyID(job.Topic, job.Key) {
		return fmt.Sprintf("the job of key %q in topic %q (id %q)", job.Key, job.Topic, id)
	}
	return fmt.Sprintf("job %q", id)
}

// ErrNoRetry is matched by every NoRetryError.
var ErrNoRetry = errors.New("no retry")

// NoRetryError is a failed delivery after which the job goes dead at once,
// whatever attempts it has left: the destination said that retrying cannot
// help (a webhook receiver's Delayq-No-Retry answer). The engine buries the
// job with Err's message as its last_error. A Deliverer returns it; any
// other error is retried by the backoff until max_attempts.
type NoRetryError struct {
	// Err is the attempt's error; its message becomes last_error.
	Err error
}

// Error implements error.
func (e *NoRetryError) Error() string { return e.Err.Error() }

// Unwrap returns Err, so that an endpoint breaker still finds the answer's
// status in it.
func (e *NoRetryError) Unwrap() error { return e.Err }

// Is matches ErrNoRetry.
func (e *NoRetryError) Is(target error) bool { return target == ErrNoRetry }

// ErrStorageFull is returned when the backend's storage is full (a disk
// with no space left): it refuses new jobs but still serves claims, acks
// and reads, and takes new jobs again once space is freed. It is
// unavailable (callers may retry later), and a store breaker does not
// count it as a failure: the backend answers.
var ErrStorageFull = fmt.Errorf("%w: storage full", ErrUnavailable)
