package natsstore

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// Fetcher limits.
const (
	// maxHeld bounds the ready wake-ups one topic queue holds; past it the
	// fetcher stops pulling until claims take some.
	maxHeld = 20000
	// idleRelease is how long a topic queue keeps fetching after its last
	// claim. Then it stops and releases what it holds, so that another
	// instance whose claims wait gets those jobs.
	idleRelease = 2 * time.Second
	// maxTries bounds the compare-and-set retries of one claim.
	maxTries = 8
	// pendingWait is how long a reader waits for the record that a pending
	// wake-up announces before it takes the writer for dead.
	pendingWait = 2 * time.Second
	// auditEvery is how often a running fetcher checks that its topic's
	// consumer still accounts for every wake-up (see repair).
	auditEvery = time.Minute
	// orphanRecheck is how long an orphan must stay before repair takes
	// the consumer for broken: an acknowledged message is deleted right
	// after the consumer moved its ack floor past it.
	orphanRecheck = time.Second
)

// item is a ready wake-up held by a topic queue until its due time.
type item struct {
	id     string
	kind   string    // kindNear or kindReady (kindSoon from an older version)
	due    time.Time // the job's run_at, as the wake-up says
	msg    jetstream.Msg
	seq    uint64    // stream sequence of msg
	st     stamp     // which record the wake-up was made for
	stored time.Time // when the server stored msg
	tries  int       // reads that found its pending record not written yet
	pre    *core.Job // the record read ahead of the due time, nil if none
	preSeq uint64    // its sequence
	since  time.Time // fetched or last marked in progress
	index  int       // in the heap, -1 when out
}

// itemHeap orders items by due time, then stream sequence.
type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *itemHeap) Push(x any) {
	it := x.(*item)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.index = -1
	return it
}

// topicQueue fetches one topic's ready wake-ups for this store instance and
// holds them, by due time, for the claims of this instance. It fetches only
// while claims come: idleRelease after the last one it stops and releases
// what it holds.
type topicQueue struct {
	s     *Store
	topic string

	mu        sync.Mutex
	room      *sync.Cond // signalled when the heap shrinks or the fetcher stops
	items     itemHeap
	byID      map[string]*item
	changed   chan struct{} // closed and replaced when items arrive
	waiting   int           // claims in ClaimJobs
	lastClaim time.Time
	cons      []jetstream.Consumer // one per topicKinds
	p         *puller              // the running fetcher, nil when idle
	primed    chan struct{}        // closed once the fetcher took what was available at start
	runDone   chan struct{}        // closed when the fetcher has stopped and released
}

// queue returns the topic queue of a topic, made if needed.
func (s *Store) queue(topic string) (*topicQueue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	q := s.queues[topic]
	if q == nil {
		q = &topicQueue{s: s, topic: topic, byID: make(map[string]*item), changed: make(chan struct{})}
		q.room = sync.NewCond(&q.mu)
		s.queues[topic] = q
	}
	return q, nil
}

// ensureRunning starts the fetcher unless it runs, waiting first for a
// stopping one to finish, and returns the channel closed once it is primed.
func (q *topicQueue) ensureRunning() (<-chan struct{}, error) {
	for {
		q.mu.Lock()
		if q.p != nil && !q.p.isStopped() {
			primed := q.primed
			q.mu.Unlock()
			return primed, nil
		}
		if q.p != nil {
			done := q.runDone
			q.mu.Unlock()
			select {
			case <-done:
			case <-q.s.done:
				return nil, core.ErrClosed
			}
			continue
		}
		q.s.mu.Lock()
		closed := q.s.closed
		if !closed {
			q.s.wg.Add(1)
		}
		q.s.mu.Unlock()
		if closed {
			q.mu.Unlock()
			return nil, core.ErrClosed
		}
		p := newPuller(q.s, nil, q.add, 1)
		q.p, q.primed, q.runDone = p, make(chan struct{}), make(chan struct{})
		q.lastClaim = q.s.now()
		primed, runDone := q.primed, q.runDone
		q.mu.Unlock()
		go q.run(p, primed, runDone)
		return primed, nil
	}
}

