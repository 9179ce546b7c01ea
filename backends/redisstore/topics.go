package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/core"
)

// PutTopic implements core.Store: the configuration is stored as JSON in
// the prefix's topic hash, shared by every instance. Idempotent. Errors:
// ErrClosed, ErrUnavailable.
func (s *Store) PutTopic(ctx context.Context, t *core.Topic) error {
	if t == nil {
		return core.Invalid("", "redisstore: put topic: no topic")
	}
	if s.isClosed() {
		return core.ErrClosed
	}
	c := *t
	c.Configured = true
	c.Counts = core.Counts{}
	data, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("redisstore: encode topic %q: %w", t.Name, err)
	}
	if err := s.rdb.HSet(ctx, s.keys.topics, t.Name, data).Err(); err != nil {
		return unavailable("put topic", err)
	}
	return nil
}

// GetTopic implements core.Store. Errors: ErrNotFound, ErrClosed,
// ErrUnavailable.
func (s *Store) GetTopic(ctx context.Context, name string) (*core.Topic, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	pipe := s.rdb.Pipeline()
	cfg := pipe.HGet(ctx, s.keys.topics, name)
	seen := pipe.ZScore(ctx, s.keys.seen, name)
	paused := pipe.SIsMember(ctx, s.keys.paused(0), name)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("get topic", err)
	}
	notFound := fmt.Errorf("redisstore: topic %q: %w", name, core.ErrNotFound)
	if errors.Is(cfg.Err(), redis.Nil) && errors.Is(seen.Err(), redis.Nil) && !paused.Val() {
		return nil, notFound
	}
	t, err := decodeTopic(name, cfg)
	if err != nil {
		return nil, err
	}
	st, err := s.stats(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	if t == nil {
		if !s.visible(st[0]) && !paused.Val() {
			return nil, notFound
		}
		t = &core.Topic{Name: name}
	}
	t.Counts = st[0].counts
	t.Paused = paused.Val()
	return t, nil
}

// DeleteTopic implements core.Store. Errors: ErrNotFound, ErrClosed,
// ErrUnavailable.
func (s *Store) DeleteTopic(ctx context.Context, name string) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	n, err := s.rdb.HDel(ctx, s.keys.topics, name).Result()
	if err != nil {
		return unavailable("delete topic", err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: topic %q is not configured: %w", name, core.ErrNotFound)
	}
	return nil
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
	periodMS := strconv.FormatFloat(float64(r.Period)/float64(time.Millisecond), 'f', -1, 64)
	res, err := scriptRate.Run(ctx, s.rdb, []string{s.keys.rate(params.Topic)}, now, r.Limit, periodMS, r.Burst, params.Want).Int64Slice()
	if err == nil && len(res) != 2 {
		err = errShortReply
	}
	if err != nil {
		return core.TakeRateResult{}, unavailable("take rate", err)
	}
	return core.TakeRateResult{Granted: int(res[0]), Next: time.Duration(res[1]) * time.Millisecond}, nil
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

// ListTopicConfigs implements core.Store: one HGETALL of the topics hash,
// no job counts. Errors: ErrClosed, ErrUnavailable.
func (s *Store) ListTopicConfigs(ctx context.Context) ([]*core.Topic, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	cfgs, err := s.rdb.HGetAll(ctx, s.keys.topics).Result()
	if err != nil {
		return nil, unavailable("list topic configurations", err)
	}
	topics := make([]*core.Topic, 0, len(cfgs))
	for name, data := range cfgs {
		t, err := unmarshalTopic(name, data)
		if err != nil {
			return nil, err
		}
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b *core.Topic) int { return strings.Compare(a.Name, b.Name) })
	return topics, nil
}

// ListTopics implements core.Store: configured topics and those of the
// topic registry that have jobs, finished ones within retention included.
// Registry entries of topics found empty and unconfigured an hour after
// their last put are dropped. Errors: ErrClosed, ErrUnavailable.
func (s *Store) ListTopics(ctx context.Context) ([]*core.Topic, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	pipe := s.rdb.Pipeline()
	cfgs := pipe.HGetAll(ctx, s.keys.topics)
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
	for name := range cfgs.Val() {
		names = append(names, name)
	}
	for _, z := range seen.Val() {
		name, _ := z.Member.(string)
		names = append(names, name)
		lastSeen[name] = z.Score
	}
	slices.Sort(names)
	names = slices.Compact(names)
	topics := []*core.Topic{}
	if len(names) == 0 {
		return topics, nil
	}
	st, err := s.stats(ctx, names)
	if err != nil {
		return nil, err
	}
	cutoff := s.clock.Now().Add(-pruneAfter).UnixMilli()
	var prune []any
	for i, name := range names {
		var t *core.Topic
		if data, ok := cfgs.Val()[name]; ok {
			if t, err = unmarshalTopic(name, data); err != nil {
				return nil, err
			}
		} else if s.visible(st[i]) || paused[name] {
			t = &core.Topic{Name: name}
		} else {
			if at, ok := lastSeen[name]; ok && at < float64(cutoff) {
				prune = append(prune, name)
			}
			continue
		}
		t.Counts = st[i].counts
		t.Paused = paused[name]
		topics = append(topics, t)
	}
	if len(prune) > 0 {
		args := append([]any{cutoff}, prune...)
		if err := scriptPrune.Run(ctx, s.rdb, []string{s.keys.seen}, args...).Err(); err != nil {
			s.log.Warn("redisstore: pruning the topic registry failed", "prefix", s.cfg.Prefix, "err", err)
		}
	}
	return topics, nil
}

// topicStat is what the shards hold of one topic.
type topicStat struct {
	counts core.Counts
}

// visible reports whether a topic without configuration is shown: it
// counts jobs, finished ones within the retention period included.
func (s *Store) visible(st topicStat) bool {
	return st.counts != (core.Counts{})
}

// stats sums the counts of names over every shard, one stats script per
// shard in one pipeline.
func (s *Store) stats(ctx context.Context, names []string) ([]topicStat, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	calls := make([]call, s.cfg.Shards)
	for n := range calls {
		calls[n] = s.shardCall(scriptStats, n, args...)
	}
	out := make([]topicStat, len(names))
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
			c := &out[i].counts
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

// decodeTopic reads a configuration from HGET: nil when there is none.
func decodeTopic(name string, cmd *redis.StringCmd) (*core.Topic, error) {
	data, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("get topic", err)
	}
	return unmarshalTopic(name, data)
}

func unmarshalTopic(name, data string) (*core.Topic, error) {
	t := &core.Topic{}
	if err := json.Unmarshal([]byte(data), t); err != nil {
		return nil, fmt.Errorf("redisstore: topic %q: bad configuration: %w", name, err)
	}
	t.Name = name
	t.Configured = true
	return t, nil
}
