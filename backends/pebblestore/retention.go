package pebblestore

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// Finished jobs leave the index; their state moves to x<id>, an f key
// orders them by finish time for the prune, and per-topic counters in time
// buckets (c keys) count them for the retention period without a scan.

// countKey is the key of the finished count of topic, state and bucket.
func countKey(topic string, state core.State, bucket int64) []byte {
	k := make([]byte, 0, 2+len(topic)+1+8)
	k = append(k, prefixCount)
	k = append(k, topic...)
	k = append(k, 0, stateCodes[state])
	return binary.BigEndian.AppendUint64(k, uint64(bucket))
}

// finishedIndex is where a finished state counts in a topic's buckets.
func finishedIndex(state core.State) int {
	if state == core.StateCancelled {
		return 1
	}
	return 0
}

// countFinished adds delta to tp's count of state in the bucket of at (a
// finish time) and writes the new count.
func (s *Store) countFinished(b *pebble.Batch, tp *topic, state core.State, at time.Time, delta int64) {
	bucket := at.UnixMilli() / s.bucket.Milliseconds()
	c := tp.finished[bucket]
	if c == nil {
		c = new([2]int64)
		tp.finished[bucket] = c
	}
	c[finishedIndex(state)] += delta
	_ = b.Set(countKey(tp.name, state, bucket), binary.AppendVarint(nil, c[finishedIndex(state)]), nil)
}

// forgetFinished deletes the finished job id, if the store keeps one, and
// takes it out of its topic's counts, for a put or an import that reuses
// its id: it counts once, in its new state. For a new id it costs one read,
// which a bloom filter answers.
func (s *Store) forgetFinished(b *pebble.Batch, id string) error {
	raw, err := s.get(idKey(prefixFinished, id))
	if err != nil || raw == nil {
		return err
	}
	_ = b.Delete(idKey(prefixFinished, id), nil)
	_ = b.Delete(idKey(prefixError, id), nil)
	m, err := decodeMeta(raw)
	if err != nil {
		return fmt.Errorf("pebblestore: job %q: %w", id, err)
	}
	at := time.Unix(0, m.updatedAt)
	if tp := s.topics[m.topic]; tp != nil && tp.finished[at.UnixMilli()/s.bucket.Milliseconds()] != nil {
		s.countFinished(b, tp, m.state, at, -1)
	}
	return nil
}

// oldestBucket is the first bucket that may hold a job finished within
// retention at now: a job stops being counted at most one bucket width
// after it expired.
func (s *Store) oldestBucket(now time.Time) int64 {
	return now.Add(-s.retention).UnixMilli() / s.bucket.Milliseconds()
}

// finishedCounts returns tp's done and cancelled jobs within retention.
func (s *Store) finishedCounts(tp *topic, now time.Time) (done, cancelled int64) {
	oldest := s.oldestBucket(now)
	for bucket, c := range tp.finished {
		if bucket >= oldest {
			done += c[0]
			cancelled += c[1]
		}
	}
	return done, cancelled
}

// housekeep runs until Close: it drops finished jobs past retention
// every minute, or every bucket width if shorter.
func (s *Store) housekeep() {
	defer s.background.Done()
	tick := s.clock.NewTicker(min(s.bucket, time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.Chan():
		}
		if err := s.prune(s.now()); err != nil {
			s.log.Warn("pebblestore: prune of finished jobs failed", "err", err)
		}
	}
}

// pruneChunk bounds the finished jobs one hold of the lock deletes.
const pruneChunk = 1000

// prune deletes the finished jobs whose retention ended by now, and the
// count buckets that count none within retention.
func (s *Store) prune(now time.Time) error {
	upper := expiryKey(now.Add(-s.retention), "")
	for {
		n, err := s.pruneSome(upper)
		if err != nil || n < pruneChunk {
			s.pruneCounts(now)
			return err
		}
	}
}

// pruneSome deletes up to pruneChunk expired finished jobs, under s.mu so
// that a put of the same id cannot slip between the check and the delete.
func (s *Store) pruneSome(upper []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: upper})
	if err != nil {
		return 0, wrap(err)
	}
	b := s.db.NewBatch()
	n := 0
	for ok := it.First(); ok && n < pruneChunk; ok = it.Next() {
		k := it.Key()
		finished := int64(binary.BigEndian.Uint64(k[1:9]))
		id := string(k[9:])
		_ = b.Delete(slices.Clone(k), nil)
		n++
		raw, err := s.get(idKey(prefixFinished, id))
		if err != nil {
			_ = it.Close()
			_ = b.Close()
			return 0, err
		}
		if raw == nil {
			continue // put again since, and maybe unfinished
		}
		if m, err := decodeMeta(raw); err == nil && time.Unix(0, m.updatedAt).UnixMilli() != finished {
			continue // finished again since: its own f key prunes it
		}
		_ = b.Delete(idKey(prefixFinished, id), nil)
		_ = b.Delete(idKey(prefixRecord, id), nil)
		_ = b.Delete(idKey(prefixError, id), nil)
	}
	if err := it.Close(); err != nil {
		_ = b.Close()
		return 0, wrap(err)
	}
	// Losing the deletes only delays them to the next prune.
	return n, s.write(b, pebble.NoSync)()
}

// pruneCounts forgets the count buckets older than retention.
func (s *Store) pruneCounts(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	oldest := s.oldestBucket(now)
	b := s.db.NewBatch()
	for _, tp := range s.topicList {
		for bucket := range tp.finished {
			if bucket < oldest {
				delete(tp.finished, bucket)
				_ = b.Delete(countKey(tp.name, core.StateDone, bucket), nil)
				_ = b.Delete(countKey(tp.name, core.StateCancelled, bucket), nil)
			}
		}
	}
	if err := s.write(b, pebble.NoSync)(); err != nil {
		s.log.Warn("pebblestore: prune of finished counts failed", "err", err)
	}
}

func sortTopics(ts []*core.Topic) {
	slices.SortFunc(ts, func(a, b *core.Topic) int { return strings.Compare(a.Name, b.Name) })
}
