package memstore

import (
	"context"
	"sort"
	"time"

	"github.com/delayq/delayq/core"
)

// finishedLog is the store's record of finished jobs (ListFinished): its
// entries numbered from 1 in the order recorded, the oldest first, each
// dropped once it was recorded the retention period ago. A cursor is the
// number of the last entry read.
type finishedLog struct {
	entries []loggedFinish
	last    uint64 // the number of the last entry recorded
}

// loggedFinish is an entry of finishedLog.
type loggedFinish struct {
	seq uint64
	at  time.Time // when it was recorded
	job core.FinishedJob
}

// recordFinish adds j, which has just finished (done, cancelled or dead),
// to the record of finished jobs.
func (s *Store) recordFinish(j *core.Job, now time.Time) {
	s.log.last++
	s.log.entries = append(s.log.entries, loggedFinish{seq: s.log.last, at: now, job: core.FinishedOf(j)})
}

// pruneFinished drops the entries recorded the retention period ago.
func (s *Store) pruneFinished(now time.Time) {
	n := sort.Search(len(s.log.entries), func(i int) bool { return now.Sub(s.log.entries[i].at) < s.retention })
	// A reslice: the array's head is freed when an append next grows it.
	s.log.entries = s.log.entries[n:]
}

// ListFinished implements core.Store. Errors: ErrInvalidArgument, ErrClosed.
func (s *Store) ListFinished(_ context.Context, params *core.ListFinishedParams) (core.FinishedPage, error) {
	if err := core.CheckListFinished(params); err != nil {
		return core.FinishedPage{}, err
	}
	after, err := core.ParseFinishedSeq(params.After)
	if err != nil {
		return core.FinishedPage{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return core.FinishedPage{}, core.ErrClosed
	}
	s.pruneFinished(s.now())
	es := s.log.entries
	from := sort.Search(len(es), func(i int) bool { return es[i].seq > after })
	page := core.FinishedPage{Jobs: []core.FinishedJob{}, Next: params.After}
	for _, e := range es[from:min(len(es), from+params.Limit)] {
		page.Jobs = append(page.Jobs, e.job)
		page.Next = core.FinishedSeqCursor(e.seq)
	}
	return page, nil
}
