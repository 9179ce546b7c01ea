package pebblestore

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// The record of finished jobs (ListFinished): an l key per entry, numbered
// from 1 in the order recorded, which is the order of the writes (they are
// applied under s.mu). A cursor is the number of the last entry read. An
// entry is written in the batch of the finish it records, and dropped by
// the prune once it was recorded the retention period ago.

// prefixFinishLog leads the l keys: l<number, 8 bytes>.
const prefixFinishLog = 'l'

// finishLogVersion leads an l value: recorded (ms), finished (ns), state,
// attempt, then id, topic, key and last error. finishLogVersionThen leads
// the same for a done job with a next step (core.FinishedJob.Then).
const (
	finishLogVersion     = 1
	finishLogVersionThen = 2
)

func finishLogKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixFinishLog}, seq)
}

func encodeFinished(f *core.FinishedJob, recorded time.Time) []byte {
	b := []byte{finishLogVersion}
	if f.Then {
		b[0] = finishLogVersionThen
	}
	b = binary.AppendVarint(b, recorded.UnixMilli())
	b = binary.AppendVarint(b, f.FinishedAt.UnixNano())
	b = append(b, stateCodes[f.State])
	b = binary.AppendUvarint(b, uint64(f.Attempt))
	for _, s := range []string{f.ID, f.Topic, f.Key, f.LastError} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// decodeFinished decodes an l value: the entry and when it was recorded.
func decodeFinished(v []byte) (core.FinishedJob, time.Time, error) {
	if len(v) == 0 || v[0] != finishLogVersion && v[0] != finishLogVersionThen {
		return core.FinishedJob{}, time.Time{}, fmt.Errorf("%w: finished entry version", errCorrupt)
	}
	d := decoder{b: v[1:]}
	recorded := time.UnixMilli(d.varint()).UTC()
	f := core.FinishedJob{FinishedAt: time.Unix(0, d.varint()).UTC(), Then: v[0] == finishLogVersionThen}
	if st := d.take(1); len(st) == 1 && int(st[0]) < len(codeStates) {
		f.State = codeStates[st[0]]
	}
	f.Attempt = int(d.small())
	f.ID, f.Topic, f.Key, f.LastError = string(d.bytes()), string(d.bytes()), string(d.bytes()), string(d.bytes())
	if d.err == nil && !f.State.Finished() && f.State != core.StateDead {
		d.fail()
	}
	return f, recorded, d.err
}

// loadFinishLog finds the number of the last entry of the record, at Open.
func (s *Store) loadFinishLog() error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixFinishLog},
		UpperBound: []byte{prefixFinishLog + 1},
	})
	if err != nil {
		return wrap(err)
	}
	if it.Last() {
		if k := it.Key(); len(k) == 9 {
			s.finishSeq = binary.BigEndian.Uint64(k[1:])
		}
	}
	return wrap(it.Close())
}

// logFinish adds to b the entry of slot i (id), whose job j has just
// finished. The index lacks a job's key and last error: those come from j
// when set, else from disk when the slot has them (a job with a key pays
// a read of its record; with an earlier error, of its e key). Whether a
// done job has a next step is the slot's flag, read from the record only
// for a job loaded at Open.
func (s *Store) logFinish(b *pebble.Batch, i uint32, id string, j *core.Job, now time.Time) {
	f := core.FinishedOf(j)
	f.ID = id
	sl := &s.x.slots[i]
	if f.LastError == "" && sl.has(hasErr) {
		if e, err := s.get(idKey(prefixError, id)); err == nil {
			f.LastError = string(e)
		} else {
			s.log.Warn("pebblestore: read of a finished job's last error failed", "id", id, "err", err)
		}
	}
	f.Then = f.State == core.StateDone && (j.Then != nil || sl.has(hasThen))
	needThen := f.State == core.StateDone && !f.Then && sl.has(thenUnknown)
	if f.Key == "" && sl.has(hasKey) || needThen {
		raw, err := s.get(idKey(prefixRecord, id))
		var r record
		if err == nil && raw != nil {
			r, err = decodeRecord(raw)
		}
		if err == nil {
			f.Key, f.Then = cmp.Or(f.Key, r.key), f.Then || needThen && r.then != nil
		} else {
			s.log.Warn("pebblestore: read of a finished job's record failed", "id", id, "err", err)
		}
	}
	s.finishSeq++
	_ = b.Set(finishLogKey(s.finishSeq), encodeFinished(&f, now), nil)
}

// pruneFinishLog deletes the entries recorded the retention period before
// now, from the oldest on: entries are recorded in time order, but for a
// clock that stepped back, which only keeps a few a little longer.
func (s *Store) pruneFinishLog(now time.Time) error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixFinishLog},
		UpperBound: []byte{prefixFinishLog + 1},
	})
	if err != nil {
		return wrap(err)
	}
	var last uint64 // the number of the last entry to prune, 0 for none
	for ok := it.First(); ok; ok = it.Next() {
		_, recorded, err := decodeFinished(it.Value())
		if err == nil && now.Sub(recorded) < s.retention {
			break
		}
		last = binary.BigEndian.Uint64(it.Key()[1:])
	}
	if err := it.Close(); err != nil || last == 0 {
		return wrap(err)
	}
	return wrap(s.db.DeleteRange([]byte{prefixFinishLog}, finishLogKey(last+1), pebble.NoSync))
}

// ListFinished implements core.Store: the l keys after the cursor, those
// recorded within the retention period. Errors: ErrInvalidArgument,
// ErrClosed, ErrUnavailable.
func (s *Store) ListFinished(_ context.Context, params *core.ListFinishedParams) (core.FinishedPage, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if err := core.CheckListFinished(params); err != nil {
		return core.FinishedPage{}, err
	}
	after, err := core.ParseFinishedSeq(params.After)
	if err != nil {
		return core.FinishedPage{}, err
	}
	if s.isClosed() {
		return core.FinishedPage{}, core.ErrClosed
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: finishLogKey(after + 1),
		UpperBound: []byte{prefixFinishLog + 1},
	})
	if err != nil {
		return core.FinishedPage{}, wrap(err)
	}
	now := s.now()
	page := core.FinishedPage{Jobs: []core.FinishedJob{}, Next: params.After}
	for ok := it.First(); ok && len(page.Jobs) < params.Limit; ok = it.Next() {
		f, recorded, err := decodeFinished(it.Value())
		if err != nil {
			_ = it.Close()
			return core.FinishedPage{}, fmt.Errorf("pebblestore: finished entry %x: %w", it.Key(), err)
		}
		page.Next = core.FinishedSeqCursor(binary.BigEndian.Uint64(it.Key()[1:]))
		if now.Sub(recorded) < s.retention {
			page.Jobs = append(page.Jobs, f)
		}
	}
	return page, wrap(it.Close())
}
