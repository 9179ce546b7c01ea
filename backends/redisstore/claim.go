package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strconv"
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
	// lost are the claims of the topic whose answer did not come (a
	// connection cut after the script ran), for the next claim to find
	// what they reserved (recover); recovered is what it found beyond its
	// room, for the claims after. Both under sem.
	lost      []lostClaim
	recovered []*core.Job
	// due is, per shard, the earliest run_at (server ms) the topic's queue
	// there may hold: 0 when unknown, noDue when seen empty. A claim reads
	// the shards whose due time has come, and waits for the earliest of
	// the others.
	due []int64
	// readAt is, per shard, when a claim last read the queue (server ms):
	// a queue not read for sweepInterval is read again whatever due says.
	readAt []int64
	// gen counts wake-ups per shard: what a claim read replaces due only
	// when no wake-up came since it read the shard.
	gen []uint64
	// keyLimit, fair and keyRate are the KeyConcurrency, Fair and KeyRate
	// of the store's last claim: a claim with others reads every shard,
	// since its script may move jobs parked under the others back to their
	// queues (Key limits in lua/lib.lua), which the queue heads known do
	// not show.
	keyLimit int
	fair     bool
	keyRate  core.Rate
	// modeSaid is whether a claim of the store said them to the prefix on
	// a Cluster (slots.lua's "mode"), which its first claim does whatever
	// they are: another instance's earlier claims or puts may have parked
	// jobs under others.
	modeSaid bool
}

// topicState returns the state of topic, made if needed. s.mu must be held.
func (s *Store) topicState(topic string) *topicState {
	ts := s.topics[topic]
	if ts == nil {
		ts = &topicState{
			sem:    make(chan struct{}, 1),
			due:    make([]int64, s.cfg.Shards),
			readAt: make([]int64, s.cfg.Shards),
			gen:    make([]uint64, s.cfg.Shards),
		}
		s.topics[topic] = ts
	}
	return ts
}

// lostClaim is a claim script run whose answer did not come: its token
// and the shard of its call, where it kept the ids it reserved.
type lostClaim struct {
	token string
	shard int
	at    time.Time // on the real clock, as the server's expiry of the ids
}

// lostKeep is how long a lost claim's ids are kept: claim.lua's CLAIM_KEEP.
const lostKeep = time.Minute

// lostMax bounds the lost claims a topic keeps: a backend down for long
// fails a claim at each try.
const lostMax = 64

// lose records a claim run whose answer did not come. Under ts.sem.
func (ts *topicState) lose(token string, shard int) {
	if len(ts.lost) == lostMax {
		ts.lost = ts.lost[1:]
	}
	ts.lost = append(ts.lost, lostClaim{token: token, shard: shard, at: time.Now()})
}

// recover returns up to room jobs that claims whose answer was lost had
// reserved and whose leases still hold, read back with recover.lua, so
// that their attempts are delivered rather than spent unseen until the
// leases run out (a history run with partitions found such attempts).
// What it cannot read now it tries again at the next claim. Under ts.sem.
func (s *Store) recover(ctx context.Context, ts *topicState, room int) []*core.Job {
	for len(ts.lost) > 0 {
		l := ts.lost[0]
		if time.Since(l.at) > lostKeep {
			ts.lost = ts.lost[1:]
			continue
		}
		several := ""
		if s.multiShard {
			several = "1"
		}
		reply, err := s.run(ctx, []call{s.shardCall(scriptRecover, l.shard, l.token, several)})[0].Slice()
		if err != nil {
			break
		}
		ts.lost = ts.lost[1:]
		if len(reply) != 2 {
			continue
		}
		s.sawServerNow(reply[0])
		for _, r := range asSlice(reply[1]) {
			row := asSlice(r)
			if len(row) != 2 {
				continue
			}
			if j, err := decodeFlat(asString(row[0]), asSlice(row[1])); err == nil && j.State == core.StateReserved {
				ts.recovered = append(ts.recovered, j)
			}
		}
	}
	var out []*core.Job
	now := s.clock.Now()
	keep := ts.recovered[:0]
	for _, j := range ts.recovered {
		switch {
		case !j.LeaseExpiresAt.After(now):
		case len(out) < room:
			out = append(out, j)
		default:
			keep = append(keep, j)
		}
	}
	ts.recovered = keep
	return out
}

