package core

import "time"

// JobExpired is the LastError of a job that went dead because its
// ExpiresAt passed before it was delivered and acknowledged.
const JobExpired = "expired"

// Expired reports whether j has an expiry and it has come at now: such a
// job is not delivered again.
func (j *Job) Expired(now time.Time) bool {
	return !j.ExpiresAt.IsZero() && !now.Before(j.ExpiresAt)
}
