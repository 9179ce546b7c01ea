package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/delayq/delayq/core"
)

// The slots of key_concurrency on a Redis Cluster (doc.go, Key limits),
// where a key's jobs spread over slots that no script can count together:
// slots.lua holds them in the prefix's own slot, a claim asks for its
// candidates' slots there before it reserves them in their shards, and
// whatever ends a lease that holds one frees it there afterwards.

// kqLevel spaces the priorities of a key's queue (lib.lua's KQ_LEVEL).
const kqLevel = 1 << 43

// slotsMax bounds the wake-up rounds of one freeing of slots: each round
// pops again the keys whose woken job had left its parked set already.
const slotsMax = 100

// errExtendSlot is the lease script's answer (code 4) to a touch of a job
// that holds a slot of a Cluster: the slot's holder is extended first.
var errExtendSlot = errors.New("redisstore: extend the slot first")

// slots runs slots.lua in mode and wakes the parked jobs it popped: it
// returns the rest of its answer. The jobs popped are woken whatever
// becomes of ctx, which a caller may give up.
func (s *Store) slots(ctx context.Context, mode string, args ...any) ([]any, error) {
	reply, err := s.slotsOnce(ctx, mode, args...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseTimeout)
	defer cancel()
	if err := s.unpark(ctx, asSlice(reply[1])); err != nil {
		return nil, err
	}
	return reply[2:], nil
}

// slotsOnce runs slots.lua in mode with args, and with the jobs woken
// since the last call that are back in their queues (Store.woke), and
// returns its answer: {now, wake, ...}.
func (s *Store) slotsOnce(ctx context.Context, mode string, args ...any) ([]any, error) {
	s.slotsMu.Lock()
	woke := s.woke
	s.woke = nil
	s.slotsMu.Unlock()
	all := append(append([]any{mode, len(woke) / 4}, woke...), args...)
	c := s.shardCall(scriptSlots, 0, all...)
	c.keys = []string{s.keys.holders}
	reply, err := s.run(ctx, []call{c})[0].Slice()
	if err == nil && len(reply) < 2 {
		err = errShortReply
	}
	if err != nil {
		s.slotsMu.Lock()
		s.woke = append(woke, s.woke...) // said next time
		s.slotsMu.Unlock()
		return nil, fmt.Errorf("slots %s: %w", mode, err)
	}
	s.sawServerNow(reply[0])
	return reply, nil
}

// unpark moves the parked jobs slots.lua woke (flat topic, key, id,
// registration) back to their queues, one claim script per shard and
// topic in one pipeline, and pops again the keys of those it finds no
// longer queued. The jobs back in their queues are said to slots.lua with
// the next call (Store.woke): until then it keeps them, to wake again
// should this store die first.
func (s *Store) unpark(ctx context.Context, woken []any) error {
	for range slotsMax {
		if len(woken) < 4 {
			return nil
		}
		type place struct {
			shard int
			topic string
		}
		ids := map[place][]any{}       // id, registration
		entries := map[place][][]any{} // the woken entries, in ids' order
		var order []place
		for i := 0; i+3 < len(woken); i += 4 {
			id := asString(woken[i+2])
			p := place{s.keys.shardOf(id), asString(woken[i])}
			if ids[p] == nil {
				order = append(order, p)
			}
			ids[p] = append(ids[p], id, woken[i+3])
			entries[p] = append(entries[p], woken[i:i+4])
		}
		calls := make([]call, len(order))
		for i, p := range order {
			sk := &s.keys.shard[p.shard]
			calls[i] = s.shardCall(scriptClaim, p.shard, append([]any{p.topic, "unpark", "", "", sk.base, sk.num}, ids[p]...)...)
		}
		var again, woke []any
		for i, cmd := range s.run(ctx, calls) {
			reply, err := cmd.Slice()
			if err == nil && len(reply) != 3 {
				err = errShortReply
			}
			if err != nil {
				return fmt.Errorf("unpark: %w", err)
			}
			s.applyQueued(reply[2])
			p := order[i]
			for k, code := range asSlice(reply[1]) {
				if k >= len(entries[p]) {
					break
				}
				if asInt(code) == 1 {
					again = append(again, entries[p][k]...)
				} else {
					woke = append(woke, entries[p][k]...)
				}
			}
		}
		s.slotsMu.Lock()
		s.woke = append(s.woke, woke...)
		s.slotsMu.Unlock()
		if len(again) == 0 {
			return nil
		}
		reply, err := s.slotsOnce(ctx, "pop", again...)
		if err != nil {
			return err
		}
		woken = asSlice(reply[1])
	}
	return nil
}

// freeSlots frees the slots a script gave back (flat topic, key, id,
// grant: lib.lua's released), whatever becomes of ctx. A failure leaves each holder until its
// score, its lease's expiry, passes: the slots come back later, never
// twice.
func (s *Store) freeSlots(ctx context.Context, released []any) {
	if len(released) < 4 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseTimeout)
	defer cancel()
	var err error
	for range freeTries {
		// Freeing a holder twice frees it once: a call whose answer was
		// lost may go again.
		var reply []any
		if reply, err = s.slots(ctx, "release", released...); err == nil || ctx.Err() != nil {
			if len(reply) > 0 {
				// A key back in a fair topic's ring: its claims look at
				// once (other stores learn it from the wake-up channel).
				for _, topic := range asSlice(reply[0]) {
					s.queued(asString(topic), 0, s.serverNow())
				}
			}
			break
		}
	}
	if err != nil {
		s.log.Warn("redisstore: freeing key slots failed; they come back as their leases end", "prefix", s.cfg.Prefix, "err", err)
	}
}

