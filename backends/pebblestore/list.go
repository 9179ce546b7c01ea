package pebblestore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

const (
	// prefixFinishedBy: F<topic>\x00<state><finished ns, 8 bytes><id>, the
	// finished jobs of a topic by state and finish time (no value), which
	// ListJobs reads newest first.
	prefixFinishedBy = 'F'
	// finishedIndexedKey marks a database whose finished jobs all have
	// their F key (indexFinished).
	finishedIndexedKey = "L"
)

// finishedPrefix is where the jobs of topic finished in state start.
func finishedPrefix(topic string, state core.State) []byte {
	k := make([]byte, 0, 3+len(topic)+8+32)
	k = append(k, prefixFinishedBy)
	k = append(k, topic...)
	return append(k, 0, stateCodes[state])
}

// finishedKey is the F key of job id of topic, finished in state at ns.
func finishedKey(topic string, state core.State, ns int64, id string) []byte {
	k := binary.BigEndian.AppendUint64(finishedPrefix(topic, state), uint64(ns))
	return append(k, id...)
}

// ListJobs implements core.Store. Scheduled, ready and reserved jobs are
// picked from the topic's heap in the index, which it reads whole under
// the lock (a bounded selection, a few ms for a million jobs, no disk);
// dead jobs come from the d keys and finished ones from the F keys, read
// from the cursor on. Each job is then read as GetJob reads it, and left
// out if it changed state in between. The cursor is core.ListCursor: run
// at or lease expiry in ms, death in ns, finish in ns negated. Errors:
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) ListJobs(_ context.Context, params *core.ListJobsParams) (core.JobPage, error) {
	if err := core.CheckList(params); err != nil {
		return core.JobPage{}, err
	}
	var after *core.ListCursor
	if params.After != "" {
		c, err := core.ParseListCursor(params.After)
		if err != nil {
			return core.JobPage{}, err
		}
		after = &c
	}
	s.ops.RLock()
	defer s.ops.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.JobPage{}, core.ErrClosed
	}
	now := s.now()
	tp := s.topics[params.Topic]
	if tp == nil {
		s.mu.Unlock()
		return core.JobPage{Jobs: []*core.Job{}}, nil
	}
	// Expired leases go ready or dead, and due jobs ready, before the read.
	s.promote(tp, now)
	s.changed(tp)
	var (
		ids  []string
		next []core.ListCursor
		err  error
	)
	switch params.State {
	case core.StateScheduled:
		ids, next = s.pickFirst(&tp.scheduled, after, params.Limit+1)
	case core.StateReady:
		ids, next = s.pick(after, params.Limit+1, tp.readyHeaps()...)
	case core.StateReserved:
		ids, next = s.pickFirst(&tp.reserved, after, params.Limit+1)
	}
	s.mu.Unlock()
	switch params.State {
	case core.StateDead:
		ids, next, err = s.listKeys(deadPrefix(params.Topic), after, params.Limit+1, false)
	case core.StateDone, core.StateCancelled:
		ids, next, err = s.listKeys(finishedPrefix(params.Topic, params.State), after, params.Limit+1, true)
	}
	if err != nil {
		return core.JobPage{}, err
	}
	page := core.JobPage{Jobs: make([]*core.Job, 0, min(len(ids), params.Limit))}
	if len(ids) > params.Limit {
		ids = ids[:params.Limit]
		page.Next = next[params.Limit-1].String()
	}
	// The reads, three point gets a job, are most of a page's time: a few
	// goroutines share them.
	jobs := make([]*core.Job, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	const readers = 4
	for r := range readers {
		wg.Go(func() {
			for k := r; k < len(ids); k += readers {
				jobs[k], errs[k] = s.read(ids[k], params.State.Finished())
			}
		})
	}
	wg.Wait()
	for k, j := range jobs {
		switch err := errs[k]; {
		case errors.Is(err, core.ErrNotFound):
			// Finished past retention, or pruned, since the pick.
		case err != nil:
			return core.JobPage{}, err
		case j.Topic == params.Topic && j.State == params.State:
			page.Jobs = append(page.Jobs, j)
		}
	}
	return page, nil
}

// pickFirst is pick for a heap ordered by due time alone (not by
// priority first: scheduled, reserved), where the first slots after the
// cursor lie near the root: a best-first walk from the root visits the
// slots in (due, seq) order, those up to the cursor and then n more (and
// their ties), O((m+n) log(m+n)) for m slots before the cursor instead of
// a pass over the heap. A walk that would visit more than a quarter of
// the heap (a deep cursor, a million ties) falls back to pick. Under s.mu.
func (s *Store) pickFirst(h *heap, after *core.ListCursor, n int) ([]string, []core.ListCursor) {
	x := s.x
	budget := len(h.items) / 4
	var (
		frontier = posHeap{x: x, h: h}
		found    []uint32
		last     int64 // due of the n-th slot found
	)
	if len(h.items) > 0 {
		frontier.push(0)
	}
	for visited := 0; len(frontier.pos) > 0; visited++ {
		if visited > budget {
			return s.pick(after, n, h)
		}
		p := frontier.pop()
		i := h.items[p]
		d := x.slots[i].due
		if len(found) >= n && d > last {
			break // every slot left is later: the ties of the n-th are in
		}
		if after == nil || d > after.At || d == after.At && x.id(i) > after.ID {
			found = append(found, i)
			if len(found) == n {
				last = d
			}
		}
		for _, c := range [2]int{2*p + 1, 2*p + 2} {
			if c < len(h.items) {
				frontier.push(c)
			}
		}
	}
	slices.SortFunc(found, func(a, b uint32) int {
		return cmp.Or(cmp.Compare(x.slots[a].due, x.slots[b].due), strings.Compare(x.id(a), x.id(b)))
	})
	found = found[:min(n, len(found))]
	ids := make([]string, len(found))
	pos := make([]core.ListCursor, len(found))
	for k, i := range found {
		ids[k] = strings.Clone(x.id(i))
		pos[k] = core.ListCursor{At: x.slots[i].due, ID: ids[k]}
	}
	return ids, pos
}

