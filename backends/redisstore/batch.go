package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/delayq/delayq/core"
)

// leaseBatchMax bounds the deliveries one lease script handles, so that a
// burst of acks does not hold Redis in one long script.
const leaseBatchMax = 256

// leaseInFlight is how many pipelines of lease scripts the batcher keeps
// under way at once, so that the server is never idle while the answer of
// one travels back and the next batch is sent.
const leaseInFlight = 4

// leaseTimeout bounds one pipeline of lease scripts; a caller's own ctx may
// give up sooner.
const leaseTimeout = 10 * time.Second

// leaseOp is one ack, retry, bury or touch waiting for its turn.
type leaseOp struct {
	op, id, lease, errText string
	runAt                  int64 // of a touch: the cap of its lease (ms; 0 none)
	shard                  int

	done chan struct{} // closed when code, job and err are set
	code int64
	job  []any // touch: the job's fields; ack, retry, bury: topic, attempt, state
	err  error
}

// leaseBatcher coalesces the lease operations (ack, retry, bury, touch) of
// concurrent callers: a group commit. One goroutine sends them, with up to
// leaseInFlight pipelines under way; the calls that arrive while all are
// busy go together in the next one: one lease script for all their shards
// on a standalone server, one per shard on a Cluster, up to leaseBatchMax
// deliveries each. Calls made one after another are applied in order;
// concurrent calls for one delivery may be applied in either order, as
// with any store. A burst of acks
// thus costs Redis one request per batch instead of one per job, and the
// lease set and counts change in bulk (BenchmarkBurst measures the effect;
// docs/benchmarks.md has the figures). A lone call goes at once, so
// nothing waits for a batch to fill. Each delivery is handled on its own
// inside the script, and answered on its own.
type leaseBatcher struct {
	s    *Store
	kick chan struct{}

	mu      sync.Mutex
	queue   []*leaseOp
	stopped bool
}

func newLeaseBatcher(s *Store) *leaseBatcher {
	return &leaseBatcher{s: s, kick: make(chan struct{}, 1)}
}

// do queues ops, together, and waits for their answers (each op's err) or
// for ctx to end. An op whose caller gave up may still be applied, as a
// call cut short by ctx may be. Errors: ErrClosed, ErrUnavailable when ctx
// ended.
func (b *leaseBatcher) do(ctx context.Context, ops ...*leaseOp) error {
	if err := ctx.Err(); err != nil {
		return unavailable(ops[0].op, err)
	}
	for _, op := range ops {
		op.done = make(chan struct{})
	}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return core.ErrClosed
	}
	b.queue = append(b.queue, ops...)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
	for _, op := range ops {
		select {
		case <-op.done:
		case <-ctx.Done():
			return unavailable(op.op, ctx.Err())
		}
	}
	return nil
}

// run sends the queued operations until the store closes, up to
// leaseInFlight pipelines at once; operations still queued then get
// ErrClosed.
func (b *leaseBatcher) run() {
	slots := make(chan struct{}, leaseInFlight)
	var sending sync.WaitGroup
	defer sending.Wait()
	for {
		select {
		case <-b.kick:
		case <-b.s.done:
			b.stop()
			return
		}
		// A free slot first, then whatever queued meanwhile: while every
		// slot is busy, the next batch grows.
		select {
		case slots <- struct{}{}:
		case <-b.s.done:
			b.stop()
			return
		}
		b.mu.Lock()
		q := b.queue
		b.queue = nil
		b.mu.Unlock()
		if len(q) == 0 {
			<-slots
			continue
		}
		sending.Go(func() {
			defer func() { <-slots }()
			b.send(q)
		})
	}
}

// stop answers the queued operations with ErrClosed and refuses more.
func (b *leaseBatcher) stop() {
	b.mu.Lock()
	b.stopped = true
	q := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, op := range q {
		op.err = core.ErrClosed
		close(op.done)
	}
}