// errAnswerLost is the error of a claim whose answer a test drops
// (Store.loseAnswers).
var errAnswerLost = errors.New("redisstore: the claim's answer was lost (test)")

// answerLost drops cmd's answer, as a connection cut after the script ran
// would, while a test asks it (Store.loseAnswers).
func (s *Store) answerLost(cmd *redis.Cmd) {
	if s.loseAnswers.Load() > 0 && s.loseAnswers.Add(-1) >= 0 {
		cmd.SetErr(errAnswerLost)
	}
}

// errPaused is a claim script's answer for a paused topic.
var errPaused = errors.New("redisstore: topic paused")

// resumed wakes the claims of topic that wait, to read every shard.
func (s *Store) resumed(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts := s.topics[topic]; ts != nil {
		s.rescan(topic, ts)
	}
}

// rescan forgets what ts, topic's state, knows of its queues and wakes its
// waiting claims, to read every shard. s.mu must be held.
func (s *Store) rescan(topic string, ts *topicState) {
	for n := range ts.due {
		ts.due[n] = 0
		ts.gen[n]++
	}
	s.notify.Notify(topic)
}

// queued records that topic's queue in shard n holds a job due at (server
// ms) and wakes the claims waiting for it.
func (s *Store) queued(topic string, n int, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.topics[topic]
	if ts == nil {
		return // no claim of this store looked at it: its due times start unknown
	}
	ts.gen[n]++
	if at >= ts.due[n] {
		return
	}
	ts.due[n] = at
	s.notify.Notify(topic)
}

// wakeAll wakes every waiting claim and has it read every shard.
func (s *Store) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, ts := range s.topics {
		s.rescan(topic, ts)
	}
}

// sawQueue records what a claim that read topic's queue in shard n at
// generation gen found: its first run_at (server ms), or -1 when empty.
func (s *Store) sawQueue(ts *topicState, n int, gen uint64, head, now int64) {
	if head < 0 {
		head = noDue
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ts.readAt[n] = now
	if ts.gen[n] == gen {
		ts.due[n] = head
	} else {
		ts.due[n] = min(ts.due[n], head)
	}
}

// ClaimJobs implements core.Store: core.Claim over TakeJobs. Errors:
// ErrInvalidArgument when params.Max < 1, ErrClosed, ErrUnavailable.
func (s *Store) ClaimJobs(ctx context.Context, params *core.ClaimJobsParams) ([]*core.Job, error) {
	return core.Claim(ctx, s, s.clock, params)
}

// ClaimNotifier implements core.ClaimSource.
func (s *Store) ClaimNotifier() *core.Notifier { return &s.notify }

// TakeJobs implements core.ClaimSource. It reserves, with one claim
// script, the earliest due jobs of the topic's queues, by run_at then id:
// on a standalone server the script picks them itself; on a Cluster the
// store reads the heads of the shards' queues first and reserves the
// earliest (one claim script per shard), skipping a job another claim took
// in between. It reads only the queues whose earliest job is due, as far
// as it knows; with nothing due it answers the earliest due time it knows,
// and notifies on a wake-up (a put, a retry, an expired lease, a message
// from another store). Errors: ErrClosed, ErrUnavailable.
func (s *Store) TakeJobs(ctx context.Context, params *core.ClaimJobsParams) (core.Taken, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.Taken{}, core.ErrClosed
	}
	ts := s.topicState(params.Topic)
	s.mu.Unlock()
	select {
	case ts.sem <- struct{}{}:
	case <-ctx.Done():
		return core.Taken{Jobs: []*core.Job{}}, nil
	case <-s.done:
		return core.Taken{}, core.ErrClosed
	}
	room, err := s.room(ctx, params)
	taken := core.Taken{Jobs: []*core.Job{}}
	next := int64(noDue)
	if err == nil && room > 0 {
		found := s.recover(ctx, ts, room)
		if len(found) < room {
			taken.Jobs, next, err = s.claimOnce(ctx, ts, params, encodeVia(params), room-len(found))
		}
		if len(found) > 0 {
			taken.Jobs, err = append(found, taken.Jobs...), nil
		}
	}
	<-ts.sem
	switch {
	case s.isClosed():
		return core.Taken{}, core.ErrClosed
	case ctx.Err() != nil && len(taken.Jobs) == 0:
		return core.Taken{Jobs: []*core.Job{}}, nil
	case errors.Is(err, errPaused):
		// Nothing to take until a resume notifies ("p" on the wake-up
		// channel); a lost wake-up costs a sweep at most.
		taken.Jobs, next = []*core.Job{}, s.serverNow()+sweepInterval.Milliseconds()
	case err != nil:
		return core.Taken{}, err
	case room == 0:
		// As many reserved as the claim allows: a delivery that ends
		// tells no instance, so look again shortly.
		taken.Full, next = true, s.serverNow()+core.InFlightRecheck.Milliseconds()
	}
	if len(taken.Jobs) == 0 && next != noDue {
		taken.Next = s.localAt(next)
	}
	return taken, nil
}