// posHeap is a min-heap of positions in h by their slots' (due, seq), the
// frontier of pickFirst's walk.
type posHeap struct {
	x   *index
	h   *heap
	pos []int
}

func (f *posHeap) less(a, b int) bool {
	sa, sb := &f.x.slots[f.h.items[f.pos[a]]], &f.x.slots[f.h.items[f.pos[b]]]
	if sa.due != sb.due {
		return sa.due < sb.due
	}
	return sa.seq < sb.seq
}

func (f *posHeap) push(p int) {
	f.pos = append(f.pos, p)
	for c := len(f.pos) - 1; c > 0; {
		q := (c - 1) / 2
		if !f.less(c, q) {
			return
		}
		f.pos[c], f.pos[q] = f.pos[q], f.pos[c]
		c = q
	}
}

func (f *posHeap) pop() int {
	top := f.pos[0]
	n := len(f.pos) - 1
	f.pos[0] = f.pos[n]
	f.pos = f.pos[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && f.less(r, l) {
			j = r
		}
		if !f.less(j, i) {
			break
		}
		f.pos[i], f.pos[j] = f.pos[j], f.pos[i]
		i = j
	}
	return top
}

// pick returns the ids of the first n slots of the heaps hs in (due ms,
// id) order after the cursor, with their positions: a selection over them
// that keeps the n first in a bounded max-heap, so that a page of a
// million pending jobs costs one pass and no allocation per job. Under
// s.mu.
func (s *Store) pick(after *core.ListCursor, n int, hs ...*heap) ([]string, []core.ListCursor) {
	x := s.x
	less := func(a, b uint32) bool { // a before b
		da, db := x.slots[a].due, x.slots[b].due
		if da != db {
			return da < db
		}
		return x.id(a) < x.id(b)
	}
	total := 0
	for _, h := range hs {
		total += len(h.items)
	}
	best := make([]uint32, 0, min(n, total)) // max-heap: best[0] is the last kept
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(best) {
				return
			}
			j := l
			if r := l + 1; r < len(best) && less(best[l], best[r]) {
				j = r
			}
			if !less(best[i], best[j]) {
				return
			}
			best[i], best[j] = best[j], best[i]
			i = j
		}
	}
	for _, h := range hs {
		for _, i := range h.items {
			if after != nil {
				if d := x.slots[i].due; d < after.At || d == after.At && x.id(i) <= after.ID {
					continue
				}
			}
			if len(best) < n {
				best = append(best, i)
				for c := len(best) - 1; c > 0; { // up
					p := (c - 1) / 2
					if !less(best[p], best[c]) {
						break
					}
					best[p], best[c] = best[c], best[p]
					c = p
				}
				continue
			}
			if less(i, best[0]) {
				best[0] = i
				down(0)
			}
		}
	}
	slices.SortFunc(best, func(a, b uint32) int {
		return cmp.Or(cmp.Compare(x.slots[a].due, x.slots[b].due), strings.Compare(x.id(a), x.id(b)))
	})
	ids := make([]string, len(best))
	pos := make([]core.ListCursor, len(best))
	for k, i := range best {
		ids[k] = strings.Clone(x.id(i))
		pos[k] = core.ListCursor{At: x.slots[i].due, ID: ids[k]}
	}
	return ids, pos
}

// listKeys reads up to n keys under prefix, each a time in ns (8 bytes)
// then an id, after the cursor: oldest first, or newest first (with the
// cursor's At the time negated) when newest is set.
func (s *Store) listKeys(prefix []byte, after *core.ListCursor, n int, newest bool) ([]string, []core.ListCursor, error) {
	opts := &pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)}
	if after != nil {
		at := after.At
		if newest {
			at = -at
		}
		k := binary.BigEndian.AppendUint64(slices.Clone(prefix), uint64(at))
		k = append(k, after.ID...)
		if newest {
			opts.UpperBound = k
		} else {
			opts.LowerBound = append(k, 0) // the least key above the cursor's
		}
	}
	it, err := s.db.NewIter(opts)
	if err != nil {
		return nil, nil, wrap(err)
	}
	var (
		ids []string
		pos []core.ListCursor
	)
	step, ok := it.Next, it.First()
	if newest {
		step, ok = it.Prev, it.Last()
	}
	for ; ok && len(ids) < n; ok = step() {
		k := it.Key()
		if len(k) < len(prefix)+8 {
			_ = it.Close()
			return nil, nil, fmt.Errorf("pebblestore: index key %q: %w", k, errCorrupt)
		}
		at := int64(binary.BigEndian.Uint64(k[len(prefix):]))
		if newest {
			at = -at
		}
		id := string(k[len(prefix)+8:])
		ids = append(ids, id)
		pos = append(pos, core.ListCursor{At: at, ID: id})
	}
	return ids, pos, wrap(it.Close())
}

// indexFinished writes the F keys of the finished jobs a database holds
// from before the index, once: the first Open by a version with it reads
// every x key (small values), then marks the database.
func (s *Store) indexFinished() error {
	return s.indexOnce(finishedIndexedKey, "the finished jobs", prefixFinished, func(b *pebble.Batch, k, v []byte) (bool, error) {
		m, err := decodeMeta(v)
		if err != nil {
			return false, fmt.Errorf("pebblestore: job %q: %w", k[1:], err)
		}
		_ = b.Set(finishedKey(m.topic, m.state, m.updatedAt, string(k[1:])), nil, nil)
		return true, nil
	})
}
