package history

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The topics the generator uses: two plain ones, and one whose business
// keys are unique and replace (Setup configures it).
const (
	TopicA      = "hist.a"
	TopicB      = "hist.b"
	TopicUnique = "hist.u"
)

// topics are the generator's topics, pausable ones first.
var topics = []string{TopicA, TopicB, TopicUnique}

// GeneratorConfig configures a Generator.
type GeneratorConfig struct {
	// Seed makes the random choices; each client draws from its own
	// stream of it.
	Seed uint64
	// Clients run at once, each on one instance (client i on instance
	// i mod Instances, or the next one up).
	Clients   int
	Instances int
	// URLFunc returns the base URL of an instance's HTTP API, "" while it
	// is down.
	URLFunc func(instance int) string
	// History records every operation.
	History *History
	// Subscribers are WebSocket subscribers (prefetch 1) run beside the
	// clients, spread over the topics, numbered from Clients+1.
	Subscribers int
	// ThinkMax bounds the pause of a client between two operations.
	//
	// Defaults to 20ms.
	ThinkMax time.Duration
}

// Generator runs concurrent clients doing random operations against a
// deployment over HTTP, recording each in a History.
type Generator struct {
	cfg  GeneratorConfig
	http *http.Client

	mu   sync.Mutex
	all  map[string]string // every id pushed, to its topic
	ids  []known           // recent ids, picked by the operations on jobs
	held []held            // recent deliveries, settled ones (stale leases) too
	// settling holds, by lease, when an HTTP client first sent an ack or
	// nack of it: one of a subscriber's delivery gives the subscription
	// its credit back at once (core.Subscription), which bounds the
	// subscriber's next claim from below as the subscriber's own settle
	// does. settled is the generation before, so that the last
	// settlingMax leases at least are kept (an hour-long run lost one
	// when a full map was emptied).
	settling, settled map[string]time.Time
}

// settlingMax bounds the leases of a generation of settling.
const settlingMax = 4096

// sendingSettle records that an ack or nack of lease is about to be sent.
func (g *Generator) sendingSettle(lease string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.settleSentLocked(lease); ok {
		return
	}
	if g.settling == nil || len(g.settling) >= settlingMax {
		g.settling, g.settled = map[string]time.Time{}, g.settling
	}
	g.settling[lease] = time.Now()
}

// settleSent returns when an HTTP client first sent an ack or nack of
// lease, if one did.
func (g *Generator) settleSent(lease string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.settleSentLocked(lease)
}

func (g *Generator) settleSentLocked(lease string) (time.Time, bool) {
	if t, ok := g.settling[lease]; ok {
		return t, true
	}
	t, ok := g.settled[lease]
	return t, ok
}

// known is a job id the generator pushed.
type known struct {
	id, topic, key string
}

// held is a delivery a claim answered.
type held struct {
	id, lease string
}

// NewGenerator returns a Generator.
func NewGenerator(cfg GeneratorConfig) *Generator {
	if cfg.ThinkMax == 0 {
		cfg.ThinkMax = 20 * time.Millisecond
	}
	return &Generator{
		cfg: cfg,
		// Longer than a SIGSTOP of an instance: its calls wait it out.
		http: &http.Client{Timeout: 20 * time.Second},
		all:  map[string]string{},
	}
}

