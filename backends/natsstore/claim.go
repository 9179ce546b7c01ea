package natsstore

import (
	"cmp"
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
	// maxHeld bounds the due messages one topic queue holds; past it the
	// fetcher stops pulling until claims take some.
	maxHeld = 20000
	// fetchBatch is how many messages one pull request asks for.
	fetchBatch = 512
	// idleRelease is how long a topic queue keeps fetching after its last
	// claim. Then it stops and releases what it holds, so that another
	// instance whose claims wait gets those jobs.
	idleRelease = 2 * time.Second
	// drainWait bounds how long a stopping fetcher waits for the messages
	// already pulled: with the connection lost, nats.go's drain would wait
	// out a 10s flush.
	drainWait = 2 * time.Second
	// catchUpWait bounds a replicated stream's prime catching up with the
	// stream's leader; catchUpPoll is how long each of its fetches waits.
	catchUpWait = time.Second
	catchUpPoll = 20 * time.Millisecond
)

// item is a due message held by a topic queue until a claim takes it.
type item struct {
	m     *stored
	due   time.Time // run_at, or the lease's expiry for a lease that ran out
	msg   jetstream.Msg
	since time.Time // fetched or last marked in progress, on the real clock
	index int       // in its heap, -1 when out
	ready bool      // in the ready heap, else in the pending one
	// tried is the lease of a reservation of the item whose publish got no
	// answer (a timeout while the stream's leader changed): it may have
	// been applied, and the next take of the item finds out (dropIfStale).
	tried string
}

// itemHeap orders items by due time, then stream sequence.
type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].m.seq < h[j].m.seq
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

// readyHeap orders due items by their job's priority, then as itemHeap.
type readyHeap struct{ itemHeap }

func (h readyHeap) Less(i, j int) bool {
	if a, b := h.itemHeap[i].m.job.Priority, h.itemHeap[j].m.job.Priority; a != b {
		return a < b
	}
	return h.itemHeap.Less(i, j)
}

// topicQueue fetches one topic's due messages for this store instance and
// holds them, by due time, for the claims of this instance. It fetches only
// while claims come: idleRelease after the last one it stops and releases
// what it holds.
type topicQueue struct {
	s     *Store
	topic string

	mu        sync.Mutex
	room      *sync.Cond // signalled when the heaps shrink or the fetcher stops
	pending   itemHeap   // held items by due time
	ready     readyHeap  // held items due, most urgent first, moved by take
	byID      map[string]*item
	lastClaim time.Time // of the last take
	cons      jetstream.Consumer
	f         *fetcher // the running fetcher, nil when idle
	// bounded is held by a claim under ClaimJobsParams.InFlightMax from
	// its count of reserved jobs to its reservations, so that this
	// instance's claims do not race each other past the bound.
	bounded sync.Mutex
}

