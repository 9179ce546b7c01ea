package pebblestore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestIndexCollisions: ids whose hashes collide are told apart by their
// bytes, through adds, removes and arena compactions.
func TestIndexCollisions(t *testing.T) {
	x := newIndex()
	x.hashOf = func(id string) uint64 { return uint64(len(id) % 3) } // three buckets
	live := map[string]uint32{}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 20_000 {
		id := fmt.Sprintf("job-%d-%s", n, string(make([]byte, rng.IntN(100))))
		i := x.add(id)
		x.slots[i].state = stateCodes[core.StateScheduled]
		live[id] = i
		if rng.IntN(3) > 0 { // remove two of three, some at once, some later
			for victim := range live {
				x.remove(live[victim])
				delete(live, victim)
				break
			}
		}
	}
	require.NotEmpty(t, live)
	for id, i := range live {
		require.Equal(t, i, x.lookup(id), id)
		require.Equal(t, id, x.id(i))
	}
	require.Zero(t, x.lookup("job-none"))
	require.LessOrEqual(t, len(x.arena), 2*arenaLive(x)+(1<<20), "compaction keeps the arena near what live ids need")
}

func arenaLive(x *index) int {
	n := 0
	for i := 1; i < len(x.slots); i++ {
		if x.slots[i].state != 0 {
			n += int(x.slots[i].idLen)
		}
	}
	return n
}

// TestHeapOrder: a heap pops by due time, then by order of entry, through
// removals and fixes.
func TestHeapOrder(t *testing.T) {
	x := newIndex()
	var h heap
	rng := rand.New(rand.NewPCG(3, 4))
	var want []uint32
	for n := range 2000 {
		i := x.add(fmt.Sprint(n))
		x.slots[i].state = stateCodes[core.StateReady]
		h.push(x, i, int64(rng.IntN(50)))
		want = append(want, i)
	}
	for _, i := range want[:500] {
		h.remove(x, i)
		x.slots[i].state = 0
	}
	for _, i := range want[500:700] {
		h.fix(x, i, int64(rng.IntN(50)))
	}
	var got []uint32
	for h.Len() > 0 {
		got = append(got, h.pop(x))
	}
	require.Len(t, got, 1500)
	require.True(t, slices.IsSortedFunc(got, func(a, b uint32) int {
		sa, sb := x.slots[a], x.slots[b]
		if sa.due != sb.due {
			return int(sa.due - sb.due)
		}
		return int(int64(sa.seq) - int64(sb.seq))
	}), "popped out of order")
	for _, i := range got {
		require.Equal(t, int32(-1), x.slots[i].pos)
	}
}

// TestLeaseText: a lease prints as 26 characters and parses back; other
// text is refused.
func TestLeaseText(t *testing.T) {
	l := newLease()
	s := l.String()
	require.Len(t, s, 26)
	back, ok := parseLease(s)
	require.True(t, ok)
	require.Equal(t, l, back)
	for _, bad := range []string{"", "x", s[:25], s + "A", "!!!!!!!!!!!!!!!!!!!!!!!!!!"} {
		_, ok := parseLease(bad)
		require.False(t, ok, bad)
	}
}
