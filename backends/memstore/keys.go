package memstore

import (
	"container/heap"
	"container/list"
	"time"

	"github.com/delayq/delayq/core"
)

// Key concurrency (core.ClaimJobsParams.KeyConcurrency): a take that meets
// a due job whose key has its limit reserved parks it, out of the topic's
// ready queue into its key's parked queue, and a delivery of the key that
// ends moves the head of that queue back to ready. So a key at its limit
// costs a take nothing however many of its jobs are due, and its jobs go
// out in claim order. A parked job is ready to every reader.
//
// Fair takes (core.ClaimJobsParams.Fair) use the same queues of keys: a
// fair take parks every ready entry in its key's queue (jobs without a key
// in the queue of key ""), each entry once, as it comes due, and serves
// the ring of keys: the key at the front gives its head and goes to the
// back while it has entries and is under the limit. A key enters the ring
// at the back when it gets an entry or a slot back, so keys first come in
// the order their first job came due. A take costs the jobs it takes and
// the keys it visits, however many jobs are due. A take that is not fair
// moves every parked entry back to ready first.
//
// The rate per key (core.ClaimJobsParams.KeyRate) uses them too: a take
// that meets a due job whose key's bucket is empty (core.KeyRates) parks
// it in its key's queue, and the key waits, out of the ring, until its
// bucket holds a token again; a take first moves back to ready the heads
// of the keys whose time came, one per token, or, fair, puts the keys back
// in the ring. So a key at its rate costs a take nothing, and a claim
// waits for the earliest of those times as for a due job (nextDue). A job
// needs a slot (key concurrency) before a token: one held back for a slot
// takes none.

// keyQueue is a key's parked entries in claim order; turn is its place in
// its topic's ring, nil when out of it.
type keyQueue struct {
	queue
	key  string
	turn *list.Element
	// waitAt is when the key's bucket holds a token again (Unix ns) while
	// the key waits for one (core.KeyRates.Wait), 0 otherwise.
	waitAt int64
}

// atLimit says a job of key k may not be reserved by a take with limit,
// its key having that many reserved.
func (tp *topic) atLimit(k string, limit int) bool {
	return limit > 0 && k != "" && tp.held[k] >= limit
}

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
// parked entry goes back to ready, in its place, or, fair, its key back
// into the ring.
func (tp *topic) release(e *entry) {
	k := e.job.Key
	if k == "" {
		return
	}
	if tp.held[k]--; tp.held[k] <= 0 {
		delete(tp.held, k)
	}
	q := tp.parked[k]
	switch {
	case q == nil:
	case tp.fair:
		tp.enterRing(q)
	default:
		next := q.items[0]
		tp.unpark(next)
		heap.Push(&tp.ready, next) // its key and seq kept: its place in claim order
	}
}

// queueOf returns the parked queue of key k, made if needed.
func (tp *topic) queueOf(k string) *keyQueue {
	if tp.parked == nil {
		tp.parked = make(map[string]*keyQueue)
	}
	q := tp.parked[k]
	if q == nil {
		q = &keyQueue{queue: queue{byPriority: true}, key: k}
		tp.parked[k] = q
	}
	return q
}

// park moves ready entry e, popped from ready, to its key's parked queue,
// keeping its place in claim order, and returns the queue; limit is the
// take's key limit, 0 for an entry parked for a token.
func (tp *topic) park(e *entry, limit int) *keyQueue {
	q := tp.queueOf(e.job.Key)
	heap.Push(q, e)
	e.parked = true
	if tp.parkedN++; limit > 0 && (tp.parkedUnder == 0 || limit < tp.parkedUnder) {
		tp.parkedUnder = limit
	}
	return q
}

// token takes a token of the rate per key for ready entry e, popped from
// ready: true when it got one, or when tp's takes have no rate per key;
// else e is parked, its key waiting for its next token.
func (tp *topic) token(e *entry, now time.Time) bool {
	if tp.rates.Rate().Limit == 0 {
		return true
	}
	at, ok := tp.rates.Take(e.job.Key, now)
	if !ok {
		tp.wait(tp.park(e, 0), at)
	}
	return ok
}

// wait makes the key of q wait for its bucket's token at at, out of the
// ring, unless it waits already.
func (tp *topic) wait(q *keyQueue, at time.Time) {
	if q.turn != nil {
		tp.ring.Remove(q.turn)
		q.turn = nil
	}
	if q.waitAt == 0 {
		q.waitAt = at.UnixNano()
		tp.rates.Wait(q.key, at)
	}
}

