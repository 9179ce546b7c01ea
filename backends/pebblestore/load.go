package pebblestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// load rebuilds the index from the disk at Open: paused topics, the
// state of every unfinished job (m keys, small values, no bodies), and the
// finished counts. A lease that expired while the store was closed is
// ended as it would have been (core.Job.AsOf), and written so.
func (s *Store) load() error {
	now := s.now()
	err := s.scan(prefixPaused, func(k, _ []byte) error {
		s.topicFor(string(k[1:])).paused = true
		return nil
	})
	if err != nil {
		return err
	}
	// Count first, keys only, to size the index once: growing slices and
	// a map of ten million entries copied them over and over, most of the
	// start's time.
	// A clean Close left the figures; after a crash they are counted.
	n, idBytes, err := s.sizeHint()
	if err != nil {
		return err
	}
	s.x.reserve(n, idBytes)
	b := s.db.NewBatch()
	err = s.scan(prefixMeta, func(k, v []byte) error {
		// The id aliases the key, valid during this call: the index copies
		// it. Ten million jobs start without ten million allocations.
		id := unsafe.String(&k[1], len(k)-1)
		m, topic, err := decodeMetaBytes(v)
		if err != nil {
			return fmt.Errorf("pebblestore: job %q: %w", strings.Clone(id), err)
		}
		if m.state == core.StateScheduled || m.state == core.StateReady {
			// As they were: a scheduled job whose run_at passed stays
			// scheduled until a promotion, as if the store had not stopped.
			tp := s.topics[string(topic)]
			if tp == nil {
				tp = s.topicFor(string(topic))
			}
			i := s.x.add(id)
			sl := &s.x.slots[i]
			sl.setFixed(tp, m.maxAttempts, m.ttr, m.priority)
			s.x.setRetention(i, m.retention)
			sl.runAt, sl.attempt, sl.state = m.runAt, uint16(m.attempt), stateCodes[m.state]
			sl.flags = hasErr | hasHistory | hasKey | thenUnknown // not known without reading e, h and j: claims and finishes read them
			if m.state == core.StateScheduled {
				tp.scheduled.load(s.x, i, m.runAt)
			} else {
				tp.ready.load(s.x, i, m.runAt)
			}
			return nil
		}
		id = strings.Clone(id)
		m.topic = string(topic)
		j := core.Job{
			Topic: m.topic, State: m.state, RunAt: time.UnixMilli(m.runAt).UTC(), TTR: m.ttr,
			MaxAttempts: m.maxAttempts, Attempt: m.attempt, UpdatedAt: time.Unix(0, m.updatedAt).UTC(),
			Priority: m.priority,
		}
		if m.state == core.StateReserved {
			j.Lease, j.LeaseExpiresAt = m.lease.String(), time.UnixMilli(m.leaseExp).UTC()
			j.History = []core.Attempt{m.attemptInProgress()}
		}
		before := j.State
		j.AsOf(now)
		tp := s.topicFor(j.Topic)
		i := s.x.add(id)
		sl := &s.x.slots[i]
		sl.setFixed(tp, j.MaxAttempts, j.TTR, j.Priority)
		s.x.setRetention(i, m.retention)
		sl.flags = hasErr | hasHistory | hasKey | thenUnknown // not known without reading e, h and j: claims and finishes read them
		s.setLite(i, &j)
		switch j.State {
		case core.StateReserved:
			tp.reserved.push(s.x, i, m.leaseExp)
		case core.StateDead:
			tp.dead++
		default:
			// Scheduled jobs whose run_at passed stay scheduled until a
			// promotion, as if the store had not stopped.
			if j.State == core.StateReady && before == core.StateScheduled {
				sl.state = stateCodes[core.StateScheduled]
			}
			s.enqueue(tp, i)
		}
		if before == core.StateReserved && j.State != core.StateReserved {
			m := s.metaOfSlot(i, j.UpdatedAt)
			_ = b.Set(idKey(prefixMeta, id), m.encode(), nil)
			_ = b.Set(idKey(prefixError, id), []byte(core.LeaseExpired), nil)
			s.keepAttempt(b, i, id, &j)
			if j.State == core.StateDead {
				_ = b.Set(deadKey(tp.name, j.UpdatedAt, id), nil, nil)
			}
		}
		return nil
	})
	if err != nil {
		_ = b.Close()
		return err
	}
	for _, tp := range s.topicList {
		tp.scheduled.init(s.x)
		tp.ready.init(s.x)
	}
	if err := s.write(b, pebble.Sync)(); err != nil {
		return err
	}
	if err := s.indexKeys(); err != nil {
		return err
	}
	if err := s.indexFinished(); err != nil {
		return err
	}
	return s.scan(prefixCount, func(k, v []byte) error {
		rest := k[1:]
		sep := bytes.IndexByte(rest, 0)
		if sep < 0 || len(rest) != sep+2+8 || rest[sep+1] == 0 || int(rest[sep+1]) >= len(codeStates) {
			return fmt.Errorf("pebblestore: count key %q: %w", k, errCorrupt)
		}
		tp := s.topicFor(string(rest[:sep]))
		bucket := int64(binary.BigEndian.Uint64(rest[sep+2:]))
		n, read := binary.Varint(v)
		if read <= 0 {
			return fmt.Errorf("pebblestore: count key %q: %w", k, errCorrupt)
		}
		c := tp.finished[bucket]
		if c == nil {
			c = new([2]int64)
			tp.finished[bucket] = c
		}
		c[finishedIndex(codeStates[rest[sep+1]])] = n
		return nil
	})
}