// room returns how many jobs a claim of params may take: params.Max, or
// less under params.InFlightMax, read from the reserved counts of every
// shard (one pipeline). Claims of this store take turns per topic (the
// topic's sem), so only claims of other instances may race it.
func (s *Store) room(ctx context.Context, params *core.ClaimJobsParams) (int, error) {
	if params.InFlightMax <= 0 {
		return params.Max, nil
	}
	pipe := s.rdb.Pipeline()
	counts := make([]*redis.StringCmd, s.cfg.Shards)
	for n := range counts {
		counts[n] = pipe.HGet(ctx, s.keys.counts(n), "x:"+params.Topic)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, unavailable("count reserved jobs", err)
	}
	reserved := 0
	for _, c := range counts {
		n, _ := c.Int() // a missing count is 0
		reserved += n
	}
	return params.Room(reserved), nil
}

// sayMode tells the prefix of a Cluster the key limits of p, a claim of a
// store whose claims had others or none yet: the jobs parked under a lower
// limit wake, without one the topic's reserved jobs stop counting as
// holding slots, and without fair, or with another rate per key, every
// parked job wakes (slots.lua's "mode"); without fair, the new jobs of a
// fair topic's puts go back to their shards' queues too (claim.lua's
// "unnew").
func (s *Store) sayMode(ctx context.Context, p *core.ClaimJobsParams) error {
	fair := "0"
	if p.Fair {
		fair = "1"
	}
	if _, err := s.slots(ctx, "mode", p.Topic, p.KeyConcurrency, fair, keyRateArg(p.KeyRate)); err != nil || p.Fair {
		return err
	}
	calls := make([]call, s.cfg.Shards)
	for n := range calls {
		sk := &s.keys.shard[n]
		calls[n] = s.shardCall(scriptClaim, n, p.Topic, "unnew", "", "", sk.base, sk.num)
	}
	for _, cmd := range s.run(ctx, calls) {
		reply, err := cmd.Slice()
		if err == nil && len(reply) != 2 {
			err = errShortReply
		}
		if err != nil {
			return err
		}
		s.applyQueued(reply[1])
	}
	return nil
}

