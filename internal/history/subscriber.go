package history

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// A subscriber is a WebSocket client of one topic with a prefetch of 1, so
// that each delivery's claim is bounded below by the moment its credit came
// back: the subscriber's settle of the delivery before, an HTTP client's
// ack or nack of it (through its instance, which gives the credit back at
// once), that lease's expiry, or its connection.
//
// An ack or nack that succeeds is not answered on a WebSocket; one that
// fails is answered with an error frame naming the job. So a settle is
// recorded as failed when its error frame comes, and otherwise without a
// status (it may or may not have been applied), but answered by the next
// delivery at the latest: with a prefetch of 1, the next claim waits for
// the credit, which the settle gives back once handled, or the lease's
// expiry, after which the settle cannot succeed.

// subFrame is a frame the server sends.
type subFrame struct {
	Type           string    `json:"type"`
	ID             string    `json:"id"`
	Attempt        int       `json:"attempt"`
	RunAt          time.Time `json:"run_at"`
	Lease          string    `json:"lease"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	Code           string    `json:"code"`
}

// releaseBound is how long after a subscriber's connection ends the server
// may still claim for it and release the claim: the release is a store
// call, which the server bounds by its op timeout (wstransport's
// OpTimeoutDefault, 10 s) and a failing or loaded store may take all of.
const releaseBound = 12 * time.Second

// subscribe runs a subscriber of topic as client number n until ctx is
// done, connecting again when its instance goes.
func (g *Generator) subscribe(ctx context.Context, n int, topic string) {
	r := rand.New(rand.NewPCG(g.cfg.Seed, uint64(n)<<8))
	for ctx.Err() == nil {
		inst, url := (&client{g: g, n: n}).instance()
		if inst >= 0 {
			g.subscription(ctx, r, n, inst, url, topic)
		}
		// Pacing between connections, not a wait for a condition.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// subscription is one connection of a subscriber.
func (g *Generator) subscription(ctx context.Context, r *rand.Rand, n, inst int, url, topic string) {
	since := time.Now() // the earliest the next delivery's claim may be
	sinceLease := false // since is a lease expiry the instance answered
	ws := "ws" + strings.TrimPrefix(url, "http") + "/v1/topics/" + topic + "/subscribe?prefetch=1"
	dialCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, resp, err := websocket.Dial(dialCtx, ws, nil)
	cancel()
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return
	}
	defer conn.CloseNow()
	// Reads end when the run closes the connection, or with the server.
	readCtx := context.WithoutCancel(ctx)
	// When the run began to close the connection: the server releases a
	// delivery left to its lease once it reads the close frame, before
	// the close handshake ends the reads here.
	var closing atomic.Int64
	stop := context.AfterFunc(ctx, func() {
		closing.Store(time.Now().UnixNano())
		_ = conn.Close(websocket.StatusNormalClosure, "")
	})
	defer stop()
	var (
		open []Op   // settles sent, not yet answered
		left *Op    // a delivery left to its lease's expiry, as the nack a close would make
		last string // the lease of the delivery before
		// lastCall is the earliest the delivery before was claimed.
		lastCall = since
		// late counts, per job, the settles recorded without an answer
		// when the next delivery came: an error frame for the job may
		// still come for one of them.
		late = map[string]int{}
	)
	flush := func(at time.Time) {
		for i := range open {
			if open[i].Return.IsZero() {
				open[i].Return = at
			}
			if open[i].Status == 0 {
				late[open[i].ID]++
			}
			g.cfg.History.Add(open[i])
		}
		open = nil
	}
	for {
		_, b, err := conn.Read(readCtx)
		at := time.Now()
		if err != nil {
			break
		}
		var f subFrame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		if f.Type == "error" {
			// The frame names the job, not the lease, and may come after
			// the next delivery of the job (its credit came back with the
			// lease's expiry): then it is a recorded settle's, which
			// stays without an answer, rather than the open one's (an
			// hour-long run, with a SIGSTOP, had a settle that succeeded
			// marked failed). Else the server answers a connection's
			// frames in order: the oldest open settle of the job.
			if late[f.ID] > 0 {
				late[f.ID]--
				continue
			}
			for i := range open {
				if open[i].ID == f.ID && open[i].Status == 0 {
					open[i].Status, open[i].Return = codeStatus[f.Code], at
					break
				}
			}
			continue
		}
		if f.Type != "job" {
			continue
		}
		flush(at)
		left = nil
		if t, ok := g.settleSent(last); ok && t.Before(since) {
			since, sinceLease = t, false
		}
		if since.After(at) {
			// The credit came back by a way the run does not follow:
			// the claim came after the claim before, at least.
			since, sinceLease = lastCall, false
		}
		lastCall = since
		d := Delivery{ID: f.ID, Attempt: f.Attempt, Lease: f.Lease, RunAt: f.RunAt, LeaseExpiresAt: f.LeaseExpiresAt}
		g.cfg.History.Add(Op{Client: n, Instance: inst, Kind: OpClaim, Topic: topic, Call: since, CallFromLease: sinceLease, Return: at, Status: 200, Jobs: []Delivery{d}})
		g.mu.Lock()
		g.held = append(g.held, held{id: d.ID, lease: d.Lease})
		g.mu.Unlock()
		last = d.Lease

		settle := Op{Client: n, Instance: inst, ID: d.ID, Lease: d.Lease}
		frame := map[string]any{"id": d.ID, "lease": d.Lease}
		switch w := r.IntN(10); {
		case w < 7:
			settle.Kind, frame["type"] = OpAck, "ack"
		case w < 9:
			settle.Delay = time.Duration(r.IntN(800)) * time.Millisecond
			settle.Kind, frame["type"], frame["delay"] = OpNack, "nack", strconv.FormatInt(settle.Delay.Milliseconds(), 10)+"ms"
		default:
			// Left to its lease: a close releases it as a nack would.
			left = &Op{Client: n, Instance: inst, Kind: OpNack, ID: d.ID, Lease: d.Lease}
			since, sinceLease = d.LeaseExpiresAt.Add(-5*time.Millisecond), true
			continue
		}
		sf, _ := json.Marshal(frame)
		settle.Call = time.Now()
		since, sinceLease = minTime(settle.Call, d.LeaseExpiresAt).Add(-5*time.Millisecond), d.LeaseExpiresAt.Before(settle.Call)
		open = append(open, settle)
		if conn.Write(readCtx, websocket.MessageText, sf) != nil {
			break
		}
	}
	flush(time.Time{}) // what was not answered stays without an answer
	if left != nil {
		left.Call = time.Now()
		if c := closing.Load(); c != 0 {
			left.Call = time.Unix(0, c)
		}
		g.cfg.History.Add(*left)
	}
	if t, ok := g.settleSent(last); ok && t.Before(since) {
		since, sinceLease = t, false
	}
	// A claim for the connection may have been made and not sent: the
	// server releases it once it sees the connection end, or leaves it to
	// its lease when its store fails meanwhile (or it is killed).
	g.cfg.History.Add(Op{Client: n, Instance: inst, Kind: OpClaim, Topic: topic, Call: since, CallFromLease: sinceLease,
		ReleasedAtClose: true, Until: time.Now().Add(releaseBound)})
}
