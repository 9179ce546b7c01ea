package redisstore

import (
	"context"
	"math"
	"sync"
	"time"
)

const (
	// noDue is the next due time of a shard or queue with nothing in it.
	noDue = math.MaxInt64
	// expireLimit bounds the leases one expire call ends per shard, so
	// that many expiring together do not hold Redis in one long script.
	expireLimit = 1000
	// expireLimitMin is the least share of expireLimit a shard gets when
	// one script serves several shards (standalone server).
	expireLimitMin = 100
	// expireTimeout bounds one round of expire calls.
	expireTimeout = 10 * time.Second
	// sweepInterval is how often every shard's leases, and every queue a
	// claim waits on, are looked at whatever the store knows: a safety net
	// for a wake-up message lost without the subscription dropping (a drop
	// is noticed and triggers a sweep at once). It adds no lateness while
	// messages flow.
	sweepInterval = 30 * time.Second
)

// expirer ends each shard's expired leases when they expire: the jobs go
// back to their queues (or die on their last attempt). It keeps, per shard,
// the earliest lease expiry known, on the server's clock, and sleeps on one
// timer until the earliest of them: no polling. The times come from the
// expire script's answer (the shard's new head), from this store's claims
// and touches, and from other stores through the wake-up channel.
//
// Every store of a prefix expires every shard's leases: scripts are atomic,
// so when several run at an expiry the first ends the leases and the others
// find nothing and learn the next expiry. Due jobs need no such pass:
// claims take them straight from the queues.
type expirer struct {
	s    *Store
	kick chan struct{}

	mu      sync.Mutex
	next    []int64 // per shard: earliest lease expiry known (server ms), noDue for none
	busy    []bool  // per shard: an expire call is under way
	hint    []int64 // per shard: the earliest time heard of while busy
	retryAt int64   // after a failure, when to try again (server ms)
	sweepAt int64   // when to look at every shard anyway (server ms)
}

func newExpirer(s *Store) *expirer {
	p := &expirer{
		s:    s,
		kick: make(chan struct{}, 1),
		next: make([]int64, s.cfg.Shards),
		busy: make([]bool, s.cfg.Shards),
		hint: make([]int64, s.cfg.Shards),
	}
	// Nothing is known yet: look at every shard at once.
	for i := range p.hint {
		p.hint[i] = noDue
	}
	return p
}

// lowerBy applies a script's answer of a shard's new earliest lease
// expiry: server ms, or -1 for no change.
func (p *expirer) lowerBy(n int, v any) {
	if at := asInt(v); at >= 0 {
		p.lower(n, at)
	}
}

// lower records that a lease of shard n expires at (server ms).
func (p *expirer) lower(n int, at int64) {
	p.mu.Lock()
	changed := at < p.next[n]
	if changed {
		p.next[n] = at
	}
	if p.busy[n] && at < p.hint[n] {
		p.hint[n] = at
	}
	p.mu.Unlock()
	if changed {
		p.poke()
	}
}

// all makes every shard due now, to relearn what may have been missed.
func (p *expirer) all() {
	for n := range p.next {
		p.lower(n, 0)
	}
}

func (p *expirer) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run expires the leases of due shards until the store closes.
func (p *expirer) run() {
	clock := p.s.clock
	timer := clock.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-p.s.done:
			return
		default:
		}
		nowMS := p.s.serverNow()
		var due []int
		sweep := false
		p.mu.Lock()
		if nowMS >= p.sweepAt {
			for n := range p.next {
				p.next[n] = min(p.next[n], nowMS)
			}
			p.sweepAt = nowMS + sweepInterval.Milliseconds()
			sweep = !p.s.multiShard
		}
		target := p.sweepAt
		for n, at := range p.next {
			at = max(at, p.retryAt)
			if at <= nowMS {
				due = append(due, n)
				p.busy[n] = true
				p.hint[n] = noDue
			} else if at < target {
				target = at
			}
		}
		p.mu.Unlock()
		if sweep {
			p.sweepSlots()
		}
		if len(due) > 0 {
			if p.expire(due) {
				if failures > 0 {
					p.s.log.Info("redisstore: lease expiry works again", "prefix", p.s.cfg.Prefix)
				}
				failures = 0
			} else {
				failures++
				backoff := min(50*time.Millisecond<<min(failures-1, 6), 2*time.Second)
				p.mu.Lock()
				p.retryAt = p.s.serverNow() + backoff.Milliseconds()
				p.mu.Unlock()
			}
			continue
		}
		timer.Reset(p.s.localAt(target).Sub(clock.Now()))
		select {
		case <-p.s.done:
			return
		case <-p.kick:
			timer.Stop()
		case <-timer.Chan():
		}
	}
}

