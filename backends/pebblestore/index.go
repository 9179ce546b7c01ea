package pebblestore

import (
	"crypto/rand"
	"encoding/base32"
	"hash/maphash"
	"time"
	"unsafe"

	"github.com/delayq/delayq/core"
)

// The in-memory index holds every unfinished job as a slot: a fixed-size,
// pointer-free struct in one slice, so that ten million pending jobs cost
// the garbage collector a few large objects rather than ten million small
// ones. Ids live in one byte arena; a pointer-free hash map finds a slot
// by id. Bodies, keys, trace contexts and errors stay on disk.

// slot is one unfinished job in the index. Slot 0 is never used, so that 0
// means none in chains.
type slot struct {
	due     int64  // heap key, ms: run_at (scheduled, ready) or lease expiry (reserved)
	runAt   int64  // ms
	seq     uint64 // heap tie-break: order of entering a heap
	hash    uint64 // of the id
	idOff   uint32 // where the id starts in the arena
	pos     int32  // index in its heap, -1 when in none (dead, free)
	topic   uint32 // index into Store.topicList
	idLen   uint8
	state   uint8 // stateCodes
	flags   uint8 // hasErr, hasHistory, hasKey, hasThen, thenUnknown, parked
	prio    int8  // the job's priority, which orders the ready heap
	attempt uint16
	maxAtt  uint16
	ttrMs   uint32
}

// Flags of a slot.
const (
	hasErr      uint8 = 1 << iota // an e key holds the job's last error
	hasHistory                    // an h key holds attempts that ended
	hasKey                        // the job has a business key (in its j key)
	hasThen                       // the job has a next step (in its j key)
	thenUnknown                   // loaded without its j key: a finish reads whether it has a next step
	parked                        // ready, in its topic's parked heap of its key rather than in ready (keys.go)
)

// has reports whether sl has flag f.
func (sl *slot) has(f uint8) bool { return sl.flags&f != 0 }

// set sets flag f of sl, or clears it.
func (sl *slot) set(f uint8, on bool) {
	if on {
		sl.flags |= f
	} else {
		sl.flags &^= f
	}
}

// delivery is what the index keeps of a reserved slot's delivery: its
// lease token, and when its attempt started (ms) and its via code.
type delivery struct {
	token              lease
	start              int64
	via                uint8
	instance, consumer string
}

// setFixed sets what a put fixes of a slot: its topic, max attempts, ttr
// and priority.
func (sl *slot) setFixed(tp *topic, maxAttempts int, ttr time.Duration, priority int) {
	sl.topic, sl.maxAtt, sl.ttrMs, sl.prio = tp.num, uint16(maxAttempts), uint32(ttr/time.Millisecond), int8(priority)
}

// lease is a delivery's token: 128 random bits, so that a token of a
// delivery before a restart can never name a later one.
type lease [16]byte

var leaseEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

func newLease() lease {
	var l lease
	_, _ = rand.Read(l[:]) // never fails (crypto/rand)
	return l
}

func (l lease) String() string { return leaseEncoding.EncodeToString(l[:]) }

func parseLease(s string) (lease, bool) {
	var l lease
	if leaseEncoding.DecodedLen(len(s)) != len(l) {
		return l, false
	}
	n, err := leaseEncoding.Decode(l[:], []byte(s))
	return l, err == nil && n == len(l)
}

// index is the in-memory index; the Store's mutex guards it.
type index struct {
	slots   []slot
	free    []uint32
	arena   []byte
	garbage int                 // arena bytes of freed ids
	table   []uint32            // slot numbers by hash of id, 0 for none; a power of two long
	used    int                 // slots in table
	leases  map[uint32]delivery // reserved slots' deliveries
	// retention holds the own retention (core.Job.Retention) of the slots
	// that have one: few jobs do, so a slot does not carry it.
	retention map[uint32]time.Duration
	// keys holds the business keys of the reserved and parked slots of
	// the topics whose claims bound jobs per key (keys.go), each read from
	// its j key when a take first met it.
	keys   map[uint32]string
	hashOf func(id string) uint64
	seq    uint64
}