// claimOnce claims up to max due jobs of p's topic, by priority then
// run_at (a fair claim: by key in turn). It returns an empty slice when
// none is due, with the earliest due time known of the topic's queues
// (server ms; noDue when all are empty), and errPaused when the topic is
// paused.
func (s *Store) claimOnce(ctx context.Context, ts *topicState, p *core.ClaimJobsParams, via string, max int) ([]*core.Job, int64, error) {
	s.mu.Lock()
	changed := ts.keyLimit != p.KeyConcurrency || ts.fair != p.Fair || ts.keyRate != p.KeyRate
	say := !s.multiShard && (changed || !ts.modeSaid)
	s.mu.Unlock()
	if say {
		if err := s.sayMode(ctx, p); err != nil {
			return nil, 0, unavailable("claim", err)
		}
	}
	if changed || say {
		s.mu.Lock()
		ts.keyLimit, ts.fair, ts.keyRate, ts.modeSaid = p.KeyConcurrency, p.Fair, p.KeyRate, true
		for n := range ts.due {
			ts.due[n] = 0
		}
		s.mu.Unlock()
	}
	for {
		now := s.serverNow()
		s.mu.Lock()
		var shards []int
		gens := slices.Clone(ts.gen) // per shard, as read before the claim
		next := int64(noDue)
		for n, at := range ts.due {
			if at <= now+skewMargin || now-ts.readAt[n] >= sweepInterval.Milliseconds() {
				shards = append(shards, n)
			} else {
				next = min(next, at)
			}
		}
		s.mu.Unlock()
		if len(shards) == 0 {
			return []*core.Job{}, next, nil
		}
		var (
			jobs []*core.Job
			err  error
		)
		if s.multiShard {
			jobs, err = s.take(ctx, ts, p, via, shards, gens, max)
		} else {
			jobs, err = s.pick(ctx, ts, p, via, shards, gens, max)
		}
		if err != nil {
			return nil, 0, err
		}
		if len(jobs) > 0 && p.Fair {
			return jobs, 0, nil // in the claim's order of keys
		}
		if len(jobs) > 0 {
			slices.SortFunc(jobs, func(a, b *core.Job) int {
				return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), strings.Compare(a.ID, b.ID))
			})
			return jobs, 0, nil
		}
		// Nothing due: the queues read now say when. Or every job seen was
		// taken by another claim meanwhile: look again.
		s.mu.Lock()
		again := false
		next = noDue
		now = s.serverNow()
		for _, at := range ts.due {
			if at <= now {
				again = true
			}
			next = min(next, at)
		}
		s.mu.Unlock()
		if !again {
			return []*core.Job{}, next, nil
		}
	}
}

// take reserves the first max due jobs of p's topic in shards (by
// priority, run_at, id) with one claim script that picks them itself (a
// standalone server), within p's KeyConcurrency and KeyRate, or by key in
// turn when p is Fair (the script then reads every shard). gens are the
// shards' generations before the claim.
func (s *Store) take(ctx context.Context, ts *topicState, p *core.ClaimJobsParams, via string, shards []int, gens []uint64, max int) ([]*core.Job, error) {
	fair := "0"
	if p.Fair {
		fair = "1"
	}
	token := rand.Text()
	args := make([]any, 0, 9+2*len(shards))
	args = append(args, p.Topic, "take", token, via, max, p.KeyConcurrency, fair, len(shards))
	for _, n := range shards {
		sk := &s.keys.shard[n]
		args = append(args, sk.base, sk.num)
	}
	args = append(args, keyRateArg(p.KeyRate))
	// A claim waits for replicas as the other writes do (Config.WaitReplicas):
	// a failover would otherwise hand its jobs out again with the same
	// attempts. One not confirmed fails, its jobs reserved until their
	// leases run out.
	cmd := s.write(ctx, []call{s.shardCall(scriptClaim, shards[0], args...)})[0]
	s.answerLost(cmd)
	jobs, err := s.claimed(ts, via, gens, cmd)
	if err != nil && !errors.Is(err, errPaused) {
		ts.lose(token, shards[0])
		return nil, unavailable("claim", err)
	}
	return jobs, err
}