// indexKeys writes the k keys of the jobs a database holds from before
// the index of business keys, once: its first Open by a version with the
// index reads every job's record and state, then marks the database
// (keysIndexedKey), which a new database gets at once.
func (s *Store) indexKeys() error {
	return s.indexOnce(keysIndexedKey, "the business keys of jobs", prefixRecord, func(b *pebble.Batch, k, v []byte) (bool, error) {
		r, err := decodeRecord(v)
		if err != nil {
			return false, fmt.Errorf("pebblestore: job %q: %w", k[1:], err)
		}
		if r.key == "" {
			return false, nil
		}
		id := string(k[1:])
		raw, err := s.get(idKey(prefixMeta, id))
		if err == nil && raw == nil {
			raw, err = s.get(idKey(prefixFinished, id))
		}
		if err != nil || raw == nil {
			return false, err
		}
		m, err := decodeMeta(raw)
		if err != nil {
			return false, fmt.Errorf("pebblestore: job %q: %w", id, err)
		}
		_ = b.Set(keyIndexKey(m.topic, r.key, id), nil, nil)
		return true, nil
	})
}

// indexOnce builds an index that an earlier version did not write, once:
// unless the database has the marker key, it calls add for every key of
// prefix (add writes the entry into the batch and says whether it did),
// writing in batches of about 4 MiB, and then sets the marker. what names
// the entries in the log line.
func (s *Store) indexOnce(marker, what string, prefix byte, add func(b *pebble.Batch, k, v []byte) (bool, error)) error {
	if done, err := s.get([]byte(marker)); err != nil || done != nil {
		return err
	}
	b := s.db.NewBatch()
	n := 0
	err := s.scan(prefix, func(k, v []byte) error {
		added, err := add(b, k, v)
		if err != nil || !added {
			return err
		}
		n++
		if b.Len() >= 4<<20 {
			if err := s.write(b, pebble.NoSync)(); err != nil {
				return err
			}
			b = s.db.NewBatch()
		}
		return nil
	})
	if err != nil {
		_ = b.Close()
		return err
	}
	_ = b.Set([]byte(marker), nil, nil)
	if n > 0 {
		s.log.Info("pebblestore: indexed "+what+" stored by an earlier version", "jobs", n)
	}
	return s.write(b, pebble.Sync)()
}

// sizeHint returns the unfinished jobs and their id bytes as the last
// Close wrote them, or counts them (keys only) when it did not; the key is
// deleted so that a crash after this start cannot leave it stale.
func (s *Store) sizeHint() (n, idBytes int, err error) {
	raw, err := s.get([]byte(sizeKey))
	if err != nil {
		return 0, 0, err
	}
	if raw != nil {
		a, r1 := binary.Uvarint(raw)
		b, r2 := binary.Uvarint(raw[max(r1, 0):])
		if r1 > 0 && r2 > 0 {
			return int(a), int(b), wrap(s.db.Delete([]byte(sizeKey), pebble.NoSync))
		}
	}
	err = s.scanKeys(prefixMeta, func(k []byte) { n, idBytes = n+1, idBytes+len(k)-1 })
	return n, idBytes, err
}

// scanKeys calls fn with every key of prefix, valid during the call only,
// without reading values.
func (s *Store) scanKeys(prefix byte, fn func(k []byte)) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return wrap(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		fn(it.Key())
	}
	return wrap(it.Close())
}

// scan calls fn with every key of prefix and its value, valid during the
// call only.
func (s *Store) scan(prefix byte, fn func(k, v []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return wrap(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return wrap(err)
		}
		if err := fn(it.Key(), v); err != nil {
			_ = it.Close()
			return err
		}
	}
	return wrap(it.Close())
}
