package wstransport

import (
	"context"
	"sync"
	"time"

	"github.com/delayq/delayq/core"
)

// acker coalesces the ack frames of every connection of a server into
// Engine.AckBatch calls, a group commit: an ack that finds fewer than
// acksInFlight batches under way sends the queue, and the acks that arrive
// while all are busy go together in the next batch, sent as soon as one
// returns, up to the engine's MaxBatch each. A lone ack goes at once, so
// none waits for a batch to fill, and one slow batch does not hold up the
// others. Each ack gets its own answer.
//
// A burst of deliveries to WebSocket subscribers is acknowledged one frame
// per job: one store call per frame cost more than the store's work (the
// decorators' per-call costs, a lock, a round trip to Redis), where one
// call for many writes them together on every backend.
type acker struct {
	engine  *core.Engine
	timeout time.Duration

	mu      sync.Mutex
	queue   []*ackReq
	sending int // batches under way
}

// acksInFlight bounds the batches of acks under way at once.
const acksInFlight = 4

// ackReq is one ack waiting for its batch.
type ackReq struct {
	p    core.AckJobParams
	done chan struct{} // closed when err is set
	err  error
}

// ack acknowledges the delivery of job id with lease and returns its own
// result, as Engine.Ack would.
func (a *acker) ack(id, lease string) error {
	r := &ackReq{p: core.AckJobParams{ID: id, Lease: lease}, done: make(chan struct{})}
	a.mu.Lock()
	a.queue = append(a.queue, r)
	lead := a.sending < acksInFlight
	if lead {
		a.sending++
	}
	a.mu.Unlock()
	if lead {
		a.send()
	}
	<-r.done
	return r.err
}

// send sends one batch of the queue (which holds the caller's own ack, or
// an earlier batch took it) and hands the rest, if any, to a goroutine of
// its own, so that no caller waits for others' batches.
func (a *acker) send() {
	limit := max(a.engine.Limits().MaxBatch, 1)
	a.mu.Lock()
	batch := a.queue[:min(len(a.queue), limit)]
	a.queue = a.queue[len(batch):]
	if len(batch) == 0 {
		a.sending--
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()

	p := &core.AckJobsParams{Acks: make([]core.AckJobParams, len(batch))}
	for i, r := range batch {
		p.Acks[i] = r.p
	}
	ctx, cancel := context.WithTimeout(core.WithTransport(context.Background(), core.TransportWebSocket), a.timeout)
	errs, err := a.engine.AckBatch(ctx, p)
	cancel()
	for i, r := range batch {
		r.err = err
		if err == nil {
			r.err = errs[i]
		}
		close(r.done)
	}

	a.mu.Lock()
	more := len(a.queue) > 0
	if !more {
		a.sending--
	}
	a.mu.Unlock()
	if more {
		go a.send()
	}
}