// keyRateArg is rate, a rate per key, as the claim script takes it:
// "<limit> <period ms> <burst>", or empty when it does not limit.
func keyRateArg(rate core.Rate) string {
	if rate.Limit == 0 {
		return ""
	}
	return strconv.Itoa(rate.Limit) + " " + periodMS(rate.Period) + " " + strconv.Itoa(rate.Burst)
}

// pick reads the heads of p's topic's queues in shards, picks the first
// max due jobs among them (by priority, run_at, id) and reserves them, one
// claim script per shard in one pipeline (a Cluster). With a
// KeyConcurrency it asks for the slots of their keys first (grant): a job
// refused one is parked, and a slot granted and not used (the job gone)
// is freed.
func (s *Store) pick(ctx context.Context, ts *topicState, p *core.ClaimJobsParams, via string, shards []int, gens []uint64, max int) ([]*core.Job, error) {
	if p.Fair {
		return s.pickFair(ctx, ts, p, via, shards, gens, max)
	}
	topic, limit, rate := p.Topic, p.KeyConcurrency, keyRateArg(p.KeyRate)
	cands, err := s.peek(ctx, topic, shards, max, limit > 0 || rate != "")
	if err != nil {
		return nil, err
	}
	var g grants
	if limit > 0 || rate != "" {
		if g, err = s.grant(ctx, topic, limit, rate, cands.top); err != nil {
			return nil, err
		}
		if g.soon >= 0 {
			// A claim looks again when a waiting key gets its token: once
			// the heads read are recorded, which it comes before.
			defer s.queued(topic, 0, g.soon)
		}
	}
	byShard := map[int][]any{}
	var order []int
	for _, c := range cands.top {
		if byShard[c.shard] == nil {
			order = append(order, c.shard)
		}
		until := ""
		if u, ok := g.until[c.id]; ok {
			until = strconv.FormatInt(u, 10)
		} else if v, ok := g.refused[c.id]; ok {
			until = "p" + asString(v) // parked under its registration
		}
		byShard[c.shard] = append(byShard[c.shard], c.id, c.priority, until)
	}
	// A shard with nothing due among the candidates still learns its head.
	for i, n := range shards {
		if byShard[n] == nil {
			s.sawQueue(ts, n, gens[n], cands.head[i], cands.now)
		}
	}
	if len(order) == 0 {
		return []*core.Job{}, nil
	}
	tokens := make([]string, len(order))
	for i := range tokens {
		tokens[i] = rand.Text()
		if limit > 0 {
			tokens[i] = g.token // the K of the jobs that hold a slot
		}
	}
	jobs, unknown, paused, firstErr := s.claimIDs(ctx, ts, topic, via, gens, order, byShard, tokens)
	if len(g.until) > 0 {
		s.freeSlots(ctx, g.unused(topic, cands.top, jobs, unknown))
	}
	if len(jobs) == 0 && firstErr != nil {
		return nil, unavailable("claim", firstErr)
	}
	if len(jobs) == 0 && len(paused) > 0 {
		return nil, errPaused
	}
	// Jobs reserved are returned even when another shard failed: their
	// leases would otherwise have to expire first.
	return jobs, nil
}

// claimIDs runs claim.lua's "ids" mode in the shards of order, one script
// each in one pipeline, with their triples of byShard under tokens (one
// per shard): it returns the jobs reserved, the shards whose claim may
// have reserved unanswered (unknown; their tokens are kept for
// recover.lua), those paused, and the first error.
func (s *Store) claimIDs(ctx context.Context, ts *topicState, topic, via string, gens []uint64, order []int, byShard map[int][]any, tokens []string) (jobs []*core.Job, unknown, paused map[int]bool, firstErr error) {
	calls := make([]call, len(order))
	for i, n := range order {
		sk := &s.keys.shard[n]
		calls[i] = s.shardCall(scriptClaim, n, append([]any{topic, "ids", tokens[i], via, sk.base, sk.num}, byShard[n]...)...)
	}
	jobs, unknown, paused = []*core.Job{}, map[int]bool{}, map[int]bool{}
	for i, cmd := range s.run(ctx, calls) {
		s.answerLost(cmd)
		got, err := s.claimed(ts, via, gens, cmd)
		if errors.Is(err, errPaused) {
			paused[order[i]] = true
			continue
		}
		if err != nil {
			ts.lose(tokens[i], order[i])
			firstErr = cmp.Or(firstErr, err)
			unknown[order[i]] = true
			continue
		}
		jobs = append(jobs, got...)
	}
	return jobs, unknown, paused, firstErr
}