// run is the fetcher: it makes the durable consumer, takes what is
// available at once, then pulls until stopped, and finally releases what it
// holds.
func (q *topicQueue) run(p *puller, primed, runDone chan struct{}) {
	defer q.s.wg.Done()
	defer close(runDone)
	defer func() {
		q.mu.Lock()
		q.p = nil
		q.mu.Unlock()
	}()
	defer q.releaseAll()
	cons := q.consumers(p)
	if cons == nil {
		close(p.done)
		return
	}
	p.cons = cons
	// Prime: take what is available at once before the first claim looks,
	// so that a claim sees the whole backlog and takes it in run_at order.
	for _, c := range cons {
		for !p.isStopped() {
			batch, err := c.FetchNoWait(p.batch)
			if err != nil {
				break
			}
			n := 0
			for m := range batch.Messages() {
				q.add(m)
				n++
			}
			if batch.Error() != nil || n < p.batch {
				break
			}
		}
	}
	close(primed)
	monitorDone, auditDone := make(chan struct{}), make(chan struct{})
	go q.monitor(p, monitorDone)
	go q.audit(p, auditDone)
	p.run()
	<-monitorDone
	<-auditDone
}

// consumerConfigs are the configurations of the topic's durable consumers,
// in topicKinds order. Each filters on one kind of plain wake-up, near or
// ready, never purged by the server (see doc.go, "Why near messages").
func (q *topicQueue) consumerConfigs() []jetstream.ConsumerConfig {
	cfgs := make([]jetstream.ConsumerConfig, len(topicKinds))
	for i, k := range topicKinds {
		cfgs[i] = jetstream.ConsumerConfig{
			Durable:       q.s.names.topicConsumer(k, q.topic),
			Description:   "delayq " + k + " jobs of topic " + q.topic,
			FilterSubject: q.s.names.kindFilter(k, q.topic),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       q.s.cfg.AckWait,
			MaxAckPending: 4 * maxHeld,
			MaxDeliver:    -1,
		}
	}
	return cfgs
}

// consumers returns the topic's durable consumers, creating them (or
// updating those made by an older version) on first use and repairing them
// if need be; nil when the fetcher stopped before JetStream answered.
func (q *topicQueue) consumers(p *puller) []jetstream.Consumer {
	if q.cons != nil {
		return q.cons
	}
	backoff := 10 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cons, err := createConsumers(ctx, q.s.stream, q.consumerConfigs())
		cancel()
		if err == nil {
			q.cons = cons
			q.repair(p.quit)
			return cons
		}
		q.s.log.Warn("natsstore: create consumer", "topic", q.topic, "err", err)
		select {
		case <-time.After(backoff): // the server's pace, real time: see "Clocks" in doc.go
		case <-p.quit:
			return nil
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// orphan returns the stream sequence of the first wake-up of the topic's
// consumer i (see topicKinds) at or below the consumer's ack floor, 0 if
// there is none. On a work-queue stream a message is deleted as soon as it
// is acknowledged, so such a wake-up is one the consumer takes for
// acknowledged while it is not: the consumer will never deliver it again.
func (q *topicQueue) orphan(ctx context.Context, i int) (uint64, error) {
	info, err := q.cons[i].Info(ctx)
	if err != nil {
		return 0, err
	}
	floor := info.AckFloor.Stream
	if floor == 0 {
		return 0, nil
	}
	m, err := q.s.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(q.s.names.kindFilter(topicKinds[i], q.topic)))
	if errors.Is(err, jetstream.ErrMsgNotFound) || isNotFoundAPI(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if m.Sequence <= floor {
		return m.Sequence, nil
	}
	return 0, nil
}

// repair recreates a topic's consumer when it has lost track of a wake-up
// (see orphan) for longer than orphanRecheck. The store no longer does
// what made nats-server 2.15 lose track (purges of subjects inside the
// consumer's filter), but a consumer from an older version, or one broken
// otherwise, keeps jobs from being delivered for ever. Recreating it is
// safe while other instances use it: the new consumer delivers every
// wake-up of its kind again, including those held elsewhere, and a wake-up
// delivered twice is harmless (claims compare and set the record).
func (q *topicQueue) repair(quit <-chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seqs := make([]uint64, len(q.cons))
	found := false
	for i := range q.cons {
		seq, err := q.orphan(ctx, i)
		if err != nil {
			return
		}
		seqs[i], found = seq, found || seq != 0
	}
	if !found {
		return
	}
	select {
	case <-time.After(orphanRecheck): // the server's ack floor moves in real time
	case <-quit:
		return
	}
	cfgs := q.consumerConfigs()
	for i, seq := range seqs {
		if seq == 0 {
			continue
		}
		if again, err := q.orphan(ctx, i); err != nil || again != seq {
			continue
		}
		name := cfgs[i].Durable
		q.s.log.Warn("natsstore: consumer lost track of a wake-up; recreating it", "consumer", name, "seq", seq)
		if err := q.s.stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			q.s.log.Warn("natsstore: delete consumer", "consumer", name, "err", err)
			continue
		}
		if _, err := q.s.stream.CreateOrUpdateConsumer(ctx, cfgs[i]); err != nil {
			// The fetcher's pulls fail until a later repair or restart makes it.
			q.s.log.Warn("natsstore: create consumer", "consumer", name, "err", err)
		}
	}
}

// audit runs repair every auditEvery until the fetcher stops.
func (q *topicQueue) audit(p *puller, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(auditEvery) // checks the server's consumer: real time
	defer tick.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-tick.C:
			q.repair(p.quit)
		}
	}
}

