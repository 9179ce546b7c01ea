package redisstore

import (
	"context"
	"math"
	"sync"
	"time"
)

const (
	// noDue is the next due time of a shard with nothing scheduled or
	// reserved.
	noDue = math.MaxInt64
	// promoteLimit bounds the jobs of each kind one promote call moves, so
	// that a burst does not hold Redis in one long script.
	promoteLimit = 1000
	// promoteLimitMin is the least share of promoteLimit a shard gets when
	// one script promotes several shards (standalone server).
	promoteLimitMin = 100
	// promoteTimeout bounds one round of promote calls.
	promoteTimeout = 10 * time.Second
	// sweepInterval is how often every shard is promoted whatever the
	// promoter knows: a safety net for a wake-up message lost without the
	// subscription dropping (a drop is noticed and triggers a sweep at
	// once). It adds no lateness while messages flow.
	sweepInterval = 30 * time.Second
)

// promoter moves each shard's due jobs to ready and ends its expired leases
// when they are due. It keeps, per shard, the earliest time anything in the
// shard falls due, and sleeps on one timer until the earliest of them: no
// polling. The times come from the promote script's answer (the shard's new
// head), from this store's own puts, claims and retries, and from other
// stores through the wake-up channel, so that a job due earlier than the
// timer re-arms it wherever it was put.
//
// Every store of a prefix promotes every shard: scripts are atomic, so when
// several run at a due time the first moves the jobs and the others find
// nothing and learn the next due time.
type promoter struct {
	s    *Store
	kick chan struct{}

	mu      sync.Mutex
	next    []int64 // per shard: earliest due time known (Unix ms), noDue for none
	busy    []bool  // per shard: a promote call is under way
	hint    []int64 // per shard: the earliest time heard of while busy
	retryAt int64   // after a failure, when to try again (Unix ms)
	sweepAt int64   // when to promote every shard anyway (Unix ms)
}

func newPromoter(s *Store) *promoter {
	p := &promoter{
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

// lower records that shard n has something due at (Unix ms).
func (p *promoter) lower(n int, at int64) {
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
func (p *promoter) all() {
	for n := range p.next {
		p.lower(n, 0)
	}
}

func (p *promoter) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run promotes due shards until the store closes.
func (p *promoter) run() {
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
		now := clock.Now()
		nowMS := now.UnixMilli()
		var due []int
		p.mu.Lock()
		if nowMS >= p.sweepAt {
			for n := range p.next {
				p.next[n] = min(p.next[n], nowMS)
			}
			p.sweepAt = now.Add(sweepInterval).UnixMilli()
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
		if len(due) > 0 {
			if p.promote(due, now) {
				if failures > 0 {
					p.s.log.Info("redisstore: promotion works again", "prefix", p.s.cfg.Prefix)
				}
				failures = 0
			} else {
				failures++
				backoff := min(50*time.Millisecond<<min(failures-1, 6), 2*time.Second)
				p.mu.Lock()
				p.retryAt = clock.Now().Add(backoff).UnixMilli()
				p.mu.Unlock()
			}
			continue
		}
		timer.Reset(time.UnixMilli(target).Sub(now))
		select {
		case <-p.s.done:
			return
		case <-p.kick:
			timer.Stop()
		case <-timer.Chan():
		}
	}
}

// promote runs the promote script on the due shards and learns their next
// due times. It reports whether every call succeeded.
func (p *promoter) promote(due []int, now time.Time) bool {
	ctx, cancel := context.WithTimeout(p.s.bg, promoteTimeout)
	defer cancel()
	// A standalone server promotes every due shard in one script, sharing
	// promoteLimit among them, so that one script's run stays short; a
	// Cluster needs one script per shard (slot).
	var (
		calls  []call
		groups [][]int // per call: its shards
	)
	if p.s.multiShard {
		limit := max(promoteLimit/len(due), promoteLimitMin)
		args := []any{limit}
		for _, n := range due {
			sk := &p.s.keys.shard[n]
			args = append(args, sk.base, sk.num)
		}
		calls = []call{p.s.shardCall(scriptPromote, due[0], now, args...)}
		groups = [][]int{due}
	} else {
		for _, n := range due {
			sk := &p.s.keys.shard[n]
			calls = append(calls, p.s.shardCall(scriptPromote, n, now, promoteLimit, sk.base, sk.num))
			groups = append(groups, []int{n})
		}
	}
	cmds := p.s.run(ctx, calls)
	type woken struct {
		shard  int
		topics []string
	}
	var wakes []woken
	ok := true
	nowMS := now.UnixMilli()
	p.mu.Lock()
	for i, shards := range groups {
		all, err := cmds[i].Slice()
		if err == nil && len(all) != len(shards) {
			err = errShortReply
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
					p.s.log.Warn("redisstore: promotion failed; retrying", "prefix", p.s.cfg.Prefix, "shard", n, "err", err)
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
			if topics := asStrings(res[2]); len(topics) > 0 {
				wakes = append(wakes, woken{n, topics})
			}
		}
	}
	p.mu.Unlock()
	for _, w := range wakes {
		for _, t := range w.topics {
			p.s.wake(t, w.shard)
		}
	}
	return ok
}
