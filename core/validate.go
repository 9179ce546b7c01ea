package core

import (
	"cmp"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults and limits of jobs (docs/api.md lists them with each field).
// Limits that an operator may change live in Limits; the rest are fixed.
const (
	// MaxTopicLen is the longest topic name.
	MaxTopicLen = 200
	// MaxIDLen is the longest job id.
	MaxIDLen = 128
	// MaxKeyLen is the longest business key.
	MaxKeyLen = 256
	// MaxErrorLen is the longest last_error kept; longer ones are cut.
	MaxErrorLen = 2048

	// TTRDefault is a job's time to run when neither it nor its topic sets one.
	TTRDefault = 30 * time.Second
	// TTRMin is the shortest time to run.
	TTRMin = time.Second
	// TTRMax is the longest time to run (as SQS's visibility timeout).
	TTRMax = 12 * time.Hour
	// MaxAttemptsDefault is a job's attempt limit when neither it nor its topic sets one.
	MaxAttemptsDefault = 10
	// MaxAttemptsMax is the largest attempt limit.
	MaxAttemptsMax = 1000
)

// Limits are the operator-configurable bounds on input.
type Limits struct {
	// MaxBodyBytes bounds a job body. Defaults to 1 MiB.
	MaxBodyBytes int
	// MaxBatch bounds the jobs of one batch request. Defaults to 1000.
	MaxBatch int
	// MaxDelay bounds how far in the future run_at may be. Defaults to 366 days.
	MaxDelay time.Duration
}

// WithDefaults fills unset limits.
func (l Limits) WithDefaults() Limits {
	l.MaxBodyBytes = cmp.Or(l.MaxBodyBytes, 1<<20)
	l.MaxBatch = cmp.Or(l.MaxBatch, 1000)
	l.MaxDelay = cmp.Or(l.MaxDelay, 366*24*time.Hour)
	return l
}

// ValidateTopicName checks a topic name: 1-200 characters from
// [A-Za-z0-9_-], with '.' between non-empty tokens, so that it maps one to one
// onto NATS subject tokens.
func ValidateTopicName(name string) error {
	if name == "" {
		return Invalid("topic", "topic must not be empty")
	}
	if len(name) > MaxTopicLen {
		return Invalid("topic", "topic must be at most %d characters", MaxTopicLen)
	}
	prevDot := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if prevDot {
				return Invalid("topic", "topic %q has an empty token", name)
			}
			prevDot = true
		case isTokenChar(c):
			prevDot = false
		default:
			return Invalid("topic", "topic %q has a character outside [A-Za-z0-9_-.]", name)
		}
	}
	if prevDot {
		return Invalid("topic", "topic %q has an empty token", name)
	}
	return nil
}

// ValidateID checks a client-chosen job id: 1-128 characters from
// [A-Za-z0-9_-], so that it is one NATS subject token and safe in URLs.
func ValidateID(id string) error {
	if id == "" {
		return Invalid("id", "id must not be empty")
	}
	if len(id) > MaxIDLen {
		return Invalid("id", "id must be at most %d characters", MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !isTokenChar(id[i]) {
			return Invalid("id", "id %q has a character outside [A-Za-z0-9_-]", id)
		}
	}
	return nil
}

// ValidateKey checks a business key: at most 256 bytes of UTF-8, no control
// characters.
func ValidateKey(key string) error {
	if len(key) > MaxKeyLen {
		return Invalid("key", "key must be at most %d bytes", MaxKeyLen)
	}
	if !utf8.ValidString(key) {
		return Invalid("key", "key must be valid UTF-8")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] == 0x7f {
			return Invalid("key", "key must not contain control characters")
		}
	}
	return nil
}

// Bounds of a topic's retention (Topic.Retention, Job.Retention).
const (
	// RetentionMin is the shortest retention: whole seconds, as the NATS
	// store keeps it.
	RetentionMin = time.Second
	// RetentionMax is the longest retention.
	RetentionMax = 366 * 24 * time.Hour
)

// ValidateRetention checks a retention of finished jobs: RetentionMin to
// RetentionMax, in whole seconds.
func ValidateRetention(field string, d time.Duration) error {
	if d < RetentionMin || d > RetentionMax || d%time.Second != 0 {
		return Invalid(field, "%s must be whole seconds between %s and %s", field, RetentionMin, RetentionMax)
	}
	return nil
}

// ValidateTTR checks a time to run.
func ValidateTTR(field string, d time.Duration) error {
	if d < TTRMin || d > TTRMax {
		return Invalid(field, "%s must be between %s and %s", field, TTRMin, TTRMax)
	}
	return nil
}

// ValidateMaxAttempts checks an attempt limit.
func ValidateMaxAttempts(field string, n int) error {
	if n < 1 || n > MaxAttemptsMax {
		return Invalid(field, "%s must be between 1 and %d", field, MaxAttemptsMax)
	}
	return nil
}

func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// CutError bounds an error text to MaxErrorLen bytes of valid UTF-8, as
// jobs keep last_error.
func CutError(s string) string {
	if len(s) <= MaxErrorLen {
		return s
	}
	return strings.ToValidUTF8(s[:MaxErrorLen], "")
}

