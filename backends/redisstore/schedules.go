package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/core"
)

// PutSchedule implements core.Store: the definition in the schedules
// hash; the cursor, in its own hash, stays. Errors: ErrClosed,
// ErrUnavailable.
func (s *Store) PutSchedule(ctx context.Context, sc *core.Schedule) error {
	if sc == nil {
		return core.Invalid("", "redisstore: put schedule: no schedule")
	}
	if s.isClosed() {
		return core.ErrClosed
	}
	c := sc.Clone()
	c.Cursor = time.Time{}
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("redisstore: encode schedule %q: %w", sc.Name, err)
	}
	if err := s.rdb.HSet(ctx, s.keys.sched, sc.Name, data).Err(); err != nil {
		return unavailable("put schedule", err)
	}
	return nil
}

// GetSchedule implements core.Store. Errors: ErrNotFound, ErrClosed,
// ErrUnavailable.
func (s *Store) GetSchedule(ctx context.Context, name string) (*core.Schedule, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	var def, cur *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		def = p.HGet(ctx, s.keys.sched, name)
		cur = p.HGet(ctx, s.keys.cursors, name)
		return nil
	})
	if def.Err() == redis.Nil {
		return nil, fmt.Errorf("redisstore: schedule %q: %w", name, core.ErrNotFound)
	}
	if err != nil && err != redis.Nil { // a cursor not yet set is nil
		return nil, unavailable("get schedule", err)
	}
	return decodeSchedule(name, def.Val(), cur.Val())
}

// ListSchedules implements core.Store. Errors: ErrClosed, ErrUnavailable.
func (s *Store) ListSchedules(ctx context.Context) ([]*core.Schedule, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	var defs, curs *redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		defs = p.HGetAll(ctx, s.keys.sched)
		curs = p.HGetAll(ctx, s.keys.cursors)
		return nil
	})
	if err != nil {
		return nil, unavailable("list schedules", err)
	}
	out := make([]*core.Schedule, 0, len(defs.Val()))
	for name, def := range defs.Val() {
		sc, err := decodeSchedule(name, def, curs.Val()[name])
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b *core.Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteSchedule implements core.Store: the definition and the cursors,
// the shards' too, so that a schedule made again under the name starts
// with none. Errors: ErrNotFound, ErrClosed, ErrUnavailable.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	if s.isClosed() {
		return core.ErrClosed
	}
	var del *redis.IntCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		del = p.HDel(ctx, s.keys.sched, name)
		p.HDel(ctx, s.keys.cursors, name)
		if !s.multiShard { // a Cluster: the shards' cursors too
			for n := range s.keys.shards {
				p.HDel(ctx, s.keys.shardCursors(n), name)
			}
		}
		return nil
	})
	if err != nil {
		return unavailable("delete schedule", err)
	}
	if del.Val() == 0 {
		return fmt.Errorf("redisstore: schedule %q: %w", name, core.ErrNotFound)
	}
	return nil
}

// FireSchedule implements core.Store with fire.lua in the shard of the
// slot's job. On a standalone server the script checks and moves the
// prefix's cursor and creates the job in one step. On a Cluster, where the
// cursor hash is in another slot, the prefix's cursor is read first, then
// the script checks and moves the cursor of the job's shard (every slot
// whose job is in that shard moves it, so a slot fired there is never
// fired again) and creates the job; then the prefix's cursor moves to the
// slot unless it is past it. So two instances racing on a Cluster may fire
// slots out of order, never one slot twice. Errors:
// ErrNotFound, ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) FireSchedule(ctx context.Context, params *core.FireScheduleParams) (bool, error) {
	if err := core.CheckFire(params); err != nil {
		return false, err
	}
	if s.isClosed() {
		return false, core.ErrClosed
	}
	slot := strconv.FormatInt(params.Slot.UnixMilli(), 10)
	cluster := !s.multiShard // scripts touch one slot
	j := params.Job
	if j == nil || cluster {
		// The script cannot see the schedule (a Cluster) or is not run.
		sc, err := s.GetSchedule(ctx, params.Name)
		if err != nil {
			return false, err
		}
		if !sc.Cursor.Before(params.Slot) {
			return false, nil
		}
	}
	if j == nil {
		// Slots passed over: the prefix's cursor alone moves (the
		// shards' guard the jobs of slots that fire).
		return false, s.moveCursor(ctx, params.Name, slot)
	}
	n := s.keys.shardOf(j.ID)
	cursors, sched := s.keys.cursors, s.keys.sched
	if cluster {
		cursors, sched = s.keys.shardCursors(n), ""
	}
	res, err := s.run(ctx, []call{s.shardCall(scriptFire, n, cursors, sched, params.Name, slot, s.inlineBody,
		j.ID, j.Topic, j.Key, string(j.Body), j.RunAt.UnixMilli(), j.TTR.Milliseconds(), j.MaxAttempts,
		j.TraceParent, encodeDelays(j.RetryDelays), encodePriority(j.Priority), j.URL)})[0].Slice()
	if err == nil && len(res) < 2 {
		err = errShortReply
	}
	if err != nil {
		return false, unavailable("fire schedule", err)
	}
	s.applyQueued(n, res[1])
	switch r, _ := res[0].(int64); r {
	case -2:
		return false, fmt.Errorf("redisstore: schedule %q: %w", params.Name, core.ErrNotFound)
	case -1:
		return false, nil
	default:
		if cluster {
			if err := s.moveCursor(ctx, params.Name, slot); err != nil {
				return false, err
			}
		}
		return r == 1, nil
	}
}

// moveCursor moves the prefix's cursor of a schedule to slot (ms) unless
// it is there or past it.
func (s *Store) moveCursor(ctx context.Context, name, slot string) error {
	if err := s.run(ctx, []call{{script: scriptCursor, keys: []string{s.keys.cursors}, args: []any{name, slot}}})[0].Err(); err != nil {
		return unavailable("fire schedule", err)
	}
	return nil
}

func decodeSchedule(name, def, cursor string) (*core.Schedule, error) {
	var sc core.Schedule
	if err := json.Unmarshal([]byte(def), &sc); err != nil {
		return nil, fmt.Errorf("redisstore: decode schedule %q: %w", name, err)
	}
	if ms, err := strconv.ParseInt(cursor, 10, 64); err == nil {
		sc.Cursor = time.UnixMilli(ms).UTC()
	}
	return &sc, nil
}
