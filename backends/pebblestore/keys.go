package pebblestore

import (
	"container/list"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// Key concurrency (core.ClaimJobsParams.KeyConcurrency): a take that meets
// a ready slot whose key has its limit reserved parks it, out of the
// topic's ready heap into its key's parked heap, and a delivery of the key
// that ends moves the head of that heap back to ready. So a key at its
// limit costs a take nothing however many of its jobs are due, and its
// jobs go out in claim order. Parking is the index's alone: on disk a
// parked job is ready, as every reader sees it, and a restart loads it
// ready. The counts of reserved slots by key are the index's too, counted
// from the reserved slots by the first take with a limit (after a
// restart, from the leases loaded): reserved slots are few, and a count
// kept on disk would cost every claim and settle of every topic a write.
//
// Fair takes (core.ClaimJobsParams.Fair) use the same heaps of keys: a fair
// take parks every ready slot in its key's heap (slots without a key in
// the heap of key ""), each slot once, as it comes due, its key read as a
// take with a limit reads it, and serves the ring of keys: the key at the
// front gives its head and goes to the back while it has slots and is
// under the limit. A key enters the ring at the back when it gets a slot
// or a slot of it comes back, so keys first come in the order their first
// job came due. A take costs the jobs it takes and the keys it visits,
// however many jobs are due. A take that is not fair moves every parked
// slot back to ready first.
//
// The rate per key (core.ClaimJobsParams.KeyRate) uses them too: a take
// that meets a due slot whose key's bucket is empty (core.KeyRates, in
// memory: a restart refills every bucket) parks it in its key's heap, and
// the key waits, out of the ring, until its bucket holds a token again; a
// claim first moves back to ready the heads of the keys whose time came,
// one per token, or, fair, puts the keys back in the ring. So a key at its
// rate costs a take nothing, and a claim waits for the earliest of those
// times as for a due job (nextDue). A slot needs a place under the key
// limit before a token: one held back for the limit takes none.

// keyLimits is what a topic keeps for the takes that bound its jobs per
// key.
type keyLimits struct {
	// held counts the reserved slots by business key; nil while the
	// topic's takes bound none.
	held map[string]int
	// parked holds the parked slots by key, each heap in claim order;
	// parkedN in all, parkedUnder the lowest limit they were parked under
	// (0 with none).
	parked      map[string]*keyHeap
	parkedN     int
	parkedUnder int
	// fair says every ready slot is parked, for fair takes; ring holds the
	// *keyHeap of each key with a slot to take, in turn; ringLimit is the
	// key limit of the last fair take, which says which keys are out of
	// the ring at their limit.
	fair      bool
	ring      list.List
	ringLimit int
	// rates is the rate per key of the topic's takes: its buckets, and
	// the keys whose parked slots wait for a token.
	rates core.KeyRates
}

// keyHeap is a key's parked slots in claim order; turn is its place in
// its topic's ring, nil when out of it.
type keyHeap struct {
	heap
	key  string
	turn *list.Element
	// waitAt is when the key's bucket holds a token again (Unix ns) while
	// the key waits for one (core.KeyRates.Wait), 0 otherwise.
	waitAt int64
}

// limitKeys readies tp for a take with keyLimit (0: none), fair or not:
// a take whose limit is higher than the one slots were parked under, or
// none, or that is fair or not unlike the last, moves them back to ready;
// the first take with a limit counts the reserved slots by key, and a take
// without one stops the count. Under s.mu.
func (s *Store) limitKeys(tp *topic, keyLimit int, fair bool) error {
	if tp.fair != fair || !fair && tp.parkedUnder > 0 && (keyLimit == 0 || keyLimit > tp.parkedUnder) {
		s.unparkAll(tp)
	}
	tp.fair = fair
	if keyLimit == 0 {
		tp.held = nil
		return nil
	}
	if tp.held != nil {
		return nil
	}
	held := make(map[string]int)
	for _, i := range tp.reserved.items {
		k, err := s.keyOf(i)
		if err != nil {
			return err
		}
		if k != "" {
			held[k]++
		}
	}
	tp.held = held
	return nil
}

// hold checks slot i, popped from tp's ready heap by a take with
// keyLimit at now: true when the take may reserve it, counted against its
// key and its key's token taken; false when it was parked, its key having
// keyLimit reserved or no token (the key then waits for one), or when its
// key could not be read (it goes back to ready, and the error ends the
// take). Under s.mu.
func (s *Store) hold(tp *topic, i uint32, keyLimit int, now time.Time) (bool, error) {
	rated := tp.rates.Rate().Limit > 0
	if tp.held == nil && !rated {
		return true, nil
	}
	k, err := s.keyOf(i)
	if err != nil {
		tp.ready.insert(s.x, i)
		return false, err
	}
	if tp.atLimit(k, keyLimit) {
		s.park(tp, i, k, keyLimit)
		return false, nil
	}
	if rated {
		if at, ok := tp.rates.Take(k, now); !ok {
			s.wait(tp, s.parkIn(tp, i, k), at)
			return false, nil
		}
	}
	switch {
	case k == "":
	case tp.held != nil:
		tp.held[k]++
	default:
		delete(s.x.keys, i) // kept for reserved slots only while held counts
	}
	return true, nil
}

// wait makes the key of h wait for its bucket's token at at, out of the
// ring, unless it waits already.
func (s *Store) wait(tp *topic, h *keyHeap, at time.Time) {
	if h.turn != nil {
		tp.ring.Remove(h.turn)
		h.turn = nil
	}
	if h.waitAt == 0 {
		h.waitAt = at.UnixNano()
		tp.rates.Wait(h.key, at)
	}
}

// refill ends the wait of tp's keys whose token came by now: it moves
// back to ready as many heads of each key's heap as its bucket holds
// tokens, the key waiting again for the next token when slots are left,
// or, fair, puts the key back in the ring. A key whose heap went (its
// jobs cancelled, moved back to ready) or waits for a later time since is
// passed over. Under s.mu.
func (s *Store) refill(tp *topic, now time.Time) {
	for {
		k, at, ok := tp.rates.Due(now)
		if !ok {
			return
		}
		h := tp.parked[k]
		if h == nil || h.waitAt != at.UnixNano() {
			continue
		}
		h.waitAt = 0
		if tp.fair {
			tp.enterRing(h)
			continue
		}
		n, next := tp.rates.Tokens(k, now)
		for ; n > 0 && tp.parked[k] == h; n-- {
			i := h.peek()
			s.unpark(tp, i)
			tp.ready.insert(s.x, i)
		}
		if tp.parked[k] == h {
			s.wait(tp, h, next)
		}
	}
}

// release gives back the slot of reserved slot i, whose delivery ended:
// its key's first parked slot goes back to ready, in its place. The index
// forgets i's key, which a later take reads again: it keeps the keys of
// reserved and parked slots only, so that pending jobs cost the garbage
// collector nothing. Under s.mu.
func (s *Store) release(tp *topic, i uint32) {
	if tp.held == nil {
		return
	}
	k, ok := s.x.keys[i] // every reserved slot with a key has it while held counts
	if !ok {
		return
	}
	delete(s.x.keys, i)
	if tp.held[k]--; tp.held[k] <= 0 {
		delete(tp.held, k)
	}
	h := tp.parked[k]
	switch {
	case h == nil:
	case tp.fair:
		tp.enterRing(h)
	default:
		next := h.peek()
		s.unpark(tp, next)
		tp.ready.insert(s.x, next)
	}
}

// atLimit says a slot of key k may not be reserved by a take with limit,
// its key having that many reserved.
func (tp *topic) atLimit(k string, limit int) bool {
	return limit > 0 && k != "" && tp.held[k] >= limit
}

// keyOf returns the business key of slot i: from the index when it has
// it, else read from its j key once and kept. Under s.mu. Errors:
// ErrUnavailable, a corrupt record.
func (s *Store) keyOf(i uint32) (string, error) {
	if k, ok := s.x.keys[i]; ok {
		return k, nil
	}
	sl := &s.x.slots[i]
	if !sl.has(hasKey) {
		return "", nil
	}
	id := s.x.id(i)
	// The key leads the record: read in place, not the body with it.
	v, closer, err := s.db.Get(idKey(prefixRecord, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return "", fmt.Errorf("pebblestore: job %q: record missing: %w", id, errCorrupt)
	}
	if err != nil {
		return "", wrap(err)
	}
	k, err := recordKey(v)
	_ = closer.Close()
	if err != nil {
		return "", fmt.Errorf("pebblestore: job %q: %w", id, err)
	}
	if k == "" {
		sl.set(hasKey, false) // loaded not knowing: now known
		return "", nil
	}
	s.x.keys[i] = k
	return k, nil
}

// park moves slot i of key k, popped from tp's ready heap by a take with
// limit, to the key's parked heap, in its place.
func (s *Store) park(tp *topic, i uint32, k string, limit int) {
	s.parkIn(tp, i, k)
	if tp.parkedUnder == 0 || limit < tp.parkedUnder {
		tp.parkedUnder = limit
	}
}

// parkIn puts slot i of key k in the key's parked heap, in its place, and
// returns the heap.
func (s *Store) parkIn(tp *topic, i uint32, k string) *keyHeap {
	if tp.parked == nil {
		tp.parked = make(map[string]*keyHeap)
	}
	h := tp.parked[k]
	if h == nil {
		h = &keyHeap{heap: heap{byPriority: true}, key: k}
		tp.parked[k] = h
	}
	h.insert(s.x, i)
	s.x.slots[i].set(parked, true)
	tp.parkedN++
	return h
}

// unpark takes parked slot i out of its key's heap, in none after; a key
// with none left leaves the ring.
func (s *Store) unpark(tp *topic, i uint32) {
	k := s.x.keys[i]
	h := tp.parked[k]
	h.remove(s.x, i)
	s.x.slots[i].set(parked, false)
	if h.Len() == 0 {
		if h.turn != nil {
			tp.ring.Remove(h.turn)
			h.turn = nil
		}
		delete(tp.parked, k)
	}
	if tp.parkedN--; tp.parkedN == 0 {
		tp.parkedUnder = 0
	}
}

// unparkAll moves every parked slot of tp back to ready, in its place.
func (s *Store) unparkAll(tp *topic) {
	for _, h := range tp.parked {
		for _, i := range h.items {
			s.x.slots[i].set(parked, false)
			tp.ready.insert(s.x, i)
		}
	}
	tp.parked, tp.parkedN, tp.parkedUnder = nil, 0, 0
	tp.fair, tp.ringLimit = false, 0
	tp.ring.Init()
	tp.rates.Unwait()
}

// enterRing puts h at the back of the ring when it is out of it, has a
// slot, its key is under the limit of the fair takes and not waiting for
// a token.
func (tp *topic) enterRing(h *keyHeap) {
	if h.turn == nil && h.Len() > 0 && h.waitAt == 0 && !tp.atLimit(h.key, tp.ringLimit) {
		h.turn = tp.ring.PushBack(h)
	}
}

// ringAll readies tp's ring for a fair take with keyLimit: a limit higher
// than the last, or none, brings back the keys out at the last one, and
// the slots come due since the last take are parked in their keys' heaps.
// A failed read of a key leaves its slot ready and returns the error.
// Under s.mu.
func (s *Store) ringAll(tp *topic, keyLimit int) error {
	if tp.ringLimit != 0 && (keyLimit == 0 || keyLimit > tp.ringLimit) {
		tp.ringLimit = keyLimit
		for _, h := range tp.parked {
			tp.enterRing(h)
		}
	}
	tp.ringLimit = keyLimit
	for tp.ready.Len() > 0 {
		i := tp.ready.pop(s.x)
		k, err := s.keyOf(i)
		if err != nil {
			tp.ready.insert(s.x, i)
			return err
		}
		tp.enterRing(s.parkIn(tp, i, k))
	}
	return nil
}

// nextFair unparks and returns the slot a fair take with keyLimit reserves
// next at now, counted against its key and its key's token taken, and
// moves its key to the back of the ring, or out of it at its limit or
// without a token; false when no key has a slot to take. Under s.mu.
func (s *Store) nextFair(tp *topic, keyLimit int, now time.Time) (uint32, bool) {
	for tp.ring.Len() > 0 {
		h := tp.ring.Front().Value.(*keyHeap)
		if tp.atLimit(h.key, keyLimit) {
			tp.ring.Remove(h.turn) // lowered limit: back once a slot of the key comes back
			h.turn = nil
			continue
		}
		if tp.rates.Rate().Limit > 0 {
			if at, ok := tp.rates.Take(h.key, now); !ok {
				s.wait(tp, h, at)
				continue
			}
		}
		i := h.peek()
		s.unpark(tp, i) // out of the ring with its last slot
		if h.key != "" {
			if tp.held != nil {
				tp.held[h.key]++
			} else {
				delete(s.x.keys, i) // kept for reserved slots only while held counts
			}
		}
		switch {
		case h.turn == nil:
		case tp.atLimit(h.key, keyLimit):
			tp.ring.Remove(h.turn) // back once a slot of the key comes back
			h.turn = nil
		default:
			tp.ring.MoveToBack(h.turn)
		}
		return i, true
	}
	return 0, false
}

// readyHeaps returns tp's heaps of ready slots: ready and the parked ones.
func (tp *topic) readyHeaps() []*heap {
	hs := []*heap{&tp.ready}
	for _, h := range tp.parked {
		hs = append(hs, &h.heap)
	}
	return hs
}