// claimed decodes a claim script's answer (the shards' generations read
// before it, gens): the jobs it reserved by via (encodeVia's form), as
// reserved, in the script's order, those of a fair claim in the claim's;
// it records each shard's queue head and new lease expiry.
func (s *Store) claimed(ts *topicState, via string, gens []uint64, cmd *redis.Cmd) ([]*core.Job, error) {
	reply, err := cmd.Slice()
	if err != nil {
		return nil, err
	}
	if len(reply) == 3 && asInt(reply[2]) == 1 {
		s.sawServerNow(reply[0])
		return nil, errPaused
	}
	if len(reply) != 2 {
		return nil, errShortReply
	}
	now := s.sawServerNow(reply[0])
	jobs := []*core.Job{}
	var places []int64 // of each job, in the claim's order
	from := decodeVia(via)
	for _, g := range asSlice(reply[1]) {
		res := asSlice(g) // jobs, lease, head, shard
		if len(res) < 4 {
			return nil, errShortReply
		}
		n := int(asInt(res[3]))
		if n < 0 || n >= len(gens) {
			return nil, errShortReply
		}
		for _, r := range asSlice(res[0]) {
			row := asSlice(r) // id, fields, lease, place
			if len(row) != 3 && len(row) != 4 {
				return nil, errShortReply
			}
			j, err := decodeFlat(asString(row[0]), asSlice(row[1]))
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, reserved(j, asString(row[2]), from, now))
			if len(row) == 4 {
				places = append(places, asInt(row[3]))
			}
		}
		s.exp.lowerBy(n, res[1])
		s.sawQueue(ts, n, gens[n], asInt(res[2]), now)
	}
	if len(places) == len(jobs) {
		order := make([]int, len(jobs))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(places[a], places[b]) })
		sorted := make([]*core.Job, len(jobs))
		for i, o := range order {
			sorted[i] = jobs[o]
		}
		jobs = sorted
	}
	return jobs, nil
}

// candidate is a due job seen by a claim.
type candidate struct {
	shard int
	// rank orders candidates of one priority and run_at before their ids:
	// the place of their shard in the claim's turn (peek), so that a claim
	// takes such ties, a burst due at one instant, from as few shards as it
	// can, and its acknowledgements batch by shard; 0 in a fair walk.
	rank     int
	id       string
	runAt    int64
	priority int64
	key      string // read only for a claim with a KeyConcurrency
	ttr      int64  // ms; read with key
}

// peeked is what peek saw.
type peeked struct {
	top  []candidate // the first due jobs, in (priority, run_at, rank, id) order
	head []int64     // per shard read: the first run_at of its queue, -1 when empty
	now  int64       // the server's time as the store estimated it (ms)
}

func candidateLess(a, b candidate) int {
	return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(a.runAt, b.runAt), cmp.Compare(a.rank, b.rank),
		strings.Compare(a.id, b.id))
}

// skewMargin (ms) widens what a claim takes for due beyond the store's
// estimate of the server's clock, which may lag it by a round trip: the
// claim script skips a job that is not due by the server's own.
const skewMargin = 10

