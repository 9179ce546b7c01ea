package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/core"
)

// The record of finished jobs is a stream per shard, finlog, which the
// scripts that finish jobs append to (lib.lua's log_finish). A cursor
// holds a position in each shard's stream: the stream ids of the last
// entries read, one per shard, comma-separated.

var errBadEntry = errors.New("malformed entry")

// finishedStates are the states of finlog's s field.
var finishedStates = map[string]core.State{"d": core.StateDone, "c": core.StateCancelled, "x": core.StateDead}

// streamID is a stream entry id: ms, then a sequence within it.
type streamID struct{ ms, seq uint64 }

func parseStreamID(s string) (streamID, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return streamID{}, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return streamID{ms, seq}, err1 == nil && err2 == nil
}

func (id streamID) String() string { return fmt.Sprintf("%d-%d", id.ms, id.seq) }

func (id streamID) compare(o streamID) int {
	return cmp.Or(cmp.Compare(id.ms, o.ms), cmp.Compare(id.seq, o.seq))
}

// parseFinishedCursor decodes a cursor of ListFinished: a position per
// shard, all 0-0 for empty.
func (s *Store) parseFinishedCursor(after string) ([]streamID, error) {
	pos := make([]streamID, s.cfg.Shards)
	if after == "" {
		return pos, nil
	}
	parts := strings.Split(after, ",")
	if len(parts) != len(pos) {
		return nil, core.Invalid("after", "after is not a cursor of the finished jobs of %d shards", len(pos))
	}
	for n, p := range parts {
		id, ok := parseStreamID(p)
		if !ok {
			return nil, core.Invalid("after", "after is not a cursor of the finished jobs")
		}
		pos[n] = id
	}
	return pos, nil
}

func finishedCursor(pos []streamID) string {
	parts := make([]string, len(pos))
	for n, id := range pos {
		parts[n] = id.String()
	}
	return strings.Join(parts, ",")
}

// ListFinished implements core.Store: it reads up to params.Limit entries
// of every shard's stream after the cursor's position in it (or from the
// retention's start, the oldest entry that counts), in one pipeline, and
// takes the earliest params.Limit of them by stream id, so that shards
// interleave by the time recorded. Errors: ErrInvalidArgument, ErrClosed,
// ErrUnavailable.
func (s *Store) ListFinished(ctx context.Context, params *core.ListFinishedParams) (core.FinishedPage, error) {
	if err := core.CheckListFinished(params); err != nil {
		return core.FinishedPage{}, err
	}
	pos, err := s.parseFinishedCursor(params.After)
	if err != nil {
		return core.FinishedPage{}, err
	}
	if s.isClosed() {
		return core.FinishedPage{}, core.ErrClosed
	}
	// Entries recorded the retention period ago are gone or left for the
	// next XADD's trim: read from after them.
	kept := streamID{ms: uint64(max(s.serverNow()-s.cfg.Retention.Milliseconds(), 0))}
	pipe := s.rdb.Pipeline()
	reads := make([]*redis.XMessageSliceCmd, len(pos))
	for n, p := range pos {
		start := "(" + p.String()
		if p.compare(kept) < 0 {
			start = kept.String()
		}
		reads[n] = pipe.XRangeN(ctx, s.keys.finishLog(n), start, "+", int64(params.Limit))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return core.FinishedPage{}, unavailable("list finished", err)
	}
	type entry struct {
		shard int
		id    streamID
		msg   redis.XMessage
	}
	var all []entry
	for n, r := range reads {
		for _, m := range r.Val() {
			id, ok := parseStreamID(m.ID)
			if !ok {
				return core.FinishedPage{}, fmt.Errorf("redisstore: list finished: entry id %q", m.ID)
			}
			all = append(all, entry{n, id, m})
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Or(a.id.compare(b.id), cmp.Compare(a.shard, b.shard)) })
	page := core.FinishedPage{Jobs: []core.FinishedJob{}, Next: params.After}
	for _, e := range all[:min(len(all), params.Limit)] {
		f, err := decodeFinished(e.msg.Values)
		if err != nil {
			return core.FinishedPage{}, fmt.Errorf("redisstore: list finished: entry %s of shard %d: %w", e.msg.ID, e.shard, err)
		}
		page.Jobs = append(page.Jobs, f)
		pos[e.shard] = e.id
	}
	if len(page.Jobs) > 0 {
		page.Next = finishedCursor(pos)
	}
	return page, nil
}

// decodeFinished decodes the fields of a finlog entry.
func decodeFinished(v map[string]any) (core.FinishedJob, error) {
	str := func(k string) string { s, _ := v[k].(string); return s }
	state, ok := finishedStates[str("s")]
	attempt, err1 := strconv.Atoi(str("a"))
	at, err2 := strconv.ParseInt(str("u"), 10, 64)
	if !ok || err1 != nil || err2 != nil || str("i") == "" {
		return core.FinishedJob{}, errBadEntry
	}
	return core.FinishedJob{
		ID: str("i"), Topic: str("t"), Key: str("k"), State: state,
		Attempt: attempt, LastError: str("e"), FinishedAt: msTime(at),
	}, nil
}
