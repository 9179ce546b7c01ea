package memstore

import (
	"container/heap"
	"time"
)

// queue is a min-heap of entries by key, then by order of entry; with
// byPriority, by the job's priority first.
type queue struct {
	items      []*entry
	byPriority bool
}

// Len implements heap.Interface.
func (q *queue) Len() int { return len(q.items) }

// Less implements heap.Interface.
func (q *queue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if q.byPriority && a.job.Priority != b.job.Priority {
		return a.job.Priority < b.job.Priority
	}
	if a.key != b.key {
		return a.key < b.key
	}
	return a.seq < b.seq
}

// Swap implements heap.Interface.
func (q *queue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].index = i
	q.items[j].index = j
}

// Push implements heap.Interface; use add.
func (q *queue) Push(x any) {
	e := x.(*entry)
	e.index = len(q.items)
	q.items = append(q.items, e)
}

// Pop implements heap.Interface; use pop.
func (q *queue) Pop() any {
	n := len(q.items) - 1
	e := q.items[n]
	q.items[n] = nil
	q.items = q.items[:n]
	e.index = -1
	return e
}

func (q *queue) add(e *entry, at time.Time) {
	e.key = at.UnixNano()
	heap.Push(q, e)
}

func (q *queue) peek() *entry { return q.items[0] }

func (q *queue) pop() *entry { return heap.Pop(q).(*entry) }

func (q *queue) remove(e *entry) { heap.Remove(q, e.index) }

func (q *queue) fix(e *entry, at time.Time) {
	e.key = at.UnixNano()
	heap.Fix(q, e.index)
}