func newIndex() *index {
	x := &index{
		slots:     make([]slot, 1, 1024),
		table:     make([]uint32, 1024),
		leases:    make(map[uint32]delivery),
		retention: make(map[uint32]time.Duration),
		keys:      make(map[uint32]string),
	}
	seed := maphash.MakeSeed()
	x.hashOf = func(id string) uint64 { return maphash.String(seed, id) }
	return x
}

// reserve makes room for n more jobs whose ids take idBytes, so that
// adding them copies nothing.
func (x *index) reserve(n, idBytes int) {
	x.slots = append(make([]slot, 0, len(x.slots)+n), x.slots...)
	x.arena = append(make([]byte, 0, len(x.arena)+idBytes), x.arena...)
	x.resize(x.used + n)
}

// resize makes the table at least twice n long and places every slot in
// it again.
func (x *index) resize(n int) {
	size := len(x.table)
	for size < 2*n {
		size *= 2
	}
	if size == len(x.table) {
		return
	}
	old := x.table
	x.table = make([]uint32, size)
	for _, i := range old {
		if i != 0 {
			x.place(i)
		}
	}
}

// place puts slot i in the first free place of the table from its hash.
func (x *index) place(i uint32) {
	mask := uint64(len(x.table) - 1)
	for p := x.slots[i].hash & mask; ; p = (p + 1) & mask {
		if x.table[p] == 0 {
			x.table[p] = i
			return
		}
	}
}

// id returns slot i's id; the string aliases the arena, so it is valid only
// until the arena changes: copy it (strings.Clone) to keep it.
func (x *index) id(i uint32) string {
	s := &x.slots[i]
	return unsafe.String(&x.arena[s.idOff], int(s.idLen))
}

// lookup returns the slot of id, or 0.
func (x *index) lookup(id string) uint32 {
	h := x.hashOf(id)
	mask := uint64(len(x.table) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		i := x.table[p]
		if i == 0 {
			return 0
		}
		if x.slots[i].hash == h && x.id(i) == id {
			return i
		}
	}
}

// add makes a slot for id, which must not be in the index.
func (x *index) add(id string) uint32 {
	var i uint32
	if n := len(x.free); n > 0 {
		i = x.free[n-1]
		x.free = x.free[:n-1]
	} else {
		x.slots = append(doubled(x.slots, 1), slot{})
		i = uint32(len(x.slots) - 1)
	}
	x.slots[i] = slot{hash: x.hashOf(id), idOff: uint32(len(x.arena)), idLen: uint8(len(id)), pos: -1}
	x.arena = append(doubled(x.arena, len(id)), id...)
	if x.used++; 2*x.used > len(x.table) {
		x.resize(x.used)
	}
	x.place(i)
	return i
}

// doubled returns s with room for n more, doubling its capacity when it
// has not: append grows a large slice by a quarter, so that an intake of
// millions of jobs would spend a sixth of its CPU copying the index
// (profile of the load harness's batch intake).
func doubled[S ~[]E, E any](s S, n int) S {
	if len(s)+n <= cap(s) {
		return s
	}
	// A new array rather than slices.Grow, which clears the room it adds
	// and so makes it resident before it is used.
	grown := make(S, len(s), 2*len(s)+n)
	copy(grown, s)
	return grown
}

// remove frees slot i, which must be in no heap.
// setRetention records slot i's own retention, r (0 for none).
func (x *index) setRetention(i uint32, r time.Duration) {
	if r > 0 {
		x.retention[i] = r
	} else {
		delete(x.retention, i)
	}
}

func (x *index) remove(i uint32) {
	s := &x.slots[i]
	x.unplace(i)
	x.used--
	delete(x.leases, i)
	delete(x.retention, i)
	delete(x.keys, i)
	x.garbage += int(s.idLen)
	*s = slot{pos: -1}
	x.free = append(x.free, i)
	if x.garbage > 1<<20 && x.garbage > len(x.arena)/2 {
		x.compact()
	}
}

// unplace takes slot i out of the table and moves the slots after it in
// its run back where a probe finds them (backward-shift deletion, so that
// the table needs no tombstones).
func (x *index) unplace(i uint32) {
	mask := uint64(len(x.table) - 1)
	p := x.slots[i].hash & mask
	for x.table[p] != i {
		p = (p + 1) & mask
	}
	for q := (p + 1) & mask; x.table[q] != 0; q = (q + 1) & mask {
		// The slot at q may fill the hole at p unless its home lies
		// cyclically in (p, q].
		home := x.slots[x.table[q]].hash & mask
		if (q > p && (home <= p || home > q)) || (q < p && home <= p && home > q) {
			x.table[p] = x.table[q]
			p = q
		}
	}
	x.table[p] = 0
}