// Setup configures the generator's topics on a deployment.
func Setup(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url+"/v1/topics/"+TopicUnique, bytes.NewReader([]byte(`{"unique_keys": "replace"}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("history: configure %s: %d %s", TopicUnique, resp.StatusCode, b)
	}
	return nil
}

// Run runs the clients until ctx is done; each finishes the call it is
// in first.
func (g *Generator) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for c := range g.cfg.Clients {
		wg.Go(func() { g.client(ctx, c) })
	}
	for k := range g.cfg.Subscribers {
		wg.Go(func() { g.subscribe(ctx, g.cfg.Clients+1+k, topics[k%len(topics)]) })
	}
	wg.Wait()
	g.http.CloseIdleConnections()
}

// client is one client's loop.
func (g *Generator) client(ctx context.Context, c int) {
	r := rand.New(rand.NewPCG(g.cfg.Seed, uint64(c)))
	cl := &client{g: g, n: c, r: r}
	for n := 0; ctx.Err() == nil; n++ {
		cl.seq = n
		switch w := r.IntN(100); {
		case w < 25:
			cl.push()
		case w < 30:
			cl.replace()
		case w < 37:
			cl.onJob(OpCancel)
		case w < 45:
			cl.onJob(OpGet)
		case w < 64:
			cl.claim()
		case w < 76:
			cl.settle(OpAck)
		case w < 83:
			cl.settle(OpNack)
		case w < 87:
			cl.settle(OpTouch)
		case w < 91:
			cl.ackBatch()
		case w < 95:
			cl.onJob(OpRequeue)
		case w < 96:
			cl.pause(ctx)
		}
		think := time.NewTimer(time.Duration(r.Int64N(int64(g.cfg.ThinkMax))))
		select {
		case <-ctx.Done():
		case <-think.C:
		}
		think.Stop()
	}
}

// client is one client's state.
type client struct {
	g   *Generator
	n   int
	seq int
	r   *rand.Rand
}

// instance returns the client's instance that is up and its URL, or -1.
func (c *client) instance() (int, string) {
	for k := range c.g.cfg.Instances {
		i := (c.n + k) % c.g.cfg.Instances
		if u := c.g.cfg.URLFunc(i); u != "" {
			return i, u
		}
	}
	return -1, ""
}

// errNotSent is a call that never reached the server (refused
// connection): it changed nothing and is not recorded.
var errNotSent = errors.New("not sent")

// call sends a request for op and records op's times and status, unless it
// was never sent. A 5xx answer is recorded as indeterminate.
func (g *Generator) call(inst int, url string, op *Op, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	// Not the run's context: a call in flight at its end is finished, so
	// that it has an answer.
	req, err := http.NewRequestWithContext(context.Background(), method, url+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	op.Instance = inst
	op.Call = time.Now()
	resp, err := g.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, errNotSent
		}
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	op.Return = time.Now()
	if resp.StatusCode < 500 {
		op.Status = resp.StatusCode
	}
	return answer, nil
}

// record adds op to the history unless the call was never sent.
func (g *Generator) record(op *Op, err error) {
	if errors.Is(err, errNotSent) {
		return
	}
	g.cfg.History.Add(*op)
}

// remember keeps a pushed id.
func (g *Generator) remember(k known) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.all[k.id]; !ok {
		g.all[k.id] = k.topic
		g.ids = append(g.ids, k)
		if len(g.ids) > 300 {
			g.ids = g.ids[len(g.ids)-300:]
		}
	}
}

// pick returns a recent id, false when there is none.
func (c *client) pick(plainOnly bool) (known, bool) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	for range 4 {
		if len(c.g.ids) == 0 {
			return known{}, false
		}
		// Recent ones more often: they are the live ones.
		i := len(c.g.ids) - 1 - c.r.IntN(min(len(c.g.ids), 60))
		if k := c.g.ids[i]; !plainOnly || k.key == "" {
			return k, true
		}
	}
	return known{}, false
}

// KeyID is the id delayq gives the job of topic with business key key on a
// topic with unique keys (docs/api.md, "Unique keys").
func KeyID(topic, key string) string {
	h := sha256.New()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return "k-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// pushAnswer is the answer of a create or replace.
type pushAnswer struct {
	ID    string    `json:"id"`
	RunAt time.Time `json:"run_at"`
}

// jobBody is a random job of topic with id (none for a keyed one), and the
// op recording it.
func (c *client) jobBody(topic, id string) (map[string]any, Op) {
	op := Op{Client: c.n, Topic: topic, ID: id, TTR: time.Second, MaxAttempts: 1 + c.r.IntN(3)}
	body := map[string]any{"topic": topic, "body": c.seq, "ttr": "1s", "max_attempts": op.MaxAttempts}
	if id != "" {
		body["id"] = id
	}
	if c.r.IntN(4) == 0 {
		op.RunAt = time.Now().Add(time.Duration(c.r.IntN(1500)) * time.Millisecond).UTC().Truncate(time.Millisecond)
		body["run_at"] = op.RunAt.Format(time.RFC3339Nano)
	} else if d := c.r.IntN(3); d > 0 {
		op.Delay = time.Duration(c.r.IntN(1500)) * time.Millisecond
		body["delay"] = strconv.FormatInt(op.Delay.Milliseconds(), 10) + "ms"
	}
	return body, op
}

// push creates a job: a new id, an id used before (409 while unfinished),
// or a business key of the unique topic (a replace when its job waits).
func (c *client) push() {
	inst, url := c.instance()
	if inst < 0 {
		return
	}
	var (
		body map[string]any
		op   Op
	)
	switch w := c.r.IntN(10); {
	case w < 2:
		key := "key" + strconv.Itoa(c.r.IntN(8))
		body, op = c.jobBody(TopicUnique, "")
		body["key"] = key
		op.ID, op.Key, op.Replace = KeyID(TopicUnique, key), key, true
	case w < 4:
		if k, ok := c.pick(true); ok {
			body, op = c.jobBody(k.topic, k.id)
			break
		}
		fallthrough
	default:
		topic := topics[c.r.IntN(2)]
		body, op = c.jobBody(topic, fmt.Sprintf("s%dc%dn%d", c.g.cfg.Seed, c.n, c.seq))
	}
	op.Kind = OpPush
	c.g.remember(known{id: op.ID, topic: op.Topic, key: op.Key})
	answer, err := c.g.call(inst, url, &op, http.MethodPost, "/v1/jobs", body)
	if err == nil && op.OK() {
		var a pushAnswer
		if json.Unmarshal(answer, &a) == nil {
			op.AnswerRunAt = a.RunAt
		}
	}
	c.g.record(&op, err)
}

// replace puts a job again by its id (PUT): a replace while it waits or is
// dead, 409 while reserved, a create once finished.
func (c *client) replace() {
	k, ok := c.pick(true)
	inst, url := c.instance()
	if !ok || inst < 0 {
		return
	}
	body, op := c.jobBody(k.topic, k.id)
	op.Kind = OpReplace
	answer, err := c.g.call(inst, url, &op, http.MethodPut, "/v1/jobs/"+k.id, body)
	if err == nil && op.OK() {
		var a pushAnswer
		if json.Unmarshal(answer, &a) == nil {
			op.AnswerRunAt = a.RunAt
		}
	}
	c.g.record(&op, err)
}

// onJob cancels, reads or requeues a recent job.
func (c *client) onJob(kind Kind) {
	k, ok := c.pick(false)
	inst, url := c.instance()
	if !ok || inst < 0 {
		return
	}
	c.g.onJob(c.n, inst, url, kind, k)
}

// onJob sends kind's call for job k and records it; answered is whether
// it got an answer that says what it did.
func (g *Generator) onJob(client, inst int, url string, kind Kind, k known) (answered bool) {
	op := Op{Client: client, Kind: kind, Topic: k.topic, ID: k.id}
	var (
		answer []byte
		err    error
	)
	switch kind {
	case OpCancel:
		_, err = g.call(inst, url, &op, http.MethodDelete, "/v1/jobs/"+k.id, nil)
	case OpRequeue:
		_, err = g.call(inst, url, &op, http.MethodPost, "/v1/jobs/"+k.id+"/requeue", nil)
	case OpGet:
		answer, err = g.call(inst, url, &op, http.MethodGet, "/v1/jobs/"+k.id, nil)
		var a struct {
			State   string    `json:"state"`
			Attempt int       `json:"attempt"`
			RunAt   time.Time `json:"run_at"`
		}
		if err == nil && op.Status == http.StatusOK && json.Unmarshal(answer, &a) == nil {
			op.State, op.Attempt, op.AnswerRunAt = a.State, a.Attempt, a.RunAt
		}
	}
	g.record(&op, err)
	return err == nil && !op.Indeterminate()
}

// pace waits a little before a call tried again, or until ctx is done.
func pace(ctx context.Context) {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// wireDelivery is a delivery as a claim answers it.
type wireDelivery struct {
	ID             string    `json:"id"`
	Attempt        int       `json:"attempt"`
	RunAt          time.Time `json:"run_at"`
	Lease          string    `json:"lease"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// claim claims up to 4 jobs of a topic, waiting up to 300 ms.
func (c *client) claim() {
	inst, url := c.instance()
	if inst < 0 {
		return
	}
	c.g.claim(c.n, inst, url, topics[c.r.IntN(len(topics))], 1+c.r.IntN(4), time.Duration(c.r.IntN(300))*time.Millisecond)
}

func (g *Generator) claim(client, inst int, url, topic string, max int, wait time.Duration) (ds []Delivery, answered bool) {
	op := Op{Client: client, Kind: OpClaim, Topic: topic}
	answer, err := g.call(inst, url, &op, http.MethodPost, "/v1/topics/"+topic+"/claim",
		map[string]any{"max": max, "wait": strconv.FormatInt(wait.Milliseconds(), 10) + "ms"})
	if err == nil && op.Status == http.StatusOK {
		var a struct {
			Jobs []wireDelivery `json:"jobs"`
		}
		if json.Unmarshal(answer, &a) != nil {
			op.Status = 0 // an answer that does not say what was claimed
		}
		for _, d := range a.Jobs {
			op.Jobs = append(op.Jobs, Delivery{ID: d.ID, Attempt: d.Attempt, Lease: d.Lease, RunAt: d.RunAt, LeaseExpiresAt: d.LeaseExpiresAt})
		}
		g.mu.Lock()
		for _, d := range a.Jobs {
			g.held = append(g.held, held{id: d.ID, lease: d.Lease})
		}
		if len(g.held) > 64 {
			g.held = g.held[len(g.held)-64:]
		}
		g.mu.Unlock()
	}
	g.record(&op, err)
	return op.Jobs, op.OK()
}

// pickHeld returns a recent delivery, often the newest (whose lease likely
// holds), sometimes an older one (a stale lease), and sometimes an earlier
// delivery of a job delivered again.
func (c *client) pickHeld() (held, bool) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if len(c.g.held) == 0 {
		return held{}, false
	}
	if c.r.IntN(6) == 0 {
		// The lease of an earlier delivery of a job delivered again:
		// never valid once the later delivery began.
		for i := len(c.g.held) - 1; i >= 0; i-- {
			for j := i - 1; j >= 0; j-- {
				if c.g.held[j].id == c.g.held[i].id && c.g.held[j].lease != c.g.held[i].lease {
					return c.g.held[j], true
				}
			}
		}
	}
	i := len(c.g.held) - 1 - c.r.IntN(min(len(c.g.held), 4))
	if c.r.IntN(4) == 0 {
		i = c.r.IntN(len(c.g.held))
	}
	return c.g.held[i], true
}

// settle acks, nacks (with a delay) or touches a delivery.
func (c *client) settle(kind Kind) {
	h, ok := c.pickHeld()
	inst, url := c.instance()
	if !ok || inst < 0 {
		return
	}
	op := Op{Client: c.n, Kind: kind, ID: h.id, Lease: h.lease}
	body := map[string]any{"lease": h.lease}
	path := "/v1/jobs/" + h.id + "/" + string(kind)
	if kind == OpNack {
		op.Delay = time.Duration(c.r.IntN(800)) * time.Millisecond
		body["delay"] = strconv.FormatInt(op.Delay.Milliseconds(), 10) + "ms"
		body["error"] = "history"
	}
	if kind != OpTouch {
		c.g.sendingSettle(h.lease)
	}
	answer, err := c.g.call(inst, url, &op, http.MethodPost, path, body)
	if err == nil && kind == OpTouch && op.Status == http.StatusOK {
		var a struct {
			LeaseExpiresAt time.Time `json:"lease_expires_at"`
		}
		if json.Unmarshal(answer, &a) != nil {
			op.Status = 0
		}
		op.LeaseExpiresAt = a.LeaseExpiresAt
	}
	c.g.record(&op, err)
}

// ackBatch acks 2-4 deliveries in one POST /v1/acks, recorded as one ack
// per item.
func (c *client) ackBatch() {
	inst, url := c.instance()
	if inst < 0 {
		return
	}
	var items []held
	for range 2 + c.r.IntN(3) {
		if h, ok := c.pickHeld(); ok {
			items = append(items, h)
		}
	}
	if len(items) == 0 {
		return
	}
	c.g.ackBatch(c.n, inst, url, items)
}

// codeStatus is the status of an error code of the error body.
var codeStatus = map[string]int{"conflict": 409, "not_found": 404, "invalid_argument": 400, "permission_denied": 403}

func (g *Generator) ackBatch(client, inst int, url string, items []held) {
	acks := make([]map[string]string, len(items))
	for i, h := range items {
		acks[i] = map[string]string{"id": h.id, "lease": h.lease}
		g.sendingSettle(h.lease)
	}
	var whole Op
	answer, err := g.call(inst, url, &whole, http.MethodPost, "/v1/acks", map[string]any{"acks": acks})
	if errors.Is(err, errNotSent) {
		return
	}
	var a struct {
		Results []struct {
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"results"`
	}
	if err == nil && whole.Status == http.StatusOK && (json.Unmarshal(answer, &a) != nil || len(a.Results) != len(items)) {
		whole.Status = 0
	}
	for i, h := range items {
		op := whole
		op.Client, op.Kind, op.ID, op.Lease, op.Batch = client, OpAck, h.id, h.lease, true
		if whole.Status == http.StatusOK {
			op.Status = http.StatusNoContent
			if e := a.Results[i].Error; e != nil {
				op.Status = codeStatus[e.Code] // 0 for a server error: unknown
			}
		}
		g.cfg.History.Add(op)
	}
}

// pause pauses a plain topic, waits a little and resumes it.
func (c *client) pause(ctx context.Context) {
	inst, url := c.instance()
	if inst < 0 {
		return
	}
	topic := topics[c.r.IntN(2)]
	op := Op{Client: c.n, Kind: OpPause, Topic: topic}
	_, err := c.g.call(inst, url, &op, http.MethodPost, "/v1/topics/"+topic+"/pause", nil)
	c.g.record(&op, err)
	// Pacing, not a wait for a condition: how long the topic stays paused.
	t := time.NewTimer(time.Duration(100+c.r.IntN(400)) * time.Millisecond)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	c.g.resume(c.n, topic)
}

// resume resumes a topic through the first instance up, trying for about
// ten seconds until one answers; it reports whether one did.
func (g *Generator) resume(client int, topic string) bool {
	for range 100 {
		for inst := range g.cfg.Instances {
			url := g.cfg.URLFunc(inst)
			if url == "" {
				continue
			}
			op := Op{Client: client, Kind: OpResume, Topic: topic}
			_, err := g.call(inst, url, &op, http.MethodPost, "/v1/topics/"+topic+"/resume", nil)
			g.record(&op, err)
			if err == nil && op.OK() {
				return true
			}
		}
		// Every instance refused or failed it (one restarting): pace the
		// next try.
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// Drain delivers what is left once the clients stopped, through instance
// inst: it resumes every topic, claims and acks until no job came for
// quiet (or ctx is done), then reads every job the clients pushed. Every
// call is recorded, as client number Clients. A backend still out after
// the faults (a NATS stream electing its leader on a loaded machine)
// delays it: only answered claims count as quiet, and the resumes and
// reads are tried again until answered.
func (g *Generator) Drain(ctx context.Context, inst int, quiet time.Duration) {
	client := g.cfg.Clients
	url := g.cfg.URLFunc(inst)
	for _, t := range topics {
		for !g.resume(client, t) && ctx.Err() == nil {
		}
	}
	last := time.Now()
	for ctx.Err() == nil && time.Since(last) < quiet {
		for _, t := range topics {
			ds, answered := g.claim(client, inst, url, t, 100, 200*time.Millisecond)
			if !answered {
				last = time.Now()
				pace(ctx)
				continue
			}
			if len(ds) == 0 {
				continue
			}
			last = time.Now()
			items := make([]held, len(ds))
			for i, d := range ds {
				items[i] = held{id: d.ID, lease: d.Lease}
			}
			g.ackBatch(client, inst, url, items)
		}
	}
	g.mu.Lock()
	all := make([]known, 0, len(g.all))
	for id, topic := range g.all {
		all = append(all, known{id: id, topic: topic})
	}
	g.mu.Unlock()
	for _, k := range all {
		for !g.onJob(client, inst, url, OpGet, k) && ctx.Err() == nil {
			pace(ctx)
		}
	}
	g.http.CloseIdleConnections()
}
