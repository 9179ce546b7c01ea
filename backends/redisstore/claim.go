package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/core"
)

// topicState is what a store keeps in memory about one topic it was asked
// to claim from.
type topicState struct {
	// sem is held by the one claim of this store that reads the topic at a
	// time, so that claims waiting together do not all race for the same
	// jobs.
	sem chan struct{}
	// wake is closed, and replaced, when the topic may have new ready jobs.
	wake chan struct{}
	// maybe tells, per shard, whether the topic's ready set there may hold
	// jobs. A claim reads only those shards, and clears a shard's flag when
	// it saw the set empty; the first job of an empty set is announced on
	// the wake-up channel, which sets the flag again.
	maybe []bool
	// gen counts wake-ups per shard: a claim clears a flag only when no
	// wake-up came since it read the shard.
	gen []uint64
}

// topicState returns the state of topic, made if needed. s.mu must be held.
func (s *Store) topicState(topic string) *topicState {
	ts := s.topics[topic]
	if ts == nil {
		ts = &topicState{
			sem:   make(chan struct{}, 1),
			wake:  make(chan struct{}),
			maybe: make([]bool, s.cfg.Shards),
			gen:   make([]uint64, s.cfg.Shards),
		}
		for i := range ts.maybe {
			ts.maybe[i] = true
		}
		s.topics[topic] = ts
	}
	return ts
}

// wake records that topic has ready jobs in shard n and wakes the claims
// waiting for it.
func (s *Store) wake(topic string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.topics[topic]
	if ts == nil {
		return // no claim of this store looked at it: its flags start set
	}
	ts.maybe[n] = true
	ts.gen[n]++
	close(ts.wake)
	ts.wake = make(chan struct{})
}

// wakeAll wakes every waiting claim and has it read every shard.
func (s *Store) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.topics {
		for n := range ts.maybe {
			ts.maybe[n] = true
			ts.gen[n]++
		}
		close(ts.wake)
		ts.wake = make(chan struct{})
	}
}

// clearMaybe records that topic's ready set in shard n was empty when read,
// unless a wake-up came since gen.
func (s *Store) clearMaybe(ts *topicState, n int, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts.gen[n] == gen {
		ts.maybe[n] = false
	}
}

// ClaimJobs implements core.Store. It reads the topic's ready sets of the
// shards that may hold jobs, picks the earliest Max by run_at (then id), and
// reserves them with one claim script per shard; a job another claim took
// in between is skipped. With nothing ready it waits for a wake-up (a
// promotion, a put, a message from another store) or the end of Wait.
// Errors: ErrInvalidArgument when params.Max < 1, ErrClosed,
// ErrUnavailable.
func (s *Store) ClaimJobs(ctx context.Context, params *core.ClaimJobsParams) ([]*core.Job, error) {
	if params == nil || params.Max < 1 {
		return nil, core.Invalid("max", "max must be at least 1")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, core.ErrClosed
	}
	ts := s.topicState(params.Topic)
	s.mu.Unlock()

	var (
		timer    core.Timer
		timeout  <-chan time.Time
		timedOut bool
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case ts.sem <- struct{}{}:
		case <-ctx.Done():
			return []*core.Job{}, nil
		case <-s.done:
			return nil, core.ErrClosed
		case <-timeout:
			return []*core.Job{}, nil
		}
		s.mu.Lock()
		woken := ts.wake
		s.mu.Unlock()
		jobs, err := s.claimOnce(ctx, ts, params.Topic, params.Max)
		<-ts.sem
		switch {
		case s.isClosed():
			return nil, core.ErrClosed
		case ctx.Err() != nil:
			if len(jobs) > 0 {
				return jobs, nil
			}
			return []*core.Job{}, nil
		case err != nil:
			return nil, err
		case len(jobs) > 0 || params.Wait <= 0 || timedOut:
			return jobs, nil
		}
		if timer == nil {
			timer = s.clock.NewTimer(params.Wait)
			timeout = timer.Chan()
		}
		select {
		case <-woken:
		case <-timeout:
			timedOut = true
			timeout = nil
		case <-ctx.Done():
			return []*core.Job{}, nil
		case <-s.done:
			return nil, core.ErrClosed
		}
	}
}

// candidate is a ready job seen by a claim.
type candidate struct {
	shard int
	id    string
	runAt int64
}

