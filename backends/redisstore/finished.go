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

// The record of finished jobs is a stream per shard, finlog, to which the
// scripts that finish jobs append an entry of the finishes of each run
// (lib.lua's log_finish and flush_finished). A cursor holds a position in
// each shard's stream, comma-separated: the stream id of the last entry
// read, and ".<k>" after it when only its first k records were.

var errBadEntry = errors.New("malformed entry")

// finishedStates are the states of a record's first letter; 'D' is done
// with a next step (core.FinishedJob.Then).
var finishedStates = map[byte]core.State{'d': core.StateDone, 'D': core.StateDone, 'c': core.StateCancelled, 'x': core.StateDead}

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

// finishedPos is a position in a shard's stream: entries up to id read,
// but for the records of id after its first part, when part > 0.
type finishedPos struct {
	id   streamID
	part int
}

func (p finishedPos) String() string {
	if p.part == 0 {
		return p.id.String()
	}
	return p.id.String() + "." + strconv.Itoa(p.part)
}

// parseFinishedCursor decodes a cursor of ListFinished: a position per
// shard, all at the start for empty.
func (s *Store) parseFinishedCursor(after string) ([]finishedPos, error) {
	pos := make([]finishedPos, s.cfg.Shards)
	if after == "" {
		return pos, nil
	}
	bad := core.Invalid("after", "after is not a cursor of the finished jobs of %d shards", len(pos))
	parts := strings.Split(after, ",")
	if len(parts) != len(pos) {
		return nil, bad
	}
	for n, p := range parts {
		id, part, hasPart := strings.Cut(p, ".")
		var ok bool
		if pos[n].id, ok = parseStreamID(id); !ok {
			return nil, bad
		}
		if hasPart {
			k, err := strconv.Atoi(part)
			if err != nil || k < 1 {
				return nil, bad
			}
			pos[n].part = k
		}
	}
	return pos, nil
}

func finishedCursor(pos []finishedPos) string {
	parts := make([]string, len(pos))
	for n, p := range pos {
		parts[n] = p.String()
	}
	return strings.Join(parts, ",")
}

// ListFinished implements core.Store: it reads up to params.Limit entries
// of every shard's stream from the cursor's position in it (or from the
// retention's start, the oldest entry that counts), in one pipeline, and
// takes the earliest params.Limit of their records by stream id, so that
// shards interleave by the time recorded. Errors: ErrInvalidArgument,
// ErrClosed, ErrUnavailable.
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
		var start string
		switch {
		case p.id.compare(kept) < 0:
			start = kept.String()
		case p.part > 0:
			start = p.id.String()
		default:
			start = "(" + p.id.String()
		}
		reads[n] = pipe.XRangeN(ctx, s.keys.finishLog(n), start, "+", int64(params.Limit))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return core.FinishedPage{}, unavailable("list finished", err)
	}
	type record struct {
		shard, part int
		last        bool // the entry's last record
		id          streamID
		job         core.FinishedJob
	}
	var all []record
	for n, r := range reads {
		for _, m := range r.Val() {
			id, ok := parseStreamID(m.ID)
			v, _ := m.Values["r"].(string)
			jobs, err := decodeFinished(v)
			if !ok || err != nil {
				return core.FinishedPage{}, fmt.Errorf("redisstore: list finished: entry %s of shard %d: %w", m.ID, n, errBadEntry)
			}
			from := 0
			if id == pos[n].id {
				from = pos[n].part // read before
			}
			for k := from; k < len(jobs); k++ {
				all = append(all, record{shard: n, part: k + 1, last: k == len(jobs)-1, id: id, job: jobs[k]})
			}
		}
	}
	slices.SortFunc(all, func(a, b record) int {
		return cmp.Or(a.id.compare(b.id), cmp.Compare(a.shard, b.shard), cmp.Compare(a.part, b.part))
	})
	page := core.FinishedPage{Jobs: []core.FinishedJob{}, Next: params.After}
	for _, r := range all[:min(len(all), params.Limit)] {
		page.Jobs = append(page.Jobs, r.job)
		pos[r.shard] = finishedPos{id: r.id, part: r.part}
		if r.last {
			pos[r.shard].part = 0
		}
	}
	if len(page.Jobs) > 0 {
		page.Next = finishedCursor(pos)
	}
	return page, nil
}

// decodeFinished decodes the records of a finlog entry (lib.lua's
// log_finish).
func decodeFinished(v string) ([]core.FinishedJob, error) {
	var out []core.FinishedJob
	for v != "" {
		state, ok := finishedStates[v[0]]
		if !ok {
			return nil, errBadEntry
		}
		attempt, rest, ok1 := strings.Cut(v[1:], ",")
		at, rest, ok2 := strings.Cut(rest, ",")
		a, err1 := strconv.Atoi(attempt)
		u, err2 := strconv.ParseInt(at, 10, 64)
		if !ok1 || !ok2 || err1 != nil || err2 != nil {
			return nil, errBadEntry
		}
		var f [4]string // id, topic, key, last error
		for i := range f {
			n, tail, ok := strings.Cut(rest, ":")
			size, err := strconv.Atoi(n)
			if !ok || err != nil || size < 0 || size > len(tail) {
				return nil, errBadEntry
			}
			f[i], rest = tail[:size], tail[size:]
		}
		out = append(out, core.FinishedJob{
			ID: f[0], Topic: f[1], Key: f[2], State: state, Attempt: a, LastError: f[3], FinishedAt: msTime(u),
			Then: v[0] == 'D',
		})
		v = rest
	}
	if len(out) == 0 {
		return nil, errBadEntry
	}
	return out, nil
}
