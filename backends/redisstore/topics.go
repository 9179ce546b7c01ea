package redisstore

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/delayq/delayq/core"
)

// GetTopicState implements core.Store. Errors: ErrClosed, ErrUnavailable.
func (s *Store) GetTopicState(ctx context.Context, name string) (core.TopicState, error) {
	if s.isClosed() {
		return core.TopicState{}, core.ErrClosed
	}
	paused, err := s.rdb.SIsMember(ctx, s.keys.paused(0), name).Result()
	if err != nil {
		return core.TopicState{}, unavailable("get topic", err)
	}
	st, err := s.stats(ctx, []string{name})
	if err != nil {
		return core.TopicState{}, err
	}
	return core.TopicState{Name: name, Paused: paused, Counts: st[0]}, nil
}

// TakeRate implements core.Store: one script on the topic's bucket, a
// hash in the slot of the prefix's own keys, on the server's clock. Errors:
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) TakeRate(ctx context.Context, params *core.TakeRateParams) (core.TakeRateResult, error) {
	if err := core.CheckRate(params); err != nil {
		return core.TakeRateResult{}, err
	}
	if s.isClosed() {
		return core.TakeRateResult{}, core.ErrClosed
	}
	now := ""
	if s.cfg.TimeFromClock {
		now = strconv.FormatInt(s.clock.Now().UnixMilli(), 10)
	}
	r := params.Rate
	res, err := scriptRate.Run(ctx, s.rdb, []string{s.keys.rate(params.Topic)}, now, r.Limit, periodMS(r.Period), r.Burst, params.Want).Int64Slice()
	if err == nil && len(res) != 2 {
		err = errShortReply
	}
	if err != nil {
		return core.TakeRateResult{}, unavailable("take rate", err)
	}
	return core.TakeRateResult{Granted: int(res[0]), Next: time.Duration(res[1]) * time.Millisecond}, nil
}

// periodMS is a rate's period in ms, as the scripts take it: fractions
// kept, since a period need not be whole ms.
func periodMS(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

// SetTopicPaused implements core.Store: the topic joins or leaves the
// paused set of every shard, which claim scripts check; a resume then wakes
// the claims of every instance. Errors: ErrClosed, ErrUnavailable.
func (s *Store) SetTopicPaused(ctx context.Context, name string, paused bool) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	pipe := s.rdb.Pipeline()
	for n := range s.cfg.Shards {
		if paused {
			pipe.SAdd(ctx, s.keys.paused(n), name)
		} else {
			pipe.SRem(ctx, s.keys.paused(n), name)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return unavailable("pause topic", err)
	}
	if paused {
		return nil
	}
	// After every shard's set changed, so that no claim it wakes finds the
	// topic still paused in a shard on another node.
	if err := s.rdb.Publish(ctx, s.keys.channel, "p 0 0 "+name).Err(); err != nil {
		return unavailable("resume topic", err)
	}
	return nil
}

// ListTopicStates implements core.Store: the paused topics and those of
// the topic registry that have jobs, finished ones within retention
// included. Registry entries of topics found empty an hour after their
// last put are dropped. Errors: ErrClosed, ErrUnavailable.
func (s *Store) ListTopicStates(ctx context.Context) ([]core.TopicState, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	pipe := s.rdb.Pipeline()
	seen := pipe.ZRangeWithScores(ctx, s.keys.seen, 0, -1)
	pausedList := pipe.SMembers(ctx, s.keys.paused(0))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, unavailable("list topics", err)
	}
	lastSeen := map[string]float64{}
	names := pausedList.Val()
	paused := make(map[string]bool, len(names))
	for _, name := range names {
		paused[name] = true
	}
	for _, z := range seen.Val() {
		name, _ := z.Member.(string)
		names = append(names, name)
		lastSeen[name] = z.Score
	}
	slices.Sort(names)
	names = slices.Compact(names)
	states := []core.TopicState{}
	if len(names) == 0 {
		return states, nil
	}
	counts, err := s.stats(ctx, names)
	if err != nil {
		return nil, err
	}
	cutoff := s.clock.Now().Add(-pruneAfter).UnixMilli()
	var prune []any
	for i, name := range names {
		if counts[i] == (core.Counts{}) && !paused[name] {
			if at, ok := lastSeen[name]; ok && at < float64(cutoff) {
				prune = append(prune, name)
			}
			continue
		}
		states = append(states, core.TopicState{Name: name, Paused: paused[name], Counts: counts[i]})
	}
	if len(prune) > 0 {
		args := append([]any{cutoff}, prune...)
		if err := scriptPrune.Run(ctx, s.rdb, []string{s.keys.seen}, args...).Err(); err != nil {
			s.log.Warn("redisstore: pruning the topic registry failed", "prefix", s.cfg.Prefix, "err", err)
		}
	}
	return states, nil
}

// stats sums the counts of names over every shard, one stats script per
// shard in one pipeline.
func (s *Store) stats(ctx context.Context, names []string) ([]core.Counts, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	calls := make([]call, s.cfg.Shards)
	for n := range calls {
		calls[n] = s.shardCall(scriptStats, n, args...)
	}
	out := make([]core.Counts, len(names))
	for _, cmd := range s.run(ctx, calls) {
		res, err := cmd.Slice()
		if err == nil && len(res) != len(names) {
			err = errShortReply
		}
		if err != nil {
			return nil, unavailable("count topics", err)
		}
		for i, r := range res {
			v := asSlice(r)
			if len(v) < 6 {
				return nil, unavailable("count topics", errShortReply)
			}
			c := &out[i]
			c.Scheduled += asInt(v[0])
			c.Ready += asInt(v[1])
			c.Reserved += asInt(v[2])
			c.Dead += asInt(v[3])
			c.Done += asInt(v[4])
			c.Cancelled += asInt(v[5])
		}
	}
	return out, nil
}
