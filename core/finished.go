package core

import (
	"strconv"
	"time"
)

// The record of finished jobs. Every store appends an entry to a log of its
// own each time a job finishes: done (ack), cancelled (cancel) or dead
// (bury, or a lease that ran out on its last attempt), in the same atomic
// write as the change of state, so that a follower of the log learns of
// every finish, however the store got there and even across a crash. The log is a history of transitions, not of
// jobs: a dead job requeued (or cancelled) and a finished id reused by a
// put keep their entries, and the job's next finish adds another.

// FinishedLimitMax bounds ListFinishedParams.Limit, so that one read of
// the record stays short.
const FinishedLimitMax = 1000

// FinishedJob is an entry of a store's record of finished jobs: a job as
// it finished, with what a follower needs to tell of it without reading
// the job.
type FinishedJob struct {
	// ID is the job's id.
	ID string
	// Topic is the job's topic.
	Topic string
	// Key is the job's business key, empty for none.
	Key string
	// State is what the job became: done, cancelled or dead.
	State State
	// Attempt is the job's attempt count then: the attempt that ended for
	// an ack, a bury or an expiry.
	Attempt int
	// LastError is the job's last error then: the reason of a death.
	LastError string
	// FinishedAt is the time of the finish, the job's UpdatedAt then
	// (for a lease that ran out, the lease's expiry).
	FinishedAt time.Time
	// Then is set for a done job with a next step (Job.Then), so that a
	// follower reads only those jobs; false for every other finish.
	Then bool
}

// ListFinishedParams are the arguments of Store.ListFinished.
type ListFinishedParams struct {
	// After is where the read starts: the Next of an earlier read, opaque
	// to callers; empty for the oldest entry kept.
	After string
	// Limit bounds the entries returned, 1 to FinishedLimitMax.
	Limit int
}

// FinishedPage is what Store.ListFinished returns.
type FinishedPage struct {
	// Jobs are the entries after the cursor, oldest first; an empty slice,
	// not nil, for none.
	Jobs []FinishedJob
	// Next is the cursor after the last entry returned, to pass as After
	// to read on; After itself when none was (empty from the start of an
	// empty record).
	Next string
}

// CheckListFinished checks the arguments of Store.ListFinished as every
// store must (a store checks its own cursors): ErrInvalidArgument when
// params is nil or Limit is out of range.
func CheckListFinished(params *ListFinishedParams) error {
	switch {
	case params == nil:
		return Invalid("", "list finished: no params")
	case params.Limit < 1 || params.Limit > FinishedLimitMax:
		return Invalid("limit", "limit must be 1 to %d", FinishedLimitMax)
	}
	return nil
}

// FinishedOf returns the entry of the record of finished jobs of j, which
// has just finished.
func FinishedOf(j *Job) FinishedJob {
	return FinishedJob{
		ID:         j.ID,
		Topic:      j.Topic,
		Key:        j.Key,
		State:      j.State,
		Attempt:    j.Attempt,
		LastError:  j.LastError,
		FinishedAt: j.UpdatedAt,
		Then:       j.Then != nil && j.State == StateDone,
	}
}

// ParseFinishedSeq decodes the cursor of a record of finished jobs that
// numbers its entries (FinishedSeqCursor): 0 for empty, the start.
// Errors: ErrInvalidArgument.
func ParseFinishedSeq(after string) (uint64, error) {
	if after == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(after, 10, 64)
	if err != nil {
		return 0, Invalid("after", "after is not a cursor of the finished jobs")
	}
	return n, nil
}

// FinishedSeqCursor is the cursor after entry number seq of a record of
// finished jobs that numbers its entries from 1; "" for 0.
func FinishedSeqCursor(seq uint64) string {
	if seq == 0 {
		return ""
	}
	return strconv.FormatUint(seq, 10)
}
