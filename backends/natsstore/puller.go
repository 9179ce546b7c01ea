package natsstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// puller feeds the messages of durable pull consumers to a handler, on up
// to workers goroutines (per consumer when workers is 1: the handler is
// called inline), until stopped. Stop drains: messages already fetched
// still reach the handler, so none waits for the ack wait to come back.
//
// It takes several consumers, each with one filter subject, rather than one
// consumer with several: nats-server 2.15 looks for a multi-filter
// consumer's next message by intersecting the filters with every subject of
// the message block, for each message it delivers, which took 40% of the
// process's CPU at 10 000 due jobs/s (a single filter finds the next
// message by a short linear scan instead).
type puller struct {
	s       *Store
	cons    []jetstream.Consumer
	handle  func(jetstream.Msg)
	workers int
	batch   int

	mu      sync.Mutex
	its     map[int]jetstream.MessagesContext // by index in cons
	stopped bool
	quit    chan struct{} // closed by stop
	done    chan struct{} // closed when run returns

	abort       context.Context // cancelled when a drain takes too long
	abortCancel context.CancelFunc
}

func newPuller(s *Store, cons []jetstream.Consumer, handle func(jetstream.Msg), workers int) *puller {
	abort, cancel := context.WithCancel(context.Background())
	return &puller{s: s, cons: cons, handle: handle, workers: workers, batch: 256, its: make(map[int]jetstream.MessagesContext), quit: make(chan struct{}), done: make(chan struct{}), abort: abort, abortCancel: cancel}
}

// run pulls from every consumer until stop, and returns once every handler
// has finished.
func (p *puller) run() {
	defer close(p.done)
	var handlers, loops sync.WaitGroup
	defer handlers.Wait()
	sem := make(chan struct{}, max(p.workers, 1))
	for i, c := range p.cons {
		loops.Go(func() { p.pull(i, c, sem, &handlers) })
	}
	loops.Wait()
}

// pull pulls from one consumer until stop; it restarts the iterator after
// errors such as a reconnect to another server.
func (p *puller) pull(i int, cons jetstream.Consumer, sem chan struct{}, handlers *sync.WaitGroup) {
	backoff := 10 * time.Millisecond
	for {
		it, err := cons.Messages(jetstream.PullMaxMessages(p.batch), jetstream.PullHeartbeat(5*time.Second))
		if err == nil {
			p.mu.Lock()
			if p.stopped {
				p.mu.Unlock()
				it.Stop()
				return
			}
			p.its[i] = it
			p.mu.Unlock()
			backoff = 10 * time.Millisecond
			for {
				m, err := it.Next(jetstream.NextContext(p.abort))
				if err != nil {
					if errors.Is(err, context.Canceled) {
						it.Stop()
						break
					}
					if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
						p.s.log.Warn("natsstore: pull", "consumer", cons.CachedInfo().Name, "err", err)
						it.Stop()
					}
					break
				}
				if p.workers <= 1 {
					p.handle(m)
					continue
				}
				sem <- struct{}{}
				handlers.Add(1)
				go func() {
					defer func() { <-sem; handlers.Done() }()
					p.handle(m)
				}()
			}
		} else {
			p.s.log.Warn("natsstore: pull", "err", err)
		}
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		select {
		case <-time.After(backoff): // the server's pace, real time: see "Clocks" in doc.go
		case <-p.quit:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// drainWait bounds how long stop waits for a drain: with the connection
// lost, nats.go's drain waits out a 10s flush.
const drainWait = 2 * time.Second

// stop drains the iterators (stops them when the connection is down, or gives
// up the drain after drainWait) and waits until run has returned and every
// handler has finished. Messages not handled go back to the stream after
// AckWait. Idempotent.
func (p *puller) stop() {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		close(p.quit)
	}
	its := make([]jetstream.MessagesContext, 0, len(p.its))
	for _, it := range p.its {
		its = append(its, it)
	}
	p.mu.Unlock()
	defer p.abortCancel()
	for _, it := range its {
		if p.s.nc.IsConnected() {
			it.Drain()
		} else {
			it.Stop()
		}
	}
	t := time.NewTimer(drainWait) // bounds nats.go's drain, which runs in real time
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.abortCancel()
		<-p.done
	}
}

// isStopped reports whether stop was called.
func (p *puller) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}