// monitor keeps held wake-ups from going back to the stream (in-progress
// acks, on the real clock as the server's AckWait) and stops the fetcher
// once no claim came for idleRelease (on the store's clock, as claims are).
func (q *topicQueue) monitor(p *puller, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(min(q.s.cfg.AckWait/4, idleRelease/2))
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
		q.mu.Lock()
		idle := q.waiting == 0 && q.s.now().Sub(q.lastClaim) > idleRelease
		now := time.Now() // the server's AckWait runs on the real clock
		for _, it := range q.items {
			if now.Sub(it.since) > q.s.cfg.AckWait/2 {
				_ = it.msg.InProgress()
				it.since = now
			}
		}
		q.mu.Unlock()
		if idle {
			go p.stop()
		}
	}
}

// add holds a fetched ready wake-up. A second wake-up of a job already held
// replaces the first (a redelivery, or a newer wake-up).
func (q *topicQueue) add(m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		_ = m.Term()
		return
	}
	due, st, ok := parseWakeData(m.Data())
	if !ok {
		due = q.s.now()
	}
	kind, _, id, ok := q.s.names.parseWake(m.Subject())
	if !ok {
		_ = m.Term()
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) >= maxHeld && q.p != nil && !q.p.isStopped() {
		q.room.Wait()
	}
	now := time.Now() // since: the real clock, as the server's AckWait
	if old := q.byID[id]; old != nil {
		if old.seq != meta.Sequence.Stream {
			_ = old.msg.Ack()
		}
		old.msg, old.kind, old.seq, old.due, old.st, old.stored, old.since = m, kind, meta.Sequence.Stream, due, st, meta.Timestamp, now
		heap.Fix(&q.items, old.index)
	} else {
		it := &item{id: id, kind: kind, due: due, msg: m, seq: meta.Sequence.Stream, st: st, stored: meta.Timestamp, since: now}
		heap.Push(&q.items, it)
		q.byID[id] = it
		if due.Sub(q.s.now()) > 2*time.Millisecond {
			q.prefetch(it)
		}
	}
	close(q.changed)
	q.changed = make(chan struct{})
}

