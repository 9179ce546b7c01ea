package pebblestore

import (
	"context"
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// ExportJobs implements core.JobExporter: it walks the state of the
// unfinished jobs (m keys) on a point-in-time iterator, so that it holds no
// lock while fn runs, and reads each job's other parts as it goes. A job
// that finished or was put again meanwhile is exported as the iterator saw
// it (import skips ids it has). Errors: fn's, ctx's, ErrClosed,
// ErrUnavailable.
func (s *Store) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if s.isClosed() {
		return core.ErrClosed
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixMeta}, UpperBound: []byte{prefixMeta + 1}})
	if err != nil {
		return wrap(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := string(it.Key()[1:])
		v, err := it.ValueAndErr()
		if err != nil {
			return wrap(err)
		}
		m, err := decodeMeta(v)
		if err != nil {
			return err
		}
		j, err := complete(snap, id, &m, true, true)
		if err != nil {
			return err
		}
		j.AsOf(s.now())
		if err := fn(j); err != nil {
			return err
		}
	}
	return wrap(it.Error())
}

// ImportJobs implements core.JobImporter: jobs whose id the store knows
// (unfinished, or finished within retention) are skipped, the others
// stored as they were (core.Job.Import), in one batch synced before it
// returns. Errors: ErrClosed, ErrStorageFull while the disk is full,
// ErrUnavailable.
func (s *Store) ImportJobs(_ context.Context, jobs []*core.Job) ([]bool, error) {
	s.ops.RLock()
	defer s.ops.RUnlock()
	if err := s.reserve.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, core.ErrClosed
	}
	now := s.now()
	imported := make([]bool, len(jobs))
	touched := make(map[*topic]struct{})
	b := s.db.NewBatch()
	for k, in := range jobs {
		if s.x.lookup(in.ID) != 0 {
			continue
		}
		if _, err := s.read(in.ID, true); err == nil {
			continue
		} else if !isNotFound(err) {
			_ = b.Close()
			s.mu.Unlock()
			return nil, err
		}
		if err := s.forgetFinished(b, in.ID); err != nil {
			_ = b.Close()
			s.mu.Unlock()
			return nil, err
		}
		j := in.Clone()
		j.Import(now)
		r, err := recordOf(j)
		if err != nil {
			_ = b.Close()
			s.mu.Unlock()
			return nil, err
		}
		imported[k] = true
		tp := s.topicFor(j.Topic)
		i := s.x.add(j.ID)
		sl := &s.x.slots[i]
		sl.setFixed(tp, j.MaxAttempts, j.TTR, j.Priority)
		sl.set(hasKey, j.Key != "")
		sl.set(hasThen, j.Then != nil)
		sl.set(thenUnknown, false)
		s.x.setRetention(i, j.Retention)
		s.setLite(i, j)
		if j.State == core.StateDead {
			tp.dead++
			_ = b.Set(deadKey(tp.name, j.UpdatedAt, j.ID), nil, nil)
		} else {
			s.enqueue(tp, i)
		}
		touched[tp] = struct{}{}
		writeJob(b, j, &r)
		if j.LastError != "" {
			s.setError(b, i, j.ID, j.LastError)
		}
		if h := ended(j); len(h) > 0 {
			_ = b.Set(idKey(prefixHistory, j.ID), encodeHistory(h), nil)
			sl.set(hasHistory, true)
		}
	}
	wait := s.write(b, pebble.Sync)
	for tp := range touched {
		s.changed(tp)
	}
	s.mu.Unlock()
	if err := wait(); err != nil {
		return nil, err
	}
	return imported, nil
}

func isNotFound(err error) bool { return errors.Is(err, core.ErrNotFound) }