// freeTries is how often freeSlots tries.
const freeTries = 3

// grants is what slots.lua granted the candidates of a claim.
type grants struct {
	token   string
	until   map[string]int64 // id -> the end of its slot (ms), which caps its lease
	refused map[string]any   // id -> its registration in its key's queue, to park it under
	soon    int64            // when the first key waiting for a token gets it (ms), or -1
}

// grant asks slots.lua for the slots of the candidates with a key under
// limit (0: none), and with a rate per key (keyRateArg's, or empty) for a
// token of each candidate's key, in claim order; those refused join their
// key's queue, and the claim parks them. With a rate it asks even without
// candidates: the keys whose token came wake their jobs. A topic whose
// reserved jobs with a key are not counted yet (a limit after claims
// without) is counted first. A grant that fails frees what it may have
// granted.
func (s *Store) grant(ctx context.Context, topic string, limit int, rate string, cands []candidate) (grants, error) {
	g := grants{token: rand.Text(), until: map[string]int64{}, refused: map[string]any{}, soon: -1}
	args := []any{topic, limit, g.token, rate}
	var all []any // every slot it may grant, to free on a failure
	for _, c := range cands {
		if c.key != "" || rate != "" {
			args = append(args, c.id, c.key, c.ttr, (c.priority+10)*kqLevel+c.runAt)
		}
		if c.key != "" && limit > 0 {
			all = append(all, topic, c.key, c.id, g.token)
		}
	}
	if len(all) == 0 && rate == "" {
		return g, nil
	}
	reply, err := s.slotsCounted(ctx, topic, "grant", args...)
	if err != nil {
		s.freeSlots(ctx, all)
		return grants{}, err
	}
	if len(reply) != 3 {
		return grants{}, unavailable("claim", errShortReply)
	}
	flat := asSlice(reply[0])
	for i := 0; i+1 < len(flat); i += 2 {
		if until := asString(flat[i+1]); until != "" { // else a token without a slot
			g.until[asString(flat[i])] = asInt(flat[i+1])
		}
	}
	g.soon = asInt(reply[2])
	flat = asSlice(reply[1])
	for i := 0; i+1 < len(flat); i += 2 {
		g.refused[asString(flat[i])] = flat[i+1]
	}
	return g, nil
}

// slotsCounted runs slots.lua in mode (grant, fair) for topic, and again
// once the topic's reserved jobs with a key are counted as holding slots
// when it asks for that (a limit after claims without).
func (s *Store) slotsCounted(ctx context.Context, topic, mode string, args ...any) ([]any, error) {
	for range 2 {
		reply, err := s.slots(ctx, mode, args...)
		if err != nil {
			return nil, unavailable("claim", err)
		}
		if len(reply) != 1 || asString(reply[0]) != "count" {
			return reply, nil
		}
		if err := s.countHeld(ctx, topic); err != nil {
			return nil, err
		}
	}
	return nil, unavailable("claim", errors.New("redisstore: key slots still uncounted"))
}

// countHeld makes the reserved jobs of topic with a key that hold no slot
// (reserved by claims without a limit) hold one, in every shard, and
// records them in slots.lua.
func (s *Store) countHeld(ctx context.Context, topic string) error {
	token := rand.Text()
	calls := make([]call, s.cfg.Shards)
	for n := range calls {
		sk := &s.keys.shard[n]
		calls[n] = s.shardCall(scriptClaim, n, topic, "count", token, "", sk.base, sk.num)
	}
	args := []any{topic}
	for _, cmd := range s.run(ctx, calls) {
		reply, err := cmd.Slice()
		if err == nil && len(reply) != 2 {
			err = errShortReply
		}
		if err != nil {
			return unavailable("count key slots", err)
		}
		args = append(args, asSlice(reply[1])...)
	}
	if _, err := s.slots(ctx, "hold", args...); err != nil {
		return unavailable("count key slots", err)
	}
	return nil
}

// extendSlot extends the holder of a slot a touch found (the lease
// script's code 4: topic, key, grant, ttr) and returns its new end (ms),
// the cap of the touch's lease. Errors: ErrLeaseLost when the holder
// lapsed (its lease with it), ErrUnavailable.
func (s *Store) extendSlot(ctx context.Context, id string, found []any) (int64, error) {
	if len(found) != 4 {
		return 0, unavailable("touch", errShortReply)
	}
	reply, err := s.slots(ctx, "extend", found[0], found[1], id, found[2], found[3])
	if err == nil && len(reply) != 1 {
		err = errShortReply
	}
	if err != nil {
		return 0, unavailable("touch", err)
	}
	until := asInt(reply[0])
	if until < 0 {
		return 0, fmt.Errorf("redisstore: touch %q: %w", id, core.ErrLeaseLost)
	}
	return until, nil
}

// unused returns the slots g granted to cands that the claim did not use
// (the job another claim took, or cancelled), to free (flat topic, key,
// id, grant), but for those of the shards in unknown, whose claims may
// have reserved them unanswered: those lapse with their scores.
func (g grants) unused(topic string, cands []candidate, reserved []*core.Job, unknown map[int]bool) []any {
	used := make(map[string]bool, len(reserved))
	for _, j := range reserved {
		used[j.ID] = true
	}
	var out []any
	for _, c := range cands {
		if _, ok := g.until[c.id]; ok && !used[c.id] && !unknown[c.shard] {
			out = append(out, topic, c.key, c.id, g.token)
		}
	}
	return out
}
