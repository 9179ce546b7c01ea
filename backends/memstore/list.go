package memstore

import (
	"context"
	"slices"

	"github.com/delayq/delayq/core"
)

// ListJobs implements core.Store: it reads every job of the topic in the
// state, as of now, and sorts those after the cursor (core.ListPosition),
// a linear scan per page that suits a store held in memory. Errors:
// ErrInvalidArgument, ErrClosed.
func (s *Store) ListJobs(_ context.Context, params *core.ListJobsParams) (core.JobPage, error) {
	if err := core.CheckList(params); err != nil {
		return core.JobPage{}, err
	}
	var after core.ListCursor
	if params.After != "" {
		c, err := core.ParseListCursor(params.After)
		if err != nil {
			return core.JobPage{}, err
		}
		after = c
	}
	var page core.JobPage
	jobs, err := s.listTopic(params.Topic, func(tp *topic) []*core.Job {
		type item struct {
			pos core.ListCursor
			job *core.Job
		}
		var items []item
		add := func(e *entry) {
			pos := core.ListPosition(e.job)
			if params.After == "" || pos.Compare(after) > 0 {
				items = append(items, item{pos, e.job})
			}
		}
		switch params.State {
		case core.StateScheduled:
			for _, e := range tp.scheduled.items {
				add(e)
			}
		case core.StateReady:
			for _, e := range tp.ready.items {
				add(e)
			}
			for _, q := range tp.parked {
				for _, e := range q.items {
					add(e)
				}
			}
		case core.StateReserved:
			for _, e := range tp.reserved.items {
				add(e)
			}
		case core.StateDead:
			for el := tp.dead.Front(); el != nil; el = el.Next() {
				add(el.Value.(*entry))
			}
		default:
			for el := s.finished.Back(); el != nil; el = el.Prev() {
				if e := el.Value.(*entry); e.topic == tp && e.job.State == params.State {
					add(e)
				}
			}
		}
		slices.SortFunc(items, func(a, b item) int { return a.pos.Compare(b.pos) })
		if len(items) > params.Limit {
			items = items[:params.Limit]
			page.Next = items[len(items)-1].pos.String()
		}
		jobs := make([]*core.Job, len(items))
		for i, it := range items {
			jobs[i] = it.job.Clone()
		}
		return jobs
	})
	page.Jobs = jobs
	return page, err
}
