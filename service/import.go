package service

import (
	"context"

	"github.com/delayq/delayq/core"
)

// Bounds of an import, whichever transport brings it.
const (
	// ImportBatchJobs is the most jobs given to one core.Engine.Import
	// call.
	ImportBatchJobs = 1000
	// ImportMaxErrors is the most item errors an import's answer lists;
	// the others are only counted.
	ImportMaxErrors = 1000
)

// ImportError is an item of an import that failed, by its 1-based index
// in what the transport read (an HTTP line, an item of a gRPC stream).
type ImportError struct {
	Index int64
	Err   error
}

// ImportRun is one import as the transport reads it, item by item: it
// checks each job and schedule for the caller (CheckImport,
// ImportSchedule), gives the jobs to the engine in batches, and counts
// what was imported, skipped (its id or name was in use) and failed, with
// the errors of the first ImportMaxErrors that failed. An item fails
// alone; a store failure fails the run, and since an import is idempotent
// by id and name the whole of it may be sent again. Not safe for
// concurrent use.
type ImportRun struct {
	// Imported, Skipped and Failed count the items so far.
	Imported, Skipped, Failed int64
	// Errors are the first ImportMaxErrors item errors, schedules' and
	// decoding's in the order of Fail, the engine's as each batch returns.
	Errors []ImportError

	s        *Service
	ctx      context.Context
	maxBytes int
	jobs     []*core.Job
	at       []int64
	bytes    int
}

// StartImport starts an import for the caller of ctx whose batches hold at
// most ImportBatchJobs jobs and maxBytes bytes of what the transport read.
// It asks the engine first, with no jobs, so that a backend without the
// capability refuses whatever the import holds. Errors: errors.ErrUnsupported.
func (s *Service) StartImport(ctx context.Context, maxBytes int) (*ImportRun, error) {
	if _, err := s.Import(ctx, nil); err != nil {
		return nil, err
	}
	return &ImportRun{s: s, ctx: ctx, maxBytes: maxBytes, Errors: []ImportError{}}, nil
}

// Fail counts item index as failed with err (decoding it failed, say).
func (im *ImportRun) Fail(index int64, err error) {
	im.Failed++
	if len(im.Errors) < ImportMaxErrors {
		im.Errors = append(im.Errors, ImportError{Index: index, Err: err})
	}
}

// Schedule imports the schedule of item index, or counts err, its
// decoding's, as its failure. Errors: the store's (the run fails).
func (im *ImportRun) Schedule(index int64, sc *core.Schedule, err error) error {
	imported := false
	if err == nil {
		imported, err = im.s.ImportSchedule(im.ctx, sc)
	}
	switch {
	case err != nil && !ItemFailed(err):
		return err
	case err != nil:
		im.Fail(index, err)
	case imported:
		im.Imported++
	default:
		im.Skipped++
	}
	return nil
}

// Job adds the job of item index, size bytes as read, to the batch, once
// checked, or counts err, its decoding's, as its failure; a full batch
// goes to the engine. Errors: the store's (the run fails).
func (im *ImportRun) Job(index int64, j *core.Job, size int, err error) error {
	if err == nil {
		err = im.s.CheckImport(im.ctx, j)
	}
	if err != nil {
		im.Fail(index, err)
		return nil
	}
	im.jobs, im.at = append(im.jobs, j), append(im.at, index)
	im.bytes += size
	if len(im.jobs) >= ImportBatchJobs || im.bytes >= im.maxBytes {
		return im.Flush()
	}
	return nil
}

// Flush gives the batch's jobs to the engine and counts their results.
// Errors: the store's (the run fails).
func (im *ImportRun) Flush() error {
	if len(im.jobs) == 0 {
		return nil
	}
	results, err := im.s.Import(im.ctx, im.jobs)
	if err != nil {
		return err
	}
	for k, res := range results {
		switch {
		case res.Err != nil:
			im.Fail(im.at[k], res.Err)
		case res.Imported:
			im.Imported++
		default:
			im.Skipped++
		}
	}
	clear(im.jobs)
	im.jobs, im.at, im.bytes = im.jobs[:0], im.at[:0], 0
	return nil
}