// fetcher is one run of a topic queue's pulling, from the first claim to
// idleRelease after the last.
type fetcher struct {
	quit    chan struct{} // closed to stop it
	primed  chan struct{} // closed once it took what was available at start
	done    chan struct{} // closed when it stopped and released what it held
	stopped bool          // quit closed; under topicQueue.mu
	it      jetstream.MessagesContext
	// cut ends the iterator's wait for messages when a drain outlasts
	// drainWait: a drained iterator can no longer be stopped.
	cut    context.Context
	cutNow context.CancelFunc
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
		q = &topicQueue{s: s, topic: topic, byID: make(map[string]*item)}
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
		if f := q.f; f != nil {
			stopped := f.stopped
			q.mu.Unlock()
			if !stopped {
				return f.primed, nil
			}
			select {
			case <-f.done:
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
		f := &fetcher{quit: make(chan struct{}), primed: make(chan struct{}), done: make(chan struct{})}
		f.cut, f.cutNow = context.WithCancel(context.Background())
		q.f = f
		q.lastClaim = q.s.now()
		q.mu.Unlock()
		go q.run(f)
		return f.primed, nil
	}
}

// run is the fetcher: it makes the durable consumer, takes what is
// available at once, then pulls until stopped, and finally releases what it
// holds.
func (q *topicQueue) run(f *fetcher) {
	defer q.s.wg.Done()
	defer close(f.done)
	defer f.cutNow()
	defer func() {
		q.mu.Lock()
		q.f = nil
		q.mu.Unlock()
	}()
	defer q.releaseAll()
	cons := q.consumer(f)
	if cons == nil {
		close(f.primed)
		return
	}
	// Prime: take what is available at once before the first claim looks,
	// so that a claim sees the whole backlog and takes it in run_at order.
	for !q.isStopped(f) {
		batch, err := cons.FetchNoWait(fetchBatch)
		if err != nil {
			break
		}
		n := 0
		for m := range batch.Messages() {
			q.add(f, m)
			n++
		}
		if batch.Error() != nil || n < fetchBatch {
			break
		}
	}
	if q.s.cfg.Replicas > 1 {
		q.catchUp(f, cons)
	}
	close(f.primed)
	monitorDone := make(chan struct{})
	go q.monitor(f, monitorDone)
	q.pull(f, cons)
	<-monitorDone
}

// catchUp completes the prime on a replicated stream, whose consumer
// leader may not have applied the latest writes when the prime asked: it
// fetches until the consumer delivered the topic's last due message as
// the stream's leader knows it, for up to catchUpWait (that message may be
// deleted meanwhile, by a write of its job).
func (q *topicQueue) catchUp(f *fetcher, cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpWait)
	defer cancel()
	last, err := q.s.lastMsg(ctx, q.s.names.kindFilter(kindDue, q.topic))
	if err != nil || last == nil {
		return
	}
	for !q.isStopped(f) {
		info, err := cons.Info(ctx)
		if err != nil || info.Delivered.Stream >= last.Sequence {
			return
		}
		batch, err := cons.Fetch(fetchBatch, jetstream.FetchMaxWait(catchUpPoll))
		if err != nil {
			return
		}
		for m := range batch.Messages() {
			q.add(f, m)
		}
	}
}