// compact copies the live ids to a new arena, so that the arena holds at
// most twice what live ids need.
func (x *index) compact() {
	arena := make([]byte, 0, len(x.arena)-x.garbage+len(x.arena)/8)
	for i := 1; i < len(x.slots); i++ {
		s := &x.slots[i]
		if s.state == 0 {
			continue
		}
		off := len(arena)
		arena = append(arena, x.arena[s.idOff:s.idOff+uint32(s.idLen)]...)
		s.idOff = uint32(off)
	}
	x.arena, x.garbage = arena, 0
}

func (x *index) state(i uint32) core.State { return codeStates[x.slots[i].state] }

// heap is a min-heap of slots by due time, then by order of entry (with
// byPriority, by priority first); each slot knows its position.
type heap struct {
	items      []uint32
	byPriority bool
}

func (h *heap) Len() int { return len(h.items) }

func (h *heap) less(x *index, a, b int) bool {
	sa, sb := &x.slots[h.items[a]], &x.slots[h.items[b]]
	if h.byPriority && sa.prio != sb.prio {
		return sa.prio < sb.prio
	}
	if sa.due != sb.due {
		return sa.due < sb.due
	}
	return sa.seq < sb.seq
}

func (h *heap) swap(x *index, a, b int) {
	h.items[a], h.items[b] = h.items[b], h.items[a]
	x.slots[h.items[a]].pos = int32(a)
	x.slots[h.items[b]].pos = int32(b)
}

func (h *heap) up(x *index, j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !h.less(x, j, p) {
			return
		}
		h.swap(x, p, j)
		j = p
	}
}

func (h *heap) down(x *index, i int) bool {
	start, n := i, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(x, r, l) {
			j = r
		}
		if !h.less(x, j, i) {
			break
		}
		h.swap(x, i, j)
		i = j
	}
	return i > start
}

// push adds slot i with due time due (ms).
func (h *heap) push(x *index, i uint32, due int64) {
	x.seq++
	s := &x.slots[i]
	s.due, s.seq, s.pos = due, x.seq, int32(len(h.items))
	h.items = append(h.items, i)
	h.up(x, len(h.items)-1)
}

// insert adds slot i with its due time and order of entry kept, so that a
// slot moved between the ready and parked heaps keeps its place.
func (h *heap) insert(x *index, i uint32) {
	x.slots[i].pos = int32(len(h.items))
	h.items = append(h.items, i)
	h.up(x, len(h.items)-1)
}

// load appends slot i with due time due (ms) without ordering the heap,
// for a start that adds every job before it calls init once: O(n) in all
// rather than O(n log n).
func (h *heap) load(x *index, i uint32, due int64) {
	x.seq++
	s := &x.slots[i]
	s.due, s.seq, s.pos = due, x.seq, int32(len(h.items))
	h.items = append(h.items, i)
}

// init orders a heap filled by load.
func (h *heap) init(x *index) {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(x, i)
	}
}

// peek returns the first slot; the heap must not be empty.
func (h *heap) peek() uint32 { return h.items[0] }

// pop removes and returns the first slot.
func (h *heap) pop(x *index) uint32 {
	i := h.items[0]
	h.remove(x, i)
	return i
}

// remove takes slot i out of the heap.
func (h *heap) remove(x *index, i uint32) {
	p := int(x.slots[i].pos)
	n := len(h.items) - 1
	if p != n {
		h.swap(x, p, n)
	}
	h.items = h.items[:n]
	x.slots[i].pos = -1
	if p != n {
		if !h.down(x, p) {
			h.up(x, p)
		}
	}
	if cap(h.items) > 1024 && len(h.items) < cap(h.items)/4 {
		h.items = append([]uint32(nil), h.items...)
	}
}

// fix moves slot i to its new due time.
func (h *heap) fix(x *index, i uint32, due int64) {
	x.slots[i].due = due
	p := int(x.slots[i].pos)
	if !h.down(x, p) {
		h.up(x, p)
	}
}