// sweepSlots frees the key slots of a Cluster whose holders lapsed (a
// store that died between a lease's end and the freeing of its slot), as
// every slots.lua call does first: a safety net, at each sweep.
func (p *expirer) sweepSlots() {
	ctx, cancel := context.WithTimeout(p.s.bg, expireTimeout)
	defer cancel()
	if _, err := p.s.slots(ctx, "sweep"); err != nil && p.s.bg.Err() == nil {
		p.s.log.Warn("redisstore: key slot sweep failed", "prefix", p.s.cfg.Prefix, "err", err)
	}
}

// expire runs the expire script on the due shards and learns their next
// expiries. It reports whether every call succeeded.
func (p *expirer) expire(due []int) bool {
	ctx, cancel := context.WithTimeout(p.s.bg, expireTimeout)
	defer cancel()
	// A standalone server serves every due shard in one script, sharing
	// expireLimit among them, so that one script's run stays short; a
	// Cluster needs one script per shard (slot).
	var (
		calls  []call
		groups [][]int // per call: its shards
	)
	if p.s.multiShard {
		limit := max(expireLimit/len(due), expireLimitMin)
		args := []any{limit}
		for _, n := range due {
			sk := &p.s.keys.shard[n]
			args = append(args, sk.base, sk.num)
		}
		calls = []call{p.s.shardCall(scriptExpire, due[0], args...)}
		groups = [][]int{due}
	} else {
		for _, n := range due {
			sk := &p.s.keys.shard[n]
			calls = append(calls, p.s.shardCall(scriptExpire, n, expireLimit, sk.base, sk.num))
			groups = append(groups, []int{n})
		}
	}
	cmds := p.s.run(ctx, calls)
	type woken struct {
		shard  int
		queued any
	}
	var (
		wakes    []woken
		released []any // lib.lua's, of a Cluster
	)
	ok := true
	p.mu.Lock()
	for i, shards := range groups {
		reply, err := cmds[i].Slice()
		var all []any
		if err == nil && len(reply) != 2 {
			err = errShortReply
		}
		var nowMS int64
		if err == nil {
			nowMS = p.s.sawServerNow(reply[0])
			if all = asSlice(reply[1]); len(all) != len(shards) {
				err = errShortReply
			}
		}
		for k, n := range shards {
			p.busy[n] = false
			var res []any
			if err == nil {
				if res = asSlice(all[k]); len(res) < 3 {
					err = errShortReply
				}
			}
			if err != nil {
				if ok && p.s.bg.Err() == nil {
					p.s.log.Warn("redisstore: lease expiry failed; retrying", "prefix", p.s.cfg.Prefix, "shard", n, "err", err)
				}
				ok = false
				p.next[n] = min(p.next[n], p.hint[n])
				continue
			}
			next := int64(noDue)
			if h := asInt(res[0]); h >= 0 {
				next = h
			}
			if asInt(res[1]) == 1 {
				next = nowMS // more is due: go on at once
			}
			p.next[n] = min(next, p.hint[n])
			wakes = append(wakes, woken{n, res[2]})
			if len(res) > 3 {
				released = append(released, asSlice(res[3])...)
			}
		}
	}
	p.mu.Unlock()
	for _, w := range wakes {
		p.s.applyQueued(w.queued)
	}
	p.s.freeSlots(ctx, released)
	return ok
}