// consumer returns the topic's durable consumer, made if needed; nil when
// the fetcher stopped before it could make it.
func (q *topicQueue) consumer(f *fetcher) jetstream.Consumer {
	if q.cons != nil {
		return q.cons
	}
	backoff := 10 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cons, err := q.s.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       q.s.names.dueConsumer(q.topic),
			Description:   "delayq due jobs of topic " + q.topic,
			FilterSubject: q.s.names.kindFilter(kindDue, q.topic),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       q.s.cfg.AckWait,
			MaxAckPending: -1,
			MaxDeliver:    -1,
		})
		cancel()
		if err == nil {
			q.cons = cons
			return cons
		}
		q.s.log.Warn("natsstore: create consumer", "topic", q.topic, "err", err)
		select {
		case <-time.After(backoff): // the server's pace: real time
		case <-f.quit:
			return nil
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// pull feeds the consumer's messages to add until the fetcher stops; it
// restarts the iterator after errors such as a reconnect to another server.
// Stopping drains: messages already pulled are still added, then released.
func (q *topicQueue) pull(f *fetcher, cons jetstream.Consumer) {
	backoff := 10 * time.Millisecond
	for {
		it, err := cons.Messages(jetstream.PullMaxMessages(fetchBatch), jetstream.PullHeartbeat(5*time.Second))
		if err == nil {
			q.mu.Lock()
			if f.stopped {
				q.mu.Unlock()
				it.Stop()
				return
			}
			f.it = it
			q.mu.Unlock()
			backoff = 10 * time.Millisecond
			for {
				m, err := it.Next(jetstream.NextContext(f.cut))
				if err != nil {
					if f.cut.Err() != nil {
						it.Stop()
						return
					}
					if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
						q.s.log.Warn("natsstore: pull", "topic", q.topic, "err", err)
						it.Stop()
					}
					break
				}
				q.add(f, m)
			}
		} else {
			q.s.log.Warn("natsstore: pull", "topic", q.topic, "err", err)
		}
		if q.isStopped(f) {
			return
		}
		select {
		case <-time.After(backoff): // the server's pace: real time
		case <-f.quit:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (q *topicQueue) isStopped(f *fetcher) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return f.stopped
}

// monitor keeps held messages from going back to the stream (in-progress
// acks, on the real clock as the server's AckWait) and stops the fetcher
// once no claim came for idleRelease and none waits but on a pause (on
// the store's clock, as claims are).
func (q *topicQueue) monitor(f *fetcher, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(min(q.s.cfg.AckWait/4, idleRelease/2))
	defer tick.Stop()
	for {
		select {
		case <-f.quit:
			return
		case <-tick.C:
		}
		q.mu.Lock()
		// A claim of a paused topic waits without the fetcher.
		idle := q.s.now().Sub(q.lastClaim) > idleRelease && (!q.s.notify.Watched(q.topic) || q.s.pauses.paused(q.topic))
		now := time.Now() // the server's AckWait runs on the real clock
		for _, h := range []itemHeap{q.pending, q.ready.itemHeap} {
			for _, it := range h {
				if now.Sub(it.since) > q.s.cfg.AckWait/2 {
					_ = it.msg.InProgress()
					it.since = now
				}
			}
		}
		q.mu.Unlock()
		if idle {
			go q.stopFetcher(f)
		}
	}
}

// add holds a fetched due message. A second message of a job already held
// replaces the first when it is newer or the same one redelivered; an
// older one is acknowledged away.
func (q *topicQueue) add(f *fetcher, msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		_ = msg.Term()
		return
	}
	m, err := q.s.decodeStored(msg.Subject(), meta.Sequence.Stream, msg.Data())
	if err != nil {
		q.s.log.Warn("natsstore: foreign message", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	m.firing = firingOf(m.kind, msg.Headers())
	due := m.job.RunAt
	if m.job.State == core.StateReserved {
		due = m.job.LeaseExpiresAt // fired by the lease's schedule
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.pending)+len(q.ready.itemHeap) >= maxHeld && !f.stopped {
		q.room.Wait()
	}
	now := time.Now() // since: the real clock, as the server's AckWait
	it := &item{m: m, due: due, msg: msg, since: now}
	if old := q.byID[m.job.ID]; old != nil {
		if m.seq < old.m.seq {
			// An older message redelivered (its settle was lost) after
			// the newer one came: stale. Keeping it instead would
			// acknowledge the newer away, deleting it from the stream.
			_ = msg.Ack()
			return
		}
		if old.m.seq == m.seq {
			it.tried = old.tried // the same message: the latest delivery's handle
		} else {
			_ = old.msg.Ack()
		}
		q.unhold(old)
	}
	q.push(it)
	q.s.notify.Notify(q.topic)
}

// push holds it, by its due time. q.mu must be held.
func (q *topicQueue) push(it *item) {
	it.ready = false
	heap.Push(&q.pending, it)
	q.byID[it.m.job.ID] = it
}

// unhold takes it out of its heap. q.mu must be held.
func (q *topicQueue) unhold(it *item) {
	if it.ready {
		heap.Remove(&q.ready, it.index)
	} else {
		heap.Remove(&q.pending, it.index)
	}
	delete(q.byID, it.m.job.ID)
}

// take pops up to max items due at now, the most urgent first (then by
// due time). It also returns the due time of the next held item (zero if
// none): an arrival notifies.
func (q *topicQueue) take(max int, now time.Time) ([]*item, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lastClaim = now
	for len(q.pending) > 0 && !q.pending[0].due.After(now) {
		it := heap.Pop(&q.pending).(*item)
		it.ready = true
		heap.Push(&q.ready, it)
	}
	var items []*item
	for len(items) < max && len(q.ready.itemHeap) > 0 {
		it := heap.Pop(&q.ready).(*item)
		delete(q.byID, it.m.job.ID)
		items = append(items, it)
	}
	if len(items) > 0 {
		q.room.Broadcast()
	}
	var next time.Time
	switch {
	case len(q.ready.itemHeap) > 0:
		next = q.ready.itemHeap[0].due
	case len(q.pending) > 0:
		next = q.pending[0].due
	}
	return items, next
}

// hold puts a taken item back; when the fetcher has stopped it releases
// the item to the stream instead.
func (q *topicQueue) hold(it *item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.f == nil || q.f.stopped {
		_ = it.msg.Nak()
		return
	}
	if held := q.byID[it.m.job.ID]; held != nil {
		switch {
		case held.m.seq > it.m.seq:
			// A newer message of the job arrived meanwhile.
			_ = it.msg.Ack()
			return
		case held.m.seq == it.m.seq:
			// The same message, redelivered while a claim had it (a
			// consumer whose leader changed as the claim's lease publish
			// got no answer): one item, with what the claim tried.
			// Acknowledging either handle would delete the job's message.
			held.tried = cmp.Or(held.tried, it.tried)
			return
		default:
			_ = held.msg.Ack()
			q.unhold(held)
		}
	}
	q.push(it)
	q.s.notify.Notify(q.topic)
}

// releaseAll gives every held message back to the stream at once.
func (q *topicQueue) releaseAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, h := range []itemHeap{q.pending, q.ready.itemHeap} {
		for _, it := range h {
			_ = it.msg.Nak()
		}
	}
	q.pending, q.ready = nil, readyHeap{}
	q.byID = make(map[string]*item)
	q.room.Broadcast()
}

// stopFetcher stops f: its iterator drains (stops at once when the
// connection is down; its wait is cut after drainWait), and run releases
// what is held.
// Idempotent; it returns once f is done.
func (q *topicQueue) stopFetcher(f *fetcher) {
	q.mu.Lock()
	if !f.stopped {
		f.stopped = true
		close(f.quit)
	}
	it := f.it
	q.room.Broadcast()
	q.mu.Unlock()
	if it != nil {
		if q.s.nc.IsConnected() {
			it.Drain()
		} else {
			it.Stop()
		}
	}
	t := time.NewTimer(drainWait) // bounds nats.go's drain, which runs in real time
	defer t.Stop()
	select {
	case <-f.done:
	case <-t.C:
		f.cutNow()
		<-f.done
	}
}

// stop stops the fetcher, if it runs, and waits until it has released what
// it held.
func (q *topicQueue) stop() {
	q.mu.Lock()
	f := q.f
	q.mu.Unlock()
	if f != nil {
		q.stopFetcher(f)
	}
}

// primeWait bounds how long a take waits for a starting fetcher to take
// what is available, so that it sees the whole backlog in run_at order.
const primeWait = 5 * time.Second

// ClaimJobs implements core.Store: core.Claim over TakeJobs. Errors:
// those of TakeJobs, and ErrInvalidArgument when params.Max < 1.
func (s *Store) ClaimJobs(ctx context.Context, params *core.ClaimJobsParams) ([]*core.Job, error) {
	return core.Claim(ctx, s, s.clock, params)
}

// ClaimNotifier implements core.ClaimSource.
func (s *Store) ClaimNotifier() *core.Notifier { return &s.notify }

// TakeJobs implements core.ClaimSource. The topic's fetcher holds due
// messages until their run_at; a take starts it (waiting up to primeWait
// for what is available at once), takes the due ones, the most urgent
// priority first and in run_at order within one, and reserves each by
// publishing its lease schedule against the due message (a
// compare-and-set), then acknowledges the due message. With none it
// answers the next held item's due time, and the fetcher's arrivals
// notify, so nothing polls. A take of a paused topic takes nothing and
// does not run the fetcher; the resume notifies. Errors: ErrClosed,
// ErrStorageFull when the disk is full and its reserve spent down to the
// low mark (see "A full disk" in the package doc) or JetStream is at its
// storage limit, ErrUnavailable when JetStream fails and no job was
// claimed.
func (s *Store) TakeJobs(ctx context.Context, params *core.ClaimJobsParams) (core.Taken, error) {
	q, err := s.queue(params.Topic)
	if err != nil {
		return core.Taken{}, err
	}
	if s.pauses.paused(params.Topic) {
		return core.Taken{Jobs: []*core.Job{}}, nil
	}
	primed, err := q.ensureRunning()
	if err != nil {
		return core.Taken{}, err
	}
	select {
	case <-primed:
	default:
		t := s.clock.NewTimer(primeWait)
		select {
		case <-primed:
		case <-t.Chan():
		case <-ctx.Done():
		case <-s.done:
		}
		t.Stop()
	}
	for {
		if s.isClosed() {
			return core.Taken{}, core.ErrClosed
		}
		taken, took, err := s.claimRoom(ctx, q, params, s.now())
		if len(taken.Jobs) > 0 || (err == nil && !took) {
			return taken, nil
		}
		if err != nil {
			return core.Taken{}, err
		}
		// Every job taken had a newer message: look again.
	}
}

// claimRoom takes and reserves up to params.Max of q's due items, fewer
// under params.InFlightMax: took says whether it took any (their jobs may
// all have gone meanwhile); otherwise taken says when to look again. With
// InFlightMax it counts the topic's lease schedules first (one request; a
// claim without it makes none), and a full topic makes it look again within
// InFlightRecheck.
func (s *Store) claimRoom(ctx context.Context, q *topicQueue, params *core.ClaimJobsParams, now time.Time) (taken core.Taken, took bool, err error) {
	taken.Jobs = []*core.Job{}
	room := params.Max
	if params.InFlightMax > 0 {
		q.bounded.Lock()
		defer q.bounded.Unlock()
		_, reserved, err := s.subjects(ctx, s.names.kindFilter(kindLease, q.topic), 0)
		if err != nil {
			return taken, false, err
		}
		if room = params.Room(reserved); room == 0 {
			// Another instance's delivery that ends notifies nothing.
			taken.Full, taken.Next = true, now.Add(core.InFlightRecheck)
			return taken, false, nil
		}
	}
	items, next := q.take(room, now)
	if len(items) == 0 {
		taken.Next = next
		return taken, false, nil
	}
	jobs, err := s.claimItems(ctx, q, items, params)
	if jobs != nil {
		taken.Jobs = jobs
	}
	return taken, true, err
}

// dropIfStale settles an item whose lease publish was refused for the
// job's last sequence: when the job's last message is another, the item
// is stale and acknowledged away; when it is still the item's, it is put
// back for a later claim. A replicated stream's leader refuses such a
// publish too while a write of the job is still in process on it (seen
// on a three-node cluster: the put's message, already delivered to the
// consumer, refused as not last), so the refusal alone proves nothing,
// and acknowledging the item would delete the job's only message; nor
// does a read that answers an older message than the item's.
//
// The newer message may be the item's own earlier reservation, published
// without an answer (item.tried): then that claim took effect, and
// dropIfStale returns the job as reserved by it, still under its lease,
// for this claim to hand out, so that its attempt is not spent unseen.
func (s *Store) dropIfStale(ctx context.Context, q *topicQueue, it *item, now time.Time) *stored {
	cur, err := s.load(ctx, it.m.job.ID)
	switch {
	case err != nil || cur == nil || cur.seq <= it.m.seq:
		// An older last message than the item's is a read behind (a new
		// leader that has not applied its predecessor's writes), not a
		// newer message: hold, as for the item's own.
		q.hold(it)
	case it.tried != "" && cur.kind == kindLease && cur.job.Lease == it.tried && cur.view(now).State == core.StateReserved:
		return cur
	default:
		_ = it.msg.Ack() // stale: the job has a newer message
	}
	return nil
}

// dropOvertaken acknowledges away the items that are fired messages a
// write had overtaken (overtaken: one read each, concurrent) and returns
// the others. On an error it returns every item, for the caller to hold.
func (s *Store) dropOvertaken(ctx context.Context, items []*item) ([]*item, error) {
	var fired []int
	for i, it := range items {
		if it.m.firing != nil {
			fired = append(fired, i)
		}
	}
	if len(fired) == 0 {
		return items, nil
	}
	stale := make([]bool, len(items))
	err := s.each(ctx, len(fired), func(k int) error {
		it := items[fired[k]]
		var err error
		stale[fired[k]], err = s.overtaken(ctx, it.m, it.msg.Data())
		return err
	})
	if err != nil {
		return items, err
	}
	kept := items[:0:0]
	for i, it := range items {
		if stale[i] {
			_ = it.msg.Ack() // deletes it: the write's message is the job's last again
			continue
		}
		kept = append(kept, it)
	}
	return kept, nil
}

// claimItems reserves the jobs of taken items for the claim params
// (core.Job.Reserve), their lease schedules published pipelined, and
// returns them in the items' order. A job whose
// lease ran out for its last attempt goes dead instead; an item whose job
// has a newer message is stale and acknowledged away (dropIfStale). The error is the
// first failure, if any: its items are put back.
func (s *Store) claimItems(ctx context.Context, q *topicQueue, items []*item, params *core.ClaimJobsParams) ([]*core.Job, error) {
	// A claim half done is finished, not dropped.
	ctx, cancel := opContext(context.WithoutCancel(ctx))
	defer cancel()
	budget, err := s.claimBudget()
	if err == nil {
		err = s.connected("claim")
	}
	if err == nil {
		items, err = s.dropOvertaken(ctx, items)
	}
	if err != nil {
		for _, it := range items {
			q.hold(it)
		}
		return nil, err
	}
	if len(items) == 0 {
		return []*core.Job{}, nil
	}
	now := s.now()
	jobs := make([]*core.Job, len(items))
	futs := make([]jetstream.PubAckFuture, len(items))
	var first error
	for i, it := range items {
		j := it.m.view(now)
		if j.State == core.StateReserved {
			// The server fired the lease's schedule, so the lease ended,
			// though this instance's clock is behind and says it holds:
			// handed out as it is, its delivery would be answered twice
			// (a history run with clock jumps found it).
			j = it.m.view(j.LeaseExpiresAt)
		}
		if j.State == core.StateReady {
			j.Reserve(newLease(), params, now)
		}
		m, _, err := s.message(j, now, it.m)
		if err == nil && budget >= 0 {
			// The lease now, and the done message of its ack later.
			cost := 2 * int64(len(m.Data)+len(m.Subject)+recordOverhead)
			if cost > budget {
				if i == 0 {
					first = s.spent()
				}
				break // the rest is held for later claims
			}
			budget -= cost
		}
		if err == nil {
			futs[i], err = s.js.PublishMsgAsync(m)
		}
		if err != nil {
			first = unavailable("claim", err)
			break
		}
		jobs[i] = j
	}
	out := make([]*core.Job, 0, len(items))
	var last jetstream.Msg
	for i, it := range items {
		if futs[i] == nil {
			q.hold(it)
			continue
		}
		// reserved records that the job's message seq holds its
		// reservation j, and acknowledges the item's due message.
		reserved := func(j *core.Job, seq uint64) {
			if last != nil {
				_ = last.Ack()
			}
			last = it.msg
			if j.State == core.StateReserved {
				s.leases.put(&stored{job: j.Clone(), seq: seq, kind: kindLease, subject: s.names.subject(kindLease, j.ID, j.Topic)}, now)
				out = append(out, j)
			}
		}
		ack, err := s.awaitClaim(ctx, futs[i])
		switch {
		case isWrongSeq(err):
			if cur := s.dropIfStale(ctx, q, it, now); cur != nil {
				reserved(cur.view(now), cur.seq)
			}
		case err != nil:
			first = unavailable("claim", err)
			if jobs[i].State == core.StateReserved {
				it.tried = jobs[i].Lease
			}
			q.hold(it)
		default:
			reserved(jobs[i], ack.Sequence)
		}
	}
	if last != nil {
		// The last acknowledgement waits for the server's answer, which
		// comes after the earlier ones of the consumer were applied: counts
		// read after the claim no longer see the due messages.
		_ = last.DoubleAck(ctx)
	}
	return out, first
}
