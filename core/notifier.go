package core

import (
	"sync"
	"sync/atomic"
)

// Notifier is how a store tells the claims waiting in Claim that a topic
// changed: a job became due or due sooner (a put, a retry, a requeue, an
// expired lease, a wake-up from another instance), the topic was resumed,
// or one of its deliveries ended and freed an in-flight slot. A claim
// watches the topic before it takes, so a change made after its take is
// never missed. Its zero value is ready to use; it is safe for concurrent
// use, and a change of a topic nobody watches costs one atomic load.
type Notifier struct {
	watching atomic.Int64 // open watches, of every topic
	mu       sync.Mutex
	closed   bool
	topics   map[string]*topicWatch
}

// topicWatch holds the channels of one watched topic, each closed and
// replaced at its next change.
type topicWatch struct {
	n     int           // open watches of the topic
	due   chan struct{} // closed by Notify
	freed chan struct{} // closed by Notify and Freed
}

// Watch is one claim's watch of a topic, from Notifier.Watch to Stop.
type Watch struct {
	// Due is closed at the topic's next Notify, or when the notifier
	// closes.
	Due <-chan struct{}
	// Freed is closed as Due is, and also at the topic's next Freed: what
	// a claim held back by ClaimJobsParams.InFlightMax waits on.
	Freed <-chan struct{}

	n     *Notifier
	topic string
	tw    *topicWatch
}

// closedChan is what a watch of a closed notifier gets.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Watch starts a watch of topic; the caller calls Stop when done waiting.
func (n *Notifier) Watch(topic string) *Watch {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return &Watch{Due: closedChan, Freed: closedChan}
	}
	tw := n.topics[topic]
	if tw == nil {
		if n.topics == nil {
			n.topics = make(map[string]*topicWatch)
		}
		tw = &topicWatch{due: make(chan struct{}), freed: make(chan struct{})}
		n.topics[topic] = tw
	}
	tw.n++
	n.watching.Add(1)
	return &Watch{Due: tw.due, Freed: tw.freed, n: n, topic: topic, tw: tw}
}

// Stop ends the watch. Idempotent.
func (w *Watch) Stop() {
	if w.tw == nil {
		return
	}
	n := w.n
	n.mu.Lock()
	defer n.mu.Unlock()
	w.tw.n--
	n.watching.Add(-1)
	if w.tw.n == 0 && n.topics[w.topic] == w.tw {
		delete(n.topics, w.topic)
	}
	w.tw = nil
}

// Watched reports whether a claim watches topic now.
func (n *Notifier) Watched(topic string) bool {
	if n.watching.Load() == 0 {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.topics[topic] != nil
}

// Notify wakes every watch of topic: a job of it may be due now, or
// sooner than the watches were told, or it was resumed.
func (n *Notifier) Notify(topic string) { n.signal(topic, true) }

// Freed wakes the watches of topic held back by in-flight jobs: one of its
// deliveries ended (ack, retry, bury).
func (n *Notifier) Freed(topic string) { n.signal(topic, false) }

func (n *Notifier) signal(topic string, due bool) {
	if n.watching.Load() == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if tw := n.topics[topic]; tw != nil {
		tw.signal(due)
	}
}

// NotifyAll wakes every watch of every topic, as Notify would.
func (n *Notifier) NotifyAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, tw := range n.topics {
		tw.signal(true)
	}
}

// Close wakes every watch, and every later watch is woken at once: the
// store closed, and Claim's next take answers ErrClosed. Idempotent.
func (n *Notifier) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	for _, tw := range n.topics {
		tw.signal(true)
	}
}

func (tw *topicWatch) signal(due bool) {
	if due {
		close(tw.due)
		tw.due = make(chan struct{})
	}
	close(tw.freed)
	tw.freed = make(chan struct{})
}
