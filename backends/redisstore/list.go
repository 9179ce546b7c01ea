package redisstore

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/delayq/delayq/core"
)

// ListJobs implements core.Store. list.lua answers, per shard and in one
// pipeline, up to Limit+1 members after the cursor (a queue, the lease set,
// the dead set or the topic's finished zset, by score then id; it ends the
// shard's expired leases first); the store merges the shards' answers and
// reads the page's jobs, keeping those still in the state. The cursor is
// core.ListCursor over the structure's score (ms, or µs for dead), newest
// first for done and cancelled. Errors: ErrInvalidArgument, ErrClosed,
// ErrUnavailable.
func (s *Store) ListJobs(ctx context.Context, params *core.ListJobsParams) (core.JobPage, error) {
	if err := core.CheckList(params); err != nil {
		return core.JobPage{}, err
	}
	cs, cid := "", ""
	if params.After != "" {
		c, err := core.ParseListCursor(params.After)
		if err != nil {
			return core.JobPage{}, err
		}
		cs, cid = strconv.FormatInt(c.At, 10), c.ID
	}
	if s.isClosed() {
		return core.JobPage{}, core.ErrClosed
	}
	calls := make([]call, s.cfg.Shards)
	for n := range calls {
		calls[n] = s.shardCall(scriptList, n, params.Topic, string(params.State), cs, cid, params.Limit+1)
	}
	var members []core.ListCursor
	for _, cmd := range s.run(ctx, calls) {
		res, err := cmd.Slice()
		if err == nil && len(res) != 3 {
			err = errShortReply
		}
		if err != nil {
			return core.JobPage{}, unavailable("list jobs", err)
		}
		s.sawServerNow(res[0])
		flat := asSlice(res[1])
		for i := 0; i+1 < len(flat); i += 2 {
			members = append(members, core.ListCursor{ID: asString(flat[i]), At: asInt(flat[i+1])})
		}
		s.applyQueued(res[2])
	}
	newest := params.State.Finished()
	slices.SortFunc(members, func(a, b core.ListCursor) int {
		if newest {
			return cmp.Or(cmp.Compare(b.At, a.At), strings.Compare(b.ID, a.ID))
		}
		return a.Compare(b)
	})
	page := core.JobPage{Jobs: []*core.Job{}}
	if len(members) > params.Limit {
		members = members[:params.Limit]
		page.Next = members[len(members)-1].String()
	}
	if len(members) == 0 {
		return page, nil
	}
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	got, err := s.getJobs(ctx, "list jobs", ids)
	if err != nil {
		return core.JobPage{}, err
	}
	now := s.serverTime()
	for _, id := range ids {
		if j := got[id]; j != nil {
			if j = view(j, now); j.Topic == params.Topic && j.State == params.State {
				page.Jobs = append(page.Jobs, j)
			}
		}
	}
	return page, nil
}
