package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// receipt is one delivery as a subscriber saw it.
type receipt struct {
	RunAt time.Time
	At    time.Time // when its frame was read
}

// Late is how late the job arrived: receipt minus run_at.
func (r receipt) Late() time.Duration { return r.At.Sub(r.RunAt) }

// collector gathers the deliveries of one topic from its subscribers,
// first receipts only (at least once means a job may come twice), and
// says when want distinct jobs have come.
type collector struct {
	want int

	mu   sync.Mutex
	seen map[string]struct{}
	got  []receipt
	dups int
	errs []string // the first 10
	// failures counts every error, errs only the first.
	failures int
	all      chan struct{}
	last     time.Time // the latest receipt
}

func newCollector(want int) *collector {
	return &collector{want: want, seen: make(map[string]struct{}, want), got: make([]receipt, 0, want), all: make(chan struct{})}
}

func (c *collector) add(id string, r receipt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[id]; ok {
		c.dups++
		return
	}
	c.seen[id] = struct{}{}
	c.got = append(c.got, r)
	c.last = r.At
	if len(c.got) == c.want {
		close(c.all)
	}
}

func (c *collector) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures++
	if len(c.errs) < 10 {
		c.errs = append(c.errs, err.Error())
	}
}

// await waits until every job came, or deadline passed, or none came for
// idle (once it is past start): a service that falls behind still
// delivers, and its lateness is what a run measures, but one that
// delivers nothing more will not. It fails only when ctx ends.
func (c *collector) await(ctx context.Context, start, deadline time.Time, idle time.Duration) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			c.mu.Lock()
			last := c.last
			c.mu.Unlock()
			if now.After(deadline) || (now.After(start.Add(idle)) && now.Sub(last) > idle) {
				return nil
			}
		}
	}
}

// received returns how many distinct jobs have come so far.
func (c *collector) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// failed returns how many errors the subscribers met so far, and the first.
func (c *collector) failed() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failures == 0 {
		return 0, ""
	}
	return c.failures, c.errs[0]
}

// result returns a copy of what came, the duplicates and errors.
func (c *collector) result() ([]receipt, int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]receipt(nil), c.got...), c.dups, append([]string(nil), c.errs...)
}

// phaseTopic is a fresh topic of a phase, with the harness's WebSocket
// subscribers on it.
type phaseTopic struct {
	topic string
	col   *collector
	// ctx ends when the subscribers are stopped.
	ctx  context.Context
	stop context.CancelFunc
	wait func()
}

// subscribeNew names a fresh topic under prefix and opens cfg.Subscribers
// subscribers of it, which collect want jobs.
func subscribeNew(ctx context.Context, c *client, cfg *config, prefix string, want int) (*phaseTopic, error) {
	p := &phaseTopic{topic: uniqueTopic(prefix), col: newCollector(want)}
	p.ctx, p.stop = context.WithCancel(ctx)
	var err error
	if p.wait, err = subscribe(p.ctx, c.base, p.topic, cfg.Subscribers, cfg.Prefetch, p.col); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// end stops the subscribers and waits until they have ended; it may be
// called more than once.
func (p *phaseTopic) end() {
	p.stop()
	p.wait()
}

// subscribe opens n WebSocket subscribers of topic with prefetch each,
// which hand every job to c and acknowledge it at once, as a consumer
// that does its work in no time would. They run until ctx is done; wait
// returns once they have all ended.
func subscribe(ctx context.Context, base, topic string, n, prefetch int, c *collector) (wait func(), err error) {
	url := "ws" + strings.TrimPrefix(base, "http") + "/v1/topics/" + topic + "/subscribe?prefetch=" + strconv.Itoa(prefetch)
	var wg sync.WaitGroup
	conns := make([]*websocket.Conn, 0, n)
	for range n {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, _, err := websocket.Dial(dctx, url, nil)
		cancel()
		if err != nil {
			for _, c := range conns {
				_ = c.CloseNow()
			}
			return nil, fmt.Errorf("subscribe %s: %w", topic, err)
		}
		conn.SetReadLimit(4 << 20)
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		wg.Go(func() {
			defer conn.CloseNow()
			readLoop(ctx, conn, c)
		})
	}
	return wg.Wait, nil
}

// frame is the part of a server frame the harness reads.
type frame struct {
	Type    string    `json:"type"`
	ID      string    `json:"id"`
	Lease   string    `json:"lease"`
	RunAt   time.Time `json:"run_at"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
}

// ackFrame is the client's acknowledgement.
type ackFrame struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Lease string `json:"lease"`
}

func readLoop(ctx context.Context, conn *websocket.Conn, c *collector) {
	for {
		_, data, err := conn.Read(ctx)
		at := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				c.fail(err)
			}
			return
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			c.fail(err)
			continue
		}
		if f.Type != "job" {
			c.fail(fmt.Errorf("%s frame: %s %s", f.Type, f.Code, f.Message))
			continue
		}
		c.add(f.ID, receipt{RunAt: f.RunAt, At: at})
		ack, _ := json.Marshal(ackFrame{Type: "ack", ID: f.ID, Lease: f.Lease})
		if err := conn.Write(ctx, websocket.MessageText, ack); err != nil {
			if !errors.Is(err, context.Canceled) {
				c.fail(err)
			}
			return
		}
	}
}