// send runs ops and answers each: one lease script per shard on a Cluster,
// one for every shard on a standalone server (see Store.multiShard); at most
// leaseBatchMax deliveries per script, all scripts in one pipeline.
func (b *leaseBatcher) send(ops []*leaseOp) {
	s := b.s
	byShard := map[int][]*leaseOp{}
	var order []int
	for _, op := range ops {
		if byShard[op.shard] == nil {
			order = append(order, op.shard)
		}
		byShard[op.shard] = append(byShard[op.shard], op)
	}
	type group struct {
		shard int
		ops   []*leaseOp
	}
	var (
		calls  []call
		groups [][]group // per call
		args   []any
		gs     []group
		size   int
	)
	end := func() {
		if len(gs) > 0 {
			calls = append(calls, s.shardCall(scriptLease, gs[0].shard, args...))
			groups = append(groups, gs)
		}
		args, gs, size = nil, nil, 0
	}
	for _, n := range order {
		all := byShard[n]
		for len(all) > 0 {
			if !s.multiShard || size == leaseBatchMax {
				end()
			}
			g := all[:min(len(all), leaseBatchMax-size)]
			all = all[len(g):]
			size += len(g)
			sk := &s.keys.shard[n]
			args = append(args, sk.base, sk.num, len(g))
			for _, op := range g {
				args = append(args, op.op, op.id, op.lease, op.runAt, op.errText)
			}
			gs = append(gs, group{n, g})
		}
	}
	end()
	ctx, cancel := context.WithTimeout(s.bg, leaseTimeout)
	defer cancel()
	cmds := s.write(ctx, calls)
	// The slots of a Cluster the scripts gave back are freed before the
	// callers hear, so that a claim after an ack finds the key's next job.
	var released []any
	for _, cmd := range cmds {
		res, _ := cmd.Slice()
		for _, r := range res {
			if r := asSlice(r); len(r) > 3 {
				released = append(released, asSlice(r[3])...)
			}
		}
	}
	s.freeSlots(ctx, released)
	for i, gs := range groups {
		res, err := cmds[i].Slice()
		if err == nil && len(res) != len(gs) {
			err = errShortReply
		}
		for k, g := range gs {
			var out []any
			if err == nil {
				r := asSlice(res[k])
				if len(r) < 3 {
					err = errShortReply
				} else if out = asSlice(r[0]); len(out) != len(g.ops) {
					err = errShortReply
				} else {
					s.exp.lowerBy(g.shard, r[1])
					s.applyQueued(r[2])
				}
			}
			if err != nil {
				for _, op := range g.ops {
					op.err = unavailable(op.op, err)
					close(op.done)
				}
				continue
			}
			for k, op := range g.ops {
				r := asSlice(out[k])
				if len(r) < 2 {
					op.err = unavailable(op.op, errShortReply)
				} else {
					op.code = asInt(r[0])
					switch {
					case op.code == -1:
						op.err = unavailable(op.op, fmt.Errorf("redisstore: %s", asString(r[1])))
					case op.code == 0 && op.op == "touch":
						op.job = asSlice(r[1])
					case op.code == 4:
						op.job = r[1:] // topic, key, grant, ttr
					case op.code == 0:
						op.job = r[1:] // topic, attempt, state
					}
				}
				close(op.done)
			}
		}
	}
}

// leased ends or extends a delivery (op ack, retry, bury or touch) of job
// id with lease, through the lease batcher. It returns the script's answer
// for the job: its fields for touch, {topic, attempt, state} for the others.
func (s *Store) leased(ctx context.Context, op, id, lease string, runAt int64, errText string) ([]any, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	o := &leaseOp{op: op, id: id, lease: lease, runAt: runAt, errText: errText, shard: s.keys.shardOf(id)}
	if err := s.leases.do(ctx, o); err != nil {
		return nil, err
	}
	return o.answer()
}

// answer is what an answered op gives its caller: the script's answer for
// the job, or the op's error.
func (o *leaseOp) answer() ([]any, error) {
	if o.err != nil {
		return nil, o.err
	}
	switch o.code {
	case 0:
		return o.job, nil
	case 1:
		return nil, fmt.Errorf("redisstore: %s %q: %w", o.op, o.id, core.ErrNotFound)
	case 4:
		return o.job, errExtendSlot
	default:
		return nil, fmt.Errorf("redisstore: %s %q: %w", o.op, o.id, core.ErrLeaseLost)
	}
}

// settled decodes what the lease script answers for an ack, retry or bury:
// {topic, attempt, state}.
func settled(what string, res []any, err error) (core.SettleResult, error) {
	if err != nil {
		return core.SettleResult{}, err
	}
	if len(res) != 3 {
		return core.SettleResult{}, unavailable(what, errShortReply)
	}
	return core.SettleResult{Topic: asString(res[0]), Attempt: int(asInt(res[1])), State: core.State(asString(res[2]))}, nil
}
