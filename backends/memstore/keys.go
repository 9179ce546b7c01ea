package memstore

import "container/heap"

// Key concurrency (core.ClaimJobsParams.KeyConcurrency): a take that meets
// a due job whose key has its limit reserved parks it, out of the topic's
// ready queue into its key's parked queue, and a delivery of the key that
// ends moves the head of that queue back to ready. So a key at its limit
// costs a take nothing however many of its jobs are due, and its jobs go
// out in claim order. A parked job is ready to every reader.

// hold counts reserved entry e against its key.
func (tp *topic) hold(e *entry) {
	if k := e.job.Key; k != "" {
		if tp.held == nil {
			tp.held = make(map[string]int)
		}
		tp.held[k]++
	}
}

// release gives back the slot of e, whose delivery ended: its key's first
// parked entry goes back to ready, in its place.
func (tp *topic) release(e *entry) {
	k := e.job.Key
	if k == "" {
		return
	}
	if tp.held[k]--; tp.held[k] <= 0 {
		delete(tp.held, k)
	}
	if q := tp.parked[k]; q != nil {
		next := q.items[0]
		tp.unpark(next)
		heap.Push(&tp.ready, next) // its key and seq kept: its place in claim order
	}
}

// park moves ready entry e, popped from ready, to its key's parked queue,
// keeping its place in claim order; limit is the take's key limit.
func (tp *topic) park(e *entry, limit int) {
	if tp.parked == nil {
		tp.parked = make(map[string]*queue)
	}
	q := tp.parked[e.job.Key]
	if q == nil {
		q = &queue{byPriority: true}
		tp.parked[e.job.Key] = q
	}
	heap.Push(q, e)
	e.parked = true
	if tp.parkedN++; tp.parkedUnder == 0 || limit < tp.parkedUnder {
		tp.parkedUnder = limit
	}
}

// unpark takes parked entry e out of its key's queue, unlinked.
func (tp *topic) unpark(e *entry) {
	k := e.job.Key
	q := tp.parked[k]
	q.remove(e)
	e.parked = false
	if q.Len() == 0 {
		delete(tp.parked, k)
	}
	if tp.parkedN--; tp.parkedN == 0 {
		tp.parkedUnder = 0
	}
}

// unparkAll moves every parked entry back to ready, for a take whose limit
// is higher than the one they were parked under, or none.
func (tp *topic) unparkAll() {
	for _, q := range tp.parked {
		for _, e := range q.items {
			e.parked = false
			heap.Push(&tp.ready, e)
		}
	}
	tp.parked, tp.parkedN, tp.parkedUnder = nil, 0, 0
}