// RunAtMin is the earliest run_at a job may have. An earlier time in the
// past would mean "due now" all the same, but no store need order times
// outside the range of int64 nanoseconds since the epoch.
var RunAtMin = time.Unix(0, 0).UTC()

// validateRunAt checks a run_at given by a client, at push or import: not
// before RunAtMin, at most the engine's MaxDelay after now.
func (e *Engine) validateRunAt(runAt, now time.Time) error {
	if runAt.Before(RunAtMin) {
		return Invalid("run_at", "run_at must not be before %s", RunAtMin.Format(time.RFC3339))
	}
	if runAt.Sub(now) > e.limits.MaxDelay {
		return Invalid("run_at", "run_at must be at most %s from now", e.limits.MaxDelay)
	}
	return nil
}

// ValidatePriority checks a job's priority, named field.
func ValidatePriority(field string, p int) error {
	if p < PriorityMin || p > PriorityMax {
		return Invalid(field, "%s must be from %d (most urgent) to %d", field, PriorityMin, PriorityMax)
	}
	return nil
}

// validateJob checks what a pushed and an imported job share, in the order
// of their fields on the wire: topic, id, key, body (at most
// Limits.MaxBodyBytes of JSON in UTF-8; empty becomes null), run_at (see
// validateRunAt), ttr, max_attempts, priority, the retry delays, the
// expiry (validateExpiresAt) and the url (see validateJobURL); the body's
// JSON and UTF-8 are taken as they are when bodyChecked
// (PushParams.BodyChecked). The callers check the rest: push its delay and
// fills ids and topic defaults first; import requires run_at and checks
// state and attempt.
func (e *Engine) validateJob(j *Job, bodyChecked bool, now time.Time, urls urlChecks) error {
	if err := ValidateTopicName(j.Topic); err != nil {
		return err
	}
	if err := ValidateID(j.ID); err != nil {
		return err
	}
	if err := ValidateKey(j.Key); err != nil {
		return err
	}
	if len(j.Body) > e.limits.MaxBodyBytes {
		return TooLarge("body", "body is %d bytes, more than the limit of %d", len(j.Body), e.limits.MaxBodyBytes)
	}
	if len(j.Body) == 0 {
		j.Body = json.RawMessage("null")
	} else if !bodyChecked && (!json.Valid(j.Body) || !utf8.Valid(j.Body)) {
		return Invalid("body", "body must be a JSON value in UTF-8")
	}
	if err := e.validateRunAt(j.RunAt, now); err != nil {
		return err
	}
	if err := ValidateTTR("ttr", j.TTR); err != nil {
		return err
	}
	if err := ValidateMaxAttempts("max_attempts", j.MaxAttempts); err != nil {
		return err
	}
	if err := ValidatePriority("priority", j.Priority); err != nil {
		return err
	}
	if err := ValidateDelays("backoff.delays", j.RetryDelays); err != nil {
		return err
	}
	if err := e.validateExpiresAt(j); err != nil {
		return err
	}
	if j.Retention != 0 {
		if err := ValidateRetention("retention", j.Retention); err != nil {
			return err
		}
	}
	return e.validateJobURL(j, urls)
}

// urlChecks remembers, within one batch or import, the outcome of each job
// URL the deliverer checked: the check may resolve the host, and the jobs
// of a batch often share a few URLs.
type urlChecks map[string]error

// JobURLValidator is the optional capability of a Deliverer (found by type
// assertion) that checks a job's own URL (Job.URL) as it checks a topic's,
// so that a push is refused with a 400 rather than failing at delivery.
// Decorators of a Deliverer pass it on.
type JobURLValidator interface {
	// ValidateJobURL returns a *FieldError naming field "url" when raw is
	// not a URL deliveries may go to.
	ValidateJobURL(raw string) error
}

// validateJobURL checks a job's own URL: only for a webhook topic whose
// delivery.allow_job_url is set, and valid for the webhook deliverer.
func (e *Engine) validateJobURL(j *Job, urls urlChecks) error {
	if j.URL == "" {
		return nil
	}
	t := e.topic(j.Topic)
	if t.Delivery.Type != DeliveryWebhook {
		return Invalid("url", "url is only for jobs of webhook topics; topic %q delivers by %s", j.Topic, t.Delivery.Type)
	}
	if !t.Delivery.AllowJobURL {
		return Invalid("url", "topic %q does not allow a url per job (delivery.allow_job_url)", j.Topic)
	}
	err, ok := urls[j.URL]
	if !ok {
		err = ValidateJobURL(e.deliverers[DeliveryWebhook], j.URL)
		urls[j.URL] = err
	}
	return err
}

// ValidateJobURL asks d to check a job's own URL when d is a
// JobURLValidator, and refuses the URL otherwise; decorators of a
// Deliverer implement JobURLValidator with it.
func ValidateJobURL(d Deliverer, raw string) error {
	v, ok := d.(JobURLValidator)
	if !ok {
		return Invalid("url", "a url per job is not available on this server")
	}
	return v.ValidateJobURL(raw)
}

// StoreTime returns t in UTC at ms precision, as jobs keep times.
func StoreTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
