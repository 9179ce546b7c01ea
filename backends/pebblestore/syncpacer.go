package pebblestore

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// walMinSyncInterval is the most time left between two fsyncs of the
// write-ahead log: the interval while writes that wait for their fsync come
// at walSyncGroup / walMinSyncInterval a second (2 000) or slower.
// docs/benchmarks.md measures 2 ms as the point where one-job pushes at a
// steady 1 000/s still reach the throughput of no wait while their fsyncs'
// CPU falls by a third.
const walMinSyncInterval = 2 * time.Millisecond

// walSyncGroup is how many writes that wait for their fsync the pacer lets
// come, at their recent rate, before the next fsync starts.
const walSyncGroup = 4

// syncPacerWindow is the time constant of the pacer's smoothed rate: it
// follows a change of load within a few times this, and one short cycle's
// count does not swing the next interval.
const syncPacerWindow = 5 * time.Millisecond

// syncPacer paces the fsyncs of the write-ahead log: Pebble asks it, after
// each fsync, how long to wait before the next (WALMinSyncInterval). It
// leaves the time walSyncGroup writes that wait for their fsync take to
// come at their recent rate, at most walMinSyncInterval: pushes that come
// one at a time share an fsync, and callers that push again as soon as
// they are answered (a client's pool of connections) wait under a
// millisecond or about one for theirs, not 2 ms (Go's runtime may stretch
// a shorter timer to 1 ms when it has nothing else to run;
// docs/benchmarks.md measured that a shorter or exact wait pushes no
// more). The interval follows the rate smoothed
// over the last few milliseconds (syncPacerWindow): going by one cycle's
// count alone (wait when few came, none when many did) makes a long cycle
// and a short one alternate, the short one's fsync shared by one or two
// writes.
type syncPacer struct {
	// waits counts the writes that wait for their fsync since Pebble last
	// asked.
	waits atomic.Int32
	now   func() time.Time

	// mu guards last and rate: each log file's writer asks from a
	// goroutine of its own, and the next file's may start before the
	// last one's is done.
	mu   sync.Mutex
	last time.Time
	rate float64 // writes that waited for their fsync per second, smoothed
}

func newSyncPacer(now func() time.Time) *syncPacer { return &syncPacer{now: now} }

// waited counts a write that waits for its fsync.
func (p *syncPacer) waited() { p.waits.Add(1) }

// interval is Pebble's WALMinSyncInterval.
func (p *syncPacer) interval() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.waits.Swap(0)
	now := p.now()
	if elapsed := now.Sub(p.last); !p.last.IsZero() && elapsed > 0 {
		w := 1 - math.Exp(-float64(elapsed)/float64(syncPacerWindow))
		p.rate = w*float64(n)/elapsed.Seconds() + (1-w)*p.rate
	}
	p.last = now
	if p.rate*walMinSyncInterval.Seconds() <= walSyncGroup {
		return walMinSyncInterval
	}
	return time.Duration(walSyncGroup / p.rate * float64(time.Second))
}