// claimOnce claims up to max ready jobs of topic, in run_at order. It
// returns an empty slice when none is ready.
func (s *Store) claimOnce(ctx context.Context, ts *topicState, topic string, max int) ([]*core.Job, error) {
	for {
		s.mu.Lock()
		var (
			shards []int
			gens   []uint64
		)
		for n, m := range ts.maybe {
			if m {
				shards = append(shards, n)
				gens = append(gens, ts.gen[n])
			}
		}
		s.mu.Unlock()
		if len(shards) == 0 {
			return []*core.Job{}, nil
		}

		cands, err := s.peek(ctx, topic, shards, max)
		if err != nil {
			return nil, err
		}
		genOf := make(map[int]uint64, len(shards))
		for i, n := range shards {
			if cands.empty[i] {
				s.clearMaybe(ts, n, gens[i])
			} else {
				genOf[n] = gens[i]
			}
		}
		if len(cands.top) == 0 {
			return []*core.Job{}, nil
		}

		// Reserve the earliest: one script per shard on a Cluster, one for
		// all shards on a standalone server.
		byShard := map[int][]any{}
		tokens := make(map[string]string, len(cands.top))
		var order []int
		for _, c := range cands.top {
			if byShard[c.shard] == nil {
				order = append(order, c.shard)
			}
			tokens[c.id] = rand.Text()
			byShard[c.shard] = append(byShard[c.shard], c.id, tokens[c.id])
		}
		now := s.clock.Now()
		var (
			calls  []call
			groups [][]int // per call: its shards
		)
		for _, n := range order {
			sk := &s.keys.shard[n]
			group := []any{sk.base, sk.num, len(byShard[n]) / 2}
			group = append(group, byShard[n]...)
			if s.multiShard && len(calls) == 1 {
				calls[0].args = append(calls[0].args, group...)
				groups[0] = append(groups[0], n)
				continue
			}
			calls = append(calls, s.shardCall(scriptClaim, n, now, append([]any{topic}, group...)...))
			groups = append(groups, []int{n})
		}
		cmds := s.run(ctx, calls)
		jobs := []*core.Job{}
		var firstErr error
		for i, shards := range groups {
			all, err := cmds[i].Slice()
			if err == nil && len(all) != len(shards) {
				err = errShortReply
			}
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			for k, n := range shards {
				res := asSlice(all[k])
				if len(res) < 3 {
					firstErr = cmp.Or(firstErr, errShortReply)
					continue
				}
				for _, r := range asSlice(res[0]) {
					pair := asSlice(r)
					if len(pair) != 2 {
						continue
					}
					j, err := decodeFlat(asString(pair[0]), asSlice(pair[1]))
					if err != nil {
						firstErr = cmp.Or(firstErr, err)
						continue
					}
					jobs = append(jobs, claimed(j, tokens[j.ID], now))
				}
				if h := asInt(res[1]); h >= 0 {
					s.prom.lower(n, h)
				}
				if asInt(res[2]) == 0 {
					s.clearMaybe(ts, n, genOf[n])
				}
			}
		}
		if len(jobs) > 0 {
			// Jobs reserved are returned even when another shard failed:
			// their leases would otherwise have to expire first.
			slices.SortFunc(jobs, func(a, b *core.Job) int {
				return cmp.Or(a.RunAt.Compare(b.RunAt), strings.Compare(a.ID, b.ID))
			})
			return jobs, nil
		}
		if firstErr != nil {
			return nil, unavailable("claim", firstErr)
		}
		// Every job seen was taken by another claim meanwhile: look again.
	}
}

// peeked is what peek saw.
type peeked struct {
	top   []candidate // the earliest ready jobs, in (run_at, id) order
	empty []bool      // per shard read: its ready set was empty
}

func candidateLess(a, b candidate) int {
	return cmp.Or(cmp.Compare(a.runAt, b.runAt), strings.Compare(a.id, b.id))
}

// peek reads the heads of topic's ready sets in shards and returns the
// earliest max jobs among them. It reads a fair share of max from each shard
// first (twice max/shards, and a little), and reads up to max only from the
// shards whose share was full and could hide jobs earlier than the last one
// picked: one round trip in the usual case, two when ready jobs are skewed
// towards a few shards.
func (s *Store) peek(ctx context.Context, topic string, shards []int, max int) (peeked, error) {
	k := max
	if len(shards) > 1 {
		k = min(max, 2*((max+len(shards)-1)/len(shards))+2)
	}
	lists := make([][]candidate, len(shards))
	read := func(idx []int, limit int) error {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.ZSliceCmd, len(idx))
		for i, x := range idx {
			cmds[i] = pipe.ZRangeWithScores(ctx, s.keys.ready(shards[x], topic), 0, int64(limit-1))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return unavailable("claim", err)
		}
		for i, x := range idx {
			zs := cmds[i].Val()
			l := make([]candidate, len(zs))
			for j, z := range zs {
				id, _ := z.Member.(string)
				l[j] = candidate{shard: shards[x], id: id, runAt: int64(z.Score)}
			}
			lists[x] = l
		}
		return nil
	}
	all := make([]int, len(shards))
	for i := range all {
		all[i] = i
	}
	if err := read(all, k); err != nil {
		return peeked{}, err
	}
	out := peeked{empty: make([]bool, len(shards))}
	for i, l := range lists {
		out.empty[i] = len(l) == 0
	}
	for {
		var merged []candidate
		for _, l := range lists {
			merged = append(merged, l...)
		}
		slices.SortFunc(merged, candidateLess)
		out.top = merged[:min(max, len(merged))]
		if k == max || len(out.top) == 0 {
			return out, nil
		}
		last := out.top[len(out.top)-1]
		var more []int
		for i, l := range lists {
			if len(l) == k && (len(out.top) < max || candidateLess(l[k-1], last) < 0) {
				more = append(more, i)
			}
		}
		if len(more) == 0 {
			return out, nil
		}
		k = max
		if err := read(more, max); err != nil {
			return peeked{}, err
		}
	}
}

// claimed applies to a job read by the claim script, as it was before, what
// the script changed: reserved by this claim's lease until now + TTR, one
// more attempt. The script leaves this to the caller to spare Redis.
func claimed(j *core.Job, lease string, now time.Time) *core.Job {
	at := now.UnixMilli()
	j.State = core.StateReserved
	j.Attempt++
	j.Lease = lease
	j.LeaseExpiresAt = msTime(at + j.TTR.Milliseconds())
	j.UpdatedAt = msTime(at)
	return j
}