// refill ends the wait of the keys whose token came by now: it moves back
// to ready as many heads of each key's queue as its bucket holds tokens,
// the key waiting again for the next token when entries are left, or,
// fair, puts the key back in the ring. A key whose queue went (its jobs
// cancelled, moved back to ready) or waits for a later time since is
// passed over.
func (tp *topic) refill(now time.Time) {
	for {
		k, at, ok := tp.rates.Due(now)
		if !ok {
			return
		}
		q := tp.parked[k]
		if q == nil || q.waitAt != at.UnixNano() {
			continue
		}
		q.waitAt = 0
		if tp.fair {
			tp.enterRing(q)
			continue
		}
		n, next := tp.rates.Tokens(k, now)
		for ; n > 0 && tp.parked[k] == q; n-- {
			e := q.peek()
			tp.unpark(e)
			heap.Push(&tp.ready, e)
		}
		if tp.parked[k] == q {
			tp.wait(q, next)
		}
	}
}

// unpark takes parked entry e out of its key's queue, unlinked; a key with
// none left leaves the ring.
func (tp *topic) unpark(e *entry) {
	k := e.job.Key
	q := tp.parked[k]
	q.remove(e)
	e.parked = false
	if q.Len() == 0 {
		if q.turn != nil {
			tp.ring.Remove(q.turn)
			q.turn = nil
		}
		delete(tp.parked, k)
	}
	if tp.parkedN--; tp.parkedN == 0 {
		tp.parkedUnder = 0
	}
}

// unparkAll moves every parked entry back to ready, for a take whose limit
// is higher than the one they were parked under, or none, or that is not
// fair after fair ones.
func (tp *topic) unparkAll() {
	for _, q := range tp.parked {
		for _, e := range q.items {
			e.parked = false
			heap.Push(&tp.ready, e)
		}
	}
	tp.parked, tp.parkedN, tp.parkedUnder = nil, 0, 0
	tp.fair, tp.ringLimit = false, 0
	tp.ring.Init()
	tp.rates.Unwait()
}

// enterRing puts q at the back of the ring when it is out of it, has an
// entry, its key is under the limit of the fair takes and not waiting
// for a token.
func (tp *topic) enterRing(q *keyQueue) {
	if q.turn == nil && q.Len() > 0 && q.waitAt == 0 && !tp.atLimit(q.key, tp.ringLimit) {
		q.turn = tp.ring.PushBack(q)
	}
}

// takeFair reserves up to max ready jobs of tp for claim p as take does,
// one of each key in turn (the ring), at most p.KeyConcurrency of a key
// reserved when it is set, each within its key's p.KeyRate.
func (s *Store) takeFair(tp *topic, max int, p *core.ClaimJobsParams, now time.Time) []*core.Job {
	keyLimit := p.KeyConcurrency
	if !tp.fair {
		tp.unparkAll() // those parked under a limit, in the ring below
		tp.fair = true
	}
	if tp.ringLimit != 0 && (keyLimit == 0 || keyLimit > tp.ringLimit) {
		tp.ringLimit = keyLimit // raised: the keys out at the old limit come back
		for _, q := range tp.parked {
			tp.enterRing(q)
		}
	}
	tp.ringLimit = keyLimit
	for tp.ready.Len() > 0 {
		e := tp.ready.pop()
		q := tp.queueOf(e.job.Key)
		heap.Push(q, e)
		e.parked = true
		tp.parkedN++
		tp.enterRing(q)
	}
	tp.refill(now)
	rated := tp.rates.Rate().Limit > 0
	jobs := []*core.Job{}
	for len(jobs) < max && tp.ring.Len() > 0 {
		q := tp.ring.Front().Value.(*keyQueue)
		if !tp.atLimit(q.key, keyLimit) {
			if rated {
				if at, ok := tp.rates.Take(q.key, now); !ok {
					tp.wait(q, at)
					continue
				}
			}
			e := q.peek()
			tp.unpark(e) // out of the ring with its last entry
			jobs = append(jobs, s.reserve(tp, e, p, now))
		}
		switch {
		case q.turn == nil:
		case tp.atLimit(q.key, keyLimit):
			tp.ring.Remove(q.turn) // back once a slot of the key comes back
			q.turn = nil
		default:
			tp.ring.MoveToBack(q.turn)
		}
	}
	return jobs
}