// prefetch reads an item's record ahead of its due time, so that the claim
// at the due time saves a round trip; the claim's compare-and-set still
// catches a record that changed since. q.mu is held.
func (q *topicQueue) prefetch(it *item) {
	select {
	case q.s.prefetchSem <- struct{}{}:
	default:
		return // busy: the claim reads it
	}
	q.s.wg.Add(1)
	id, msgSeq := it.id, it.seq
	go func() {
		defer q.s.wg.Done()
		defer func() { <-q.s.prefetchSem }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		j, seq, err := q.s.load(ctx, id)
		if err != nil || j == nil {
			return
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		if cur := q.byID[id]; cur == it && cur.seq == msgSeq && !(it.st.pending && it.st.base == seq) {
			it.pre, it.preSeq = j, seq
		}
	}()
}

// take pops up to max items due at now. It also returns the due time of
// the next held item (zero if none) and the channel closed on arrivals.
func (q *topicQueue) take(max int, now time.Time) ([]*item, time.Time, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var items []*item
	for len(items) < max && len(q.items) > 0 && !q.items[0].due.After(now) {
		it := heap.Pop(&q.items).(*item)
		delete(q.byID, it.id)
		items = append(items, it)
	}
	if len(items) > 0 {
		q.room.Broadcast()
	}
	var next time.Time
	if len(q.items) > 0 {
		next = q.items[0].due
	}
	return items, next, q.changed
}

// hold puts a taken item back, due at due; when the fetcher has stopped it
// releases the item to the stream instead.
func (q *topicQueue) hold(it *item, due time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.p == nil || q.p.isStopped() {
		_ = it.msg.Nak()
		return
	}
	if q.byID[it.id] != nil {
		// A newer wake-up of the job arrived meanwhile.
		_ = it.msg.Ack()
		return
	}
	it.due = due
	heap.Push(&q.items, it)
	q.byID[it.id] = it
	close(q.changed)
	q.changed = make(chan struct{})
}

// releaseAll gives every held wake-up back to the stream at once.
func (q *topicQueue) releaseAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range q.items {
		_ = it.msg.Nak()
	}
	q.items = nil
	q.byID = make(map[string]*item)
	q.room.Broadcast()
}

// stop stops the fetcher, if it runs, and waits until it has released what
// it held.
func (q *topicQueue) stop() {
	q.mu.Lock()
	p, done := q.p, q.runDone
	q.room.Broadcast()
	q.mu.Unlock()
	if p == nil {
		return
	}
	p.stop()
	q.mu.Lock()
	q.room.Broadcast()
	q.mu.Unlock()
	<-done
}

func (q *topicQueue) enter() {
	q.mu.Lock()
	q.waiting++
	q.lastClaim = q.s.now()
	q.mu.Unlock()
}

func (q *topicQueue) leave() {
	q.mu.Lock()
	q.waiting--
	q.lastClaim = q.s.now()
	q.mu.Unlock()
}

