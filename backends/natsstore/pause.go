package natsstore

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// keyPaused + topic, in the topic bucket: the topic is paused. Resuming
// purges the key.
const keyPaused = "paused."

// pauses is this instance's view of the paused topics, which claims check
// in memory: a watch of the bucket's paused keys keeps it, so that a pause
// costs a claim nothing on the server and reaches every instance as fast as
// the server tells them.
type pauses struct {
	mu     sync.Mutex
	topics map[string]bool
	notify *core.Notifier // told of every change, which may be a resume
	// stop ends the watch, at Close. The unsubscribe runs on its own: with
	// the server gone it waits for a JetStream request to time out.
	stop context.CancelFunc
}

// paused reports whether topic is paused.
func (p *pauses) paused(topic string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.topics[topic]
}

func (p *pauses) set(topic string, paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.topics[topic] == paused {
		return
	}
	if paused {
		p.topics[topic] = true
	} else {
		delete(p.topics, topic)
	}
	p.notify.Notify(topic)
}

// watchPauses starts the watch of the paused keys and returns once this
// instance's view holds every topic paused so far. The watch lasts until
// Close.
func (s *Store) watchPauses(ctx context.Context) error {
	// The subscription ends with its context: the store's life, not New's.
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.pauses = pauses{topics: map[string]bool{}, notify: &s.notify, stop: stop}
	w, err := s.kv.Watch(life, keyPaused+">")
	if err != nil {
		stop()
		return unavailable("watch paused topics", err)
	}
	apply := func(e jetstream.KeyValueEntry) {
		s.pauses.set(e.Key()[len(keyPaused):], e.Operation() == jetstream.KeyValuePut)
	}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				stop()
				return unavailable("watch paused topics", core.ErrClosed)
			}
			if e != nil {
				apply(e)
				continue
			}
		case <-ctx.Done():
			stop()
			return unavailable("watch paused topics", ctx.Err())
		}
		break
	}
	s.wg.Go(func() {
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					apply(e)
				}
			case <-s.done:
				return
			}
		}
	})
	return nil
}

// SetTopicPaused implements core.Store: a key of the topic bucket, which
// every instance watches. This instance applies the change at once, the
// others as the server tells them (within milliseconds). Errors: ErrClosed,
// ErrUnavailable.
func (s *Store) SetTopicPaused(ctx context.Context, name string, paused bool) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	var err error
	if paused {
		_, err = s.kv.Put(ctx, keyPaused+name, []byte("{}"))
	} else {
		err = s.kv.Purge(ctx, keyPaused+name)
	}
	if err != nil {
		return unavailable("pause topic", err)
	}
	s.pauses.set(name, paused)
	return nil
}
