package pebblestore

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
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

// keyLimits is what a topic keeps for the takes that bound its jobs per
// key.
type keyLimits struct {
	// held counts the reserved slots by business key; nil while the
	// topic's takes bound none.
	held map[string]int
	// parked holds the parked slots by key, each heap in claim order;
	// parkedN in all, parkedUnder the lowest limit they were parked under
	// (0 with none).
	parked      map[string]*heap
	parkedN     int
	parkedUnder int
}

// limitKeys readies tp for a take with keyLimit (0: none): a take whose
// limit is higher than the one slots were parked under, or none, moves
// them back to ready; the first take with a limit counts the reserved
// slots by key, and a take without one stops the count. Under s.mu.
func (s *Store) limitKeys(tp *topic, keyLimit int) error {
	if tp.parkedN > 0 && (keyLimit == 0 || keyLimit > tp.parkedUnder) {
		s.unparkAll(tp)
	}
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
// keyLimit: true when the take may reserve it, counted against its key;
// false when it was parked, its key having keyLimit reserved, or when its
// key could not be read (it goes back to ready, and the error ends the
// take). Under s.mu.
func (s *Store) hold(tp *topic, i uint32, keyLimit int) (bool, error) {
	if tp.held == nil {
		return true, nil
	}
	k, err := s.keyOf(i)
	if err != nil {
		tp.ready.insert(s.x, i)
		return false, err
	}
	if k == "" {
		return true, nil
	}
	if tp.held[k] >= keyLimit {
		s.park(tp, i, k, keyLimit)
		return false, nil
	}
	tp.held[k]++
	return true, nil
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
	if h := tp.parked[k]; h != nil {
		next := h.peek()
		s.unpark(tp, next)
		tp.ready.insert(s.x, next)
	}
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
	if tp.parked == nil {
		tp.parked = make(map[string]*heap)
	}
	h := tp.parked[k]
	if h == nil {
		h = &heap{byPriority: true}
		tp.parked[k] = h
	}
	h.insert(s.x, i)
	s.x.slots[i].set(parked, true)
	if tp.parkedN++; tp.parkedUnder == 0 || limit < tp.parkedUnder {
		tp.parkedUnder = limit
	}
}

// unpark takes parked slot i out of its key's heap, in none after.
func (s *Store) unpark(tp *topic, i uint32) {
	k := s.x.keys[i]
	h := tp.parked[k]
	h.remove(s.x, i)
	s.x.slots[i].set(parked, false)
	if h.Len() == 0 {
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
}

// readyHeaps returns tp's heaps of ready slots: ready and the parked ones.
func (tp *topic) readyHeaps() []*heap {
	hs := []*heap{&tp.ready}
	for _, h := range tp.parked {
		hs = append(hs, h)
	}
	return hs
}