// peek reads the due heads of topic's queues in shards (peek.lua, one per
// shard in one pipeline) and returns the first max due jobs among them, by
// priority and run_at, then by shard in a turn that starts at the next
// shard at each of the store's claims (rank), then id. It reads up to max
// from the turn's first shard and a fair share of max from each other
// (twice max/shards, and a little), then up to max only from the shards
// whose share was all due and could hide jobs ahead of the last one
// picked, of those that tie it but for their rank only the first: one
// round trip in the usual case and for a burst due at one instant, two
// when due jobs are skewed towards a few shards. After a claim whose jobs
// all came from its turn's first shard (narrowPeek), it reads one job of
// each other shard instead of a share: a burst due at one instant then
// costs each other shard the least read, and a second round trip when the
// first shard no longer has them all. keyed reads each job's key and TTR
// too.
func (s *Store) peek(ctx context.Context, topic string, shards []int, max int, keyed bool) (peeked, error) {
	n := len(shards)
	turn := int(s.claimTurn.Add(1) % uint64(n))
	share := min(max, 2*((max+n-1)/n)+2)
	if _, ok := s.narrowPeek.Load(topic); ok {
		share = 1
	}
	limits := make([]int, n)
	for x := range limits {
		limits[x] = share
	}
	limits[turn] = max
	out := peeked{head: make([]int64, n), now: s.serverNow()}
	lists := make([][]candidate, n)
	full := make([]bool, n)
	read := func(idx []int) error {
		if err := s.peekShards(ctx, topic, shards, idx, limits, keyed, 0, &out, lists, full); err != nil {
			return err
		}
		for _, x := range idx {
			for c := range lists[x] {
				lists[x][c].rank = (x - turn + n) % n
			}
		}
		return nil
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	if err := read(all); err != nil {
		return peeked{}, err
	}
	for round := 1; ; round++ {
		var merged []candidate
		for _, l := range lists {
			merged = append(merged, l...)
		}
		slices.SortFunc(merged, candidateLess)
		out.top = merged[:min(max, len(merged))]
		if round == 2 || len(out.top) == 0 {
			s.notePeek(topic, max, out.top)
			return out, nil
		}
		last := out.top[len(out.top)-1]
		var more []int
		tied := -1 // of the shards that tie last but for their rank, the first
		for x, l := range lists {
			if !full[x] || limits[x] == max {
				continue // nothing more to read there
			}
			f := l[len(l)-1]
			switch {
			case len(out.top) < max:
				more = append(more, x)
			case candidateLess(f, last) >= 0:
			case f.priority == last.priority && f.runAt == last.runAt:
				if tied == -1 || f.rank < lists[tied][len(lists[tied])-1].rank {
					tied = x
				}
			default:
				more = append(more, x)
			}
		}
		if tied != -1 {
			// Its jobs of that priority and run_at come before the
			// others' in the turn: it alone may supply all that are left.
			more = append(more, tied)
		}
		if len(more) == 0 {
			s.notePeek(topic, max, out.top)
			return out, nil
		}
		for _, x := range more {
			limits[x] = max
		}
		if err := read(more); err != nil {
			return peeked{}, err
		}
	}
}

// notePeek records whether a claim of topic took all of its max jobs,
// top, from its turn's first shard (narrowPeek).
func (s *Store) notePeek(topic string, max int, top []candidate) {
	if len(top) == max && !slices.ContainsFunc(top, func(c candidate) bool { return c.rank != 0 }) {
		s.narrowPeek.Store(topic, struct{}{})
	} else {
		s.narrowPeek.Delete(topic)
	}
}

// peekShards reads the due heads of topic's queues in shards[idx] (peek.lua,
// up to limits[x] of shards[x], one script per shard in one pipeline): into
// out (heads, now) and, per index, lists (its candidates, by priority,
// run_at and id) and full (whether it gave its limit). keyed reads each job's key
// and TTR too; fairPerKey > 0 (a fair claim's walk, keyed) also the
// shard's new jobs of a fair topic by key, up to fairPerKey of each.
func (s *Store) peekShards(ctx context.Context, topic string, shards, idx, limits []int, keyed bool, fairPerKey int, out *peeked, lists [][]candidate, full []bool) error {
	width, with := 3, "0"
	switch {
	case fairPerKey > 0:
		width, with = 5, "2"
	case keyed:
		width, with = 5, "1"
	}
	if width == 3 {
		var err error
		if idx, err = s.peekHeads(ctx, topic, shards, idx, limits, out, lists, full); err != nil || len(idx) == 0 {
			return err
		}
	}
	calls := make([]call, len(idx))
	for i, x := range idx {
		calls[i] = s.shardCall(scriptPeek, shards[x], topic, limits[x], with, fairPerKey)
	}
	for i, cmd := range s.run(ctx, calls) {
		x := idx[i]
		reply, err := cmd.Slice()
		if err == nil && len(reply) != 3 {
			err = errShortReply
		}
		if err != nil {
			return unavailable("claim", err)
		}
		out.now = s.sawServerNow(reply[0])
		out.head[x] = asInt(reply[1])
		flat := asSlice(reply[2])
		l := make([]candidate, 0, len(flat)/width)
		for k := 0; k+width-1 < len(flat); k += width {
			c := candidate{shard: shards[x], id: asString(flat[k]), runAt: asInt(flat[k+1]), priority: asInt(flat[k+2])}
			if width == 5 {
				c.key, c.ttr = asString(flat[k+3]), asInt(flat[k+4])
			}
			l = append(l, c)
		}
		lists[x] = l
		full[x] = len(l) == limits[x]
	}
	return nil
}

// peekHeads reads the shards of idx whose limit is one job (a narrow peek)
// as peekShards does, with plain commands instead of the peek script: the
// topic's priorities in the shard and the first job of its queue of
// priority 0, two reads costing Redis about a microsecond each where a
// script call costs tens (docs/benchmarks.md, "Redis: what a call costs").
// Every shard of a burst's claims but the first is read so. It returns
// the shards it could not read so, those whose topic has jobs of another
// priority, for the script.
func (s *Store) peekHeads(ctx context.Context, topic string, shards, idx, limits []int, out *peeked, lists [][]candidate, full []bool) ([]int, error) {
	type read struct {
		levels *redis.IntCmd
		first  *redis.ZSliceCmd
	}
	if !slices.ContainsFunc(idx, func(x int) bool { return limits[x] == 1 }) {
		return idx, nil
	}
	reads := make([]read, len(idx)) // zero for a shard left to the script
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, x := range idx {
			if limits[x] == 1 {
				reads[i] = read{p.ZCard(ctx, s.keys.levels(shards[x], topic)), p.ZRangeWithScores(ctx, s.keys.queue(shards[x], topic), 0, 0)}
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("claim", err)
	}
	var rest []int
	for i, x := range idx {
		r := reads[i]
		if r.levels == nil || r.levels.Val() > 0 {
			rest = append(rest, x)
			continue
		}
		out.head[x], lists[x] = -1, nil
		if first := r.first.Val(); len(first) > 0 {
			runAt := int64(first[0].Score)
			out.head[x] = runAt
			// Due by the store's estimate of the server's clock, as the
			// script judges by the server's own.
			if runAt <= out.now {
				lists[x] = []candidate{{shard: shards[x], id: asString(first[0].Member), runAt: runAt}}
			}
		}
		full[x] = len(lists[x]) == limits[x]
	}
	return rest, nil
}

// reserved applies to a job read by the claim script, as it was before,
// what the script changed: reserved with lease until now (server ms) + TTR,
// one more attempt, started now by claim p. The script leaves this to the
// caller to spare Redis.
func reserved(j *core.Job, lease string, p *core.ClaimJobsParams, now int64) *core.Job {
	j.State = core.StateReserved
	j.Attempt++
	j.Lease = lease
	j.LeaseExpiresAt = msTime(now + j.TTR.Milliseconds())
	j.UpdatedAt = msTime(now)
	j.StartAttempt(p, j.UpdatedAt)
	return j
}
