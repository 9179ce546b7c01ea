package natsstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// puller feeds the messages of a durable pull consumer to a handler, on up
// to workers goroutines, until stopped. Stop drains: messages already
// fetched still reach the handler, so none waits for the ack wait to come
// back.
type puller struct {
	s       *Store
	cons    jetstream.Consumer
	handle  func(jetstream.Msg)
	workers int
	batch   int

	mu      sync.Mutex
	it      jetstream.MessagesContext
	stopped bool
	quit    chan struct{} // closed by stop
	done    chan struct{} // closed when run returns

	abort       context.Context // cancelled when a drain takes too long
	abortCancel context.CancelFunc
}

func newPuller(s *Store, cons jetstream.Consumer, handle func(jetstream.Msg), workers int) *puller {
	abort, cancel := context.WithCancel(context.Background())
	return &puller{s: s, cons: cons, handle: handle, workers: workers, batch: 256, quit: make(chan struct{}), done: make(chan struct{}), abort: abort, abortCancel: cancel}
}

// run pulls until stop; it restarts the iterator after errors such as a
// reconnect to another server.
func (p *puller) run() {
	defer close(p.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, max(p.workers, 1))
	backoff := 10 * time.Millisecond
	for {
		it, err := p.cons.Messages(jetstream.PullMaxMessages(p.batch), jetstream.PullHeartbeat(5*time.Second))
		if err == nil {
			p.mu.Lock()
			if p.stopped {
				p.mu.Unlock()
				it.Stop()
				return
			}
			p.it = it
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
						p.s.log.Warn("natsstore: pull", "consumer", p.cons.CachedInfo().Name, "err", err)
						it.Stop()
					}
					break
				}
				if p.workers <= 1 {
					p.handle(m)
					continue
				}
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-sem; wg.Done() }()
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
		case <-time.After(backoff):
		case <-p.quit:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// drainWait bounds how long stop waits for a drain: with the connection
// lost, nats.go's drain waits out a 10s flush.
const drainWait = 2 * time.Second

// stop drains the iterator (stops it when the connection is down, or gives
// up the drain after drainWait) and waits until run has returned and every
// handler has finished. Messages not handled go back to the stream after
// AckWait. Idempotent.
func (p *puller) stop() {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		close(p.quit)
	}
	it := p.it
	p.mu.Unlock()
	defer p.abortCancel()
	if it != nil {
		if p.s.nc.IsConnected() {
			it.Drain()
		} else {
			it.Stop()
		}
	}
	t := time.NewTimer(drainWait)
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
