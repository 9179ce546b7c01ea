package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"slices"

	"github.com/delayq/delayq/core"
)

// Fair claims on a Redis Cluster (doc.go, Key limits), where a key's jobs
// spread over the shards' slots: the ring of keys and their queues live in
// the prefix's own slot (slots.lua's "fair"), beside the key slots.

// fairWalk is how many due jobs of each shard's queue, and of its new
// jobs by key (the puts' of a fair topic), a fair claim on a Cluster reads
// and registers in their keys' queues: a key's backlog ahead of another
// key's jobs in a shard's queue (jobs put without the flag, retried ones)
// holds up that key's entry into the ring by one claim per fairWalk of it.
const fairWalk = 1000

// pickFair is pick for a fair claim: it reads up to fairWalk due jobs of
// each shard of shards, of its queue and of its new jobs, max(Max, 100)
// of each key at most (peek.lua, one pipeline), has slots.lua register
// them in their keys' queues and serve up to max from the ring of keys,
// one of each in turn (with a KeyConcurrency, a slot with each), and then
// reserves the jobs served and parks the other jobs registered, one claim
// script per shard in one pipeline. A claim so runs one peek.lua per due
// shard, one slots.lua, and one claim.lua per shard that holds a job
// served or to park: at most 2 × shards + 1 scripts in three round trips.
// The jobs come in the order served.
func (s *Store) pickFair(ctx context.Context, ts *topicState, p *core.ClaimJobsParams, via string, shards []int, gens []uint64, max int) ([]*core.Job, error) {
	topic, limit := p.Topic, p.KeyConcurrency
	seen := peeked{head: make([]int64, len(shards)), now: s.serverNow()}
	lists := make([][]candidate, len(shards))
	all := make([]int, len(shards))
	for i := range all {
		all[i] = i
	}
	perKey := p.Max // of a key's new jobs per shard, as one server's claims ripen them
	if perKey < 100 {
		perKey = 100
	}
	limits := make([]int, len(shards))
	for i := range limits {
		limits[i] = fairWalk
	}
	if err := s.peekShards(ctx, topic, shards, all, limits, true, perKey, &seen, lists, make([]bool, len(shards))); err != nil {
		return nil, err
	}
	cands := slices.Concat(lists...)
	slices.SortFunc(cands, candidateLess)
	token := rand.Text() // the grant of the slots, and the claim's token
	args := []any{topic, limit, token, max, keyRateArg(p.KeyRate)}
	for _, c := range cands {
		args = append(args, c.id, c.key, c.ttr, (c.priority+10)*kqLevel+c.runAt)
	}
	reply, err := s.slotsCounted(ctx, topic, "fair", args...)
	if err != nil {
		return nil, err
	}
	if len(reply) != 4 {
		return nil, unavailable("claim", errShortReply)
	}

	byShard := map[int][]any{} // the claim script's triples: id, priority, what to do
	var order []int
	add := func(id string, priority int64, do string) {
		n := s.keys.shardOf(id)
		if byShard[n] == nil {
			order = append(order, n)
		}
		byShard[n] = append(byShard[n], id, priority, do)
	}
	type servedJob struct{ key, registration, until string }
	served := map[string]servedJob{}
	place := map[string]int{}
	flat := asSlice(reply[0]) // id, key, registration, until, place in its key's queue
	for i := 0; i+4 < len(flat); i += 5 {
		id, sj := asString(flat[i]), servedJob{asString(flat[i+1]), asString(flat[i+2]), asString(flat[i+3])}
		do := "f" + sj.registration
		if sj.until != "" {
			do += " " + sj.until
		}
		add(id, asInt(flat[i+4])/kqLevel-10, do)
		served[id], place[id] = sj, len(place)
	}
	priority := make(map[string]int64, len(cands))
	for _, c := range cands {
		priority[c.id] = c.priority
	}
	flat = asSlice(reply[1]) // id, registration
	for i := 0; i+1 < len(flat); i += 2 {
		id := asString(flat[i])
		add(id, priority[id], "p"+asString(flat[i+1]))
	}
	for i, n := range shards {
		if byShard[n] == nil {
			s.sawQueue(ts, n, gens[n], seen.head[i], seen.now)
		}
	}
	tokens := make([]string, len(order))
	for i := range tokens {
		tokens[i] = token
	}
	jobs, unknown, paused, firstErr := s.claimIDs(ctx, ts, topic, via, gens, order, byShard, tokens)
	// Once the heads read are recorded: with keys in the ring still a claim
	// looks again at once, else when a waiting key gets its token.
	if asInt(reply[2]) == 1 {
		s.queued(topic, 0, seen.now)
	} else if soon := asInt(reply[3]); soon >= 0 {
		s.queued(topic, 0, soon)
	}
	slices.SortFunc(jobs, func(a, b *core.Job) int { return cmp.Compare(place[a.ID], place[b.ID]) })

	// The jobs served are said to slots.lua (Store.woke) once their shard
	// answered, reserved or gone; the slots of those not reserved are
	// freed. Those of a shard that did not answer are woken again later,
	// their slots lapsing with their scores, and those of a paused one
	// (still parked) woken again too.
	reserved := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		reserved[j.ID] = true
	}
	var confirm, unused []any
	for id, sj := range served {
		n := s.keys.shardOf(id)
		if unknown[n] {
			continue
		}
		if !paused[n] {
			confirm = append(confirm, topic, sj.key, id, sj.registration)
		}
		if sj.until != "" && !reserved[id] {
			unused = append(unused, topic, sj.key, id, token)
		}
	}
	s.slotsMu.Lock()
	s.woke = append(s.woke, confirm...)
	s.slotsMu.Unlock()
	s.freeSlots(ctx, unused)
	if len(jobs) == 0 && firstErr != nil {
		return nil, unavailable("claim", firstErr)
	}
	if len(jobs) == 0 && len(paused) > 0 {
		return nil, errPaused
	}
	return jobs, nil
}
