package memstore

import (
	"context"
	"slices"

	"github.com/delayq/delayq/core"
)

var (
	_ core.JobExporter = (*Store)(nil)
	_ core.JobImporter = (*Store)(nil)
)

// exportChunk is how many jobs ExportJobs copies under one hold of the lock:
// fn runs without the lock, so it may call the store, and an export of many
// jobs never holds up the other calls for long.
const exportChunk = 256

// ExportJobs implements core.JobExporter. It takes the ids of the unfinished
// jobs at the start, then copies them a chunk at a time in their current
// state, so a job that finished meanwhile is left out and a job put
// meanwhile is not seen. fn runs without the store's lock. Errors: fn's
// error, ctx's error, ErrClosed.
func (s *Store) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return core.ErrClosed
	}
	s.prune(s.now())
	ids := make([]string, 0, len(s.jobs))
	for id, e := range s.jobs {
		if !e.job.State.Finished() {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	slices.Sort(ids) // generated ids sort by creation time: a stable, readable order

	for len(ids) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(ids), exportChunk)
		jobs, err := s.exportChunk(ids[:n])
		if err != nil {
			return err
		}
		ids = ids[n:]
		for _, j := range jobs {
			if err := fn(j); err != nil {
				return err
			}
		}
	}
	return nil
}

// exportChunk returns copies of the jobs of ids that are still unfinished,
// in their current state.
func (s *Store) exportChunk(ids []string) ([]*core.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	now := s.now()
	s.prune(now)
	touched := make(map[*topic]struct{})
	jobs := make([]*core.Job, 0, len(ids))
	for _, id := range ids {
		e, ok := s.jobs[id]
		if !ok {
			continue
		}
		if _, seen := touched[e.topic]; !seen {
			s.promote(e.topic, now)
			touched[e.topic] = struct{}{}
		}
		if !e.job.State.Finished() {
			jobs = append(jobs, e.job.Clone())
		}
	}
	for tp := range touched {
		s.changed(tp)
	}
	return jobs, nil
}

// ImportJobs implements core.JobImporter. Jobs are applied in order, so a
// later duplicate id in the same batch is skipped. An imported dead job
// counts as having died now: it goes last in its topic's dead list.
// Errors: ErrClosed.
func (s *Store) ImportJobs(_ context.Context, jobs []*core.Job) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.ErrClosed
	}
	now := s.now()
	s.prune(now)
	imported := make([]bool, len(jobs))
	touched := make(map[*topic]struct{})
	for i, j := range jobs {
		if _, ok := s.jobs[j.ID]; ok {
			continue
		}
		imported[i] = true
		job := j.Clone()
		job.Import(now)
		e := s.add(job)
		touched[e.topic] = struct{}{}
		if job.State == core.StateDead {
			s.kill(e)
		} else {
			s.enqueue(e, now)
		}
	}
	for tp := range touched {
		s.changed(tp)
	}
	return imported, nil
}