// ClaimJobs implements core.Store. The topic's fetcher holds ready wake-ups
// until their run_at; a claim takes the due ones in run_at order and
// reserves each by a compare-and-set of its record. It waits on the
// fetcher's arrivals and a timer for the next due time, never polling.
// Errors: ErrInvalidArgument when params.Max < 1, ErrClosed (also for a
// claim waiting when the store closes), ErrUnavailable when JetStream fails
// and no job was claimed.
func (s *Store) ClaimJobs(ctx context.Context, params *core.ClaimJobsParams) ([]*core.Job, error) {
	if params == nil || params.Max < 1 {
		return nil, core.Invalid("max", "max must be at least 1")
	}
	q, err := s.queue(params.Topic)
	if err != nil {
		return nil, err
	}
	q.enter()
	defer q.leave()
	primed, err := q.ensureRunning()
	if err != nil {
		return nil, err
	}
	deadline := s.now().Add(params.Wait)
	primeWait := s.clock.NewTimer(max(params.Wait, 5*time.Second))
	select {
	case <-primed:
	case <-primeWait.Chan():
	case <-ctx.Done():
	case <-s.done:
		primeWait.Stop()
		return nil, core.ErrClosed
	}
	primeWait.Stop()
	for {
		if s.isClosed() {
			return nil, core.ErrClosed
		}
		now := s.now()
		items, next, changed := q.take(params.Max, now)
		if len(items) > 0 {
			jobs, err := s.claimItems(ctx, q, items)
			if len(jobs) > 0 {
				return jobs, nil
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		if ctx.Err() != nil || !now.Before(deadline) {
			return []*core.Job{}, nil
		}
		d := deadline.Sub(now)
		if !next.IsZero() && next.Sub(now) < d {
			d = next.Sub(now)
		}
		t := s.clock.NewTimer(d)
		select {
		case <-changed:
		case <-t.Chan():
		case <-ctx.Done():
		case <-s.done:
		}
		t.Stop()
	}
}

// claimItems claims taken items concurrently and returns the jobs reserved,
// in the items' order. The error is the first failure, if any.
func (s *Store) claimItems(ctx context.Context, q *topicQueue, items []*item) ([]*core.Job, error) {
	ctx = context.WithoutCancel(ctx) // a claim half done is finished, not dropped
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	jobs := make([]*core.Job, len(items))
	err := s.each(ctx, len(items), func(i int) error {
		var err error
		jobs[i], err = s.claimOne(ctx, q, items[i])
		return err
	})
	out := make([]*core.Job, 0, len(items))
	for _, j := range jobs {
		if j != nil {
			out = append(out, j)
		}
	}
	return out, err
}

// claimOne reconciles one taken wake-up with its job's record and reserves
// the job if it is due; it returns nil when the wake-up was stale. The
// lease's wake-up is published first: besides ending the lease it is the
// safety net of every step after it. Then the wake-up taken is
// acknowledged, which deletes a soon schedule before it fires, and last the
// record is compared and set.
func (s *Store) claimOne(ctx context.Context, q *topicQueue, it *item) (*core.Job, error) {
	for range maxTries {
		j, seq, err := it.pre, it.preSeq, error(nil)
		if j == nil {
			j, seq, err = s.load(ctx, it.id)
		}
		it.pre = nil
		if err != nil {
			q.hold(it, it.due)
			return nil, err
		}
		now := s.now()
		// stored is the server's timestamp of the wake-up: real time.
		if it.st.pending && it.st.base == seq && time.Since(it.stored) < pendingWait {
			// The writer of this wake-up has not written its record yet.
			it.tries++
			q.hold(it, now.Add(pendingBackoff(it.tries)))
			return nil, nil
		}
		if j == nil || j.Topic != q.topic {
			_ = it.msg.Ack()
			return nil, nil
		}
		switch j.State {
		case core.StateScheduled, core.StateReady:
			if j.RunAt.After(now) {
				if j.RunAt.Sub(now) <= s.cfg.Lead {
					q.hold(it, j.RunAt)
					return nil, nil
				}
				// A stale early wake-up: make sure of the schedule.
				return nil, s.repairWakes(ctx, j, seq, now, it.msg, true)
			}
		case core.StateReserved:
			if j.LeaseExpiresAt.After(now) {
				// The lease holds; make sure its wake-up exists.
				return nil, s.repairWakes(ctx, j, seq, now, it.msg, true)
			}
			j = j.Clone()
			j.ExpireLease()
			if j.State == core.StateDead {
				err := s.write(ctx, j, seq, now)
				if errors.Is(err, errCAS) {
					continue
				}
				if err != nil {
					q.hold(it, it.due)
					return nil, err
				}
				_ = it.msg.DoubleAck(ctx)
				return nil, nil
			}
		default: // done, cancelled, dead
			_ = it.msg.Ack()
			return nil, nil
		}
		r := j.Clone()
		r.Reserve(newLease(), now)
		lseqs, err := s.publishAll(ctx, s.wakesFor(r, now, pendingAfter(seq)))
		if err != nil {
			s.deleteSeqs(ctx, lseqs, r.ID)
			q.hold(it, it.due)
			return nil, err
		}
		// Acknowledged, and confirmed, while the record changes: counts
		// read after the claim must not see a ready wake-up too, and the
		// job's next purge (its acknowledgement's) should find the near
		// message gone (see purgeLater on purges of several messages).
		acked := make(chan struct{})
		go func() {
			defer close(acked)
			_ = it.msg.DoubleAck(ctx)
		}()
		rseq, err := s.save(ctx, r, seq)
		<-acked
		if errors.Is(err, errCAS) {
			s.undo(ctx, lseqs, r.ID)
			continue // the record changed: read it again and act on it
		}
		if err != nil {
			// The lease's wake-up makes the job due again at its expiry.
			return nil, err
		}
		if it.kind == kindNear && len(lseqs) > 0 {
			// Its soon schedule must not fire into ready: purge it, as a
			// write purges every wake-up older than its own. It fires
			// soonGrace after run_at; should the purge come later, the
			// ready message it makes is a stale wake-up, reconciled.
			// Its subject only: the near message may not be removed yet
			// (see purgeLater on purges of several messages).
			s.purgeLater(s.names.wake(kindSoon, r.Topic, r.ID), r.ID, lseqs[0])
		}
		s.reserved.put(r.Clone(), rseq, now)
		return r, nil
	}
	q.hold(it, it.due)
	return nil, nil
}

// repairWakes publishes the wake-ups that a job's recorded state needs, then
// acknowledges the stale wake-up m that led to it; confirm waits for the
// server to confirm the acknowledgement, so that a ready wake-up no longer
// counts when the caller returns. The housekeeping's lead and expire
// messages are counted nowhere: an acknowledgement lost is only a message
// delivered again.
func (s *Store) repairWakes(ctx context.Context, j *core.Job, seq uint64, now time.Time, m jetstream.Msg, confirm bool) error {
	if err := s.publishWakes(ctx, j, seq); err != nil {
		_ = m.NakWithDelay(time.Second)
		return err
	}
	if confirm {
		_ = m.DoubleAck(ctx)
	} else {
		_ = m.Ack()
	}
	return nil
}

// handleHouse handles the housekeeping consumer's messages: a fired sched
// schedule (lead) gets the wake-up its job needs now, normally the soon
// schedule its topic's fetcher holds; a fired lease schedule (expire) ends
// the lease: the job becomes ready again (a ready wake-up, then the record),
// or dead when it used its last attempt. A lease touched meanwhile, or a
// job not reserved at all, gets its wake-up made sure of.
func (s *Store) handleHouse(m jetstream.Msg) {
	// Aborted when Close gives up waiting (a lost connection); the write
	// protocol survives a stop between any two steps.
	ctx, cancel := context.WithTimeout(s.house.abort, 10*time.Second)
	defer cancel()
	kind, topic, id, ok := s.names.parseWake(m.Subject())
	_, st, ok2 := parseWakeData(m.Data())
	meta, err := m.Metadata()
	if !ok || !ok2 || err != nil {
		_ = m.Term()
		return
	}
	for range maxTries {
		j, seq, err := s.load(ctx, id)
		if err != nil {
			_ = m.NakWithDelay(100 * time.Millisecond)
			return
		}
		now := s.now()
		// meta.Timestamp is the server's: real time.
		if st.pending && st.base == seq && time.Since(meta.Timestamp) < pendingWait {
			// The writer of this wake-up has not written its record yet.
			_ = m.NakWithDelay(pendingBackoff(int(meta.NumDelivered)))
			return
		}
		if j == nil || j.Topic != topic || j.State.Finished() || j.State == core.StateDead {
			_ = m.Ack()
			return
		}
		if kind != kindExpire || j.State != core.StateReserved {
			_ = s.repairWakes(ctx, j, seq, now, m, false)
			return
		}
		if d := j.LeaseExpiresAt.Sub(now); d > 0 {
			if d > s.cfg.Lead {
				_ = s.repairWakes(ctx, j, seq, now, m, false)
				return
			}
			_ = m.NakWithDelay(d)
			return
		}
		j = j.Clone()
		j.ExpireLease()
		err = s.write(ctx, j, seq, now)
		if errors.Is(err, errCAS) {
			continue
		}
		if err != nil {
			_ = m.NakWithDelay(100 * time.Millisecond)
			return
		}
		_ = m.Ack()
		return
	}
	_ = m.Nak()
}

// pendingBackoff is how long to wait before reading again a record that a
// pending wake-up announced, after tries reads that did not find it.
func pendingBackoff(tries int) time.Duration {
	return min(time.Millisecond<<min(tries, 10), 50*time.Millisecond)
}
