package core

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Bounds of Engine.ListJobs and Engine.SearchJobs.
const (
	// ListLimitMax bounds one page of a listing.
	ListLimitMax = 1000
	// ListScanDefault is how many jobs a search reads when it is not told.
	ListScanDefault = 10_000
	// ListScanMax bounds the jobs one search reads.
	ListScanMax = 100_000
	// ListPageBytes bounds the bodies of one page of a listing (ListJobs,
	// the matches of SearchJobs, ListDead): a page ends before the job
	// that would take it past, but holds at least one job.
	ListPageBytes = 8 << 20
	// SearchTimeMax bounds the time one search reads: it then ends its
	// page where it is, and Next goes on from there.
	SearchTimeMax = 5 * time.Second
	// listReadBytes bounds the bodies of one read of the store by a
	// listing: a read asks for at most listReadBytes / Limits.MaxBodyBytes
	// jobs, so that no read holds more, whatever the jobs' sizes.
	listReadBytes = 16 << 20
)

// ListCursor is a position in a listing ordered by a number, then by id:
// the cursor of the stores that list by time (Store.ListJobs), opaque to
// callers once encoded by String.
type ListCursor struct {
	// At is the number the listing orders by (a time, in the store's unit;
	// negated for a listing newest first).
	At int64
	// ID breaks ties.
	ID string
}

// String encodes c as an opaque, URL-safe cursor.
func (c ListCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.At, 10) + ":" + c.ID))
}

// Compare orders two positions: by At, then by ID.
func (c ListCursor) Compare(o ListCursor) int {
	return cmp.Or(cmp.Compare(c.At, o.At), strings.Compare(c.ID, o.ID))
}

// ParseListCursor decodes a cursor that ListCursor.String made. Errors:
// ErrInvalidArgument (field "after").
func ParseListCursor(s string) (ListCursor, error) {
	bad := Invalid("after", "after is not a cursor of this listing")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ListCursor{}, bad
	}
	at, id, ok := strings.Cut(string(raw), ":")
	if !ok || id == "" {
		return ListCursor{}, bad
	}
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return ListCursor{}, bad
	}
	return ListCursor{At: n, ID: id}, nil
}

// ListPosition is where j, as of now, sits in the listing of its state
// (Store.ListJobs): run_at (scheduled, ready), lease expiry (reserved),
// time of death (dead), or the finish time negated, so that the newest
// comes first (done, cancelled); Unix ns, then the id.
func ListPosition(j *Job) ListCursor {
	c := ListCursor{ID: j.ID}
	switch j.State {
	case StateScheduled, StateReady:
		c.At = j.RunAt.UnixNano()
	case StateReserved:
		c.At = j.LeaseExpiresAt.UnixNano()
	case StateDead:
		c.At = j.UpdatedAt.UnixNano()
	default:
		c.At = -j.UpdatedAt.UnixNano()
	}
	return c
}

// ListJobs lists a page of p.Topic's jobs in p.State (Store.ListJobs): up
// to p.Limit jobs whose bodies take at most ListPageBytes (at least one
// job). Errors: *FieldError for a bad topic, state, limit or cursor; the
// store's; ctx's when it ends.
func (e *Engine) ListJobs(ctx context.Context, p *ListJobsParams) (JobPage, error) {
	if p == nil {
		return JobPage{}, noParams("list jobs")
	}
	if err := checkListJobs(p); err != nil {
		return JobPage{}, err
	}
	var size int
	w, err := e.walk(ctx, *p, p.Limit, func(j *Job) step {
		if size += len(j.Body); size > ListPageBytes && size > len(j.Body) {
			return stepEndBefore
		}
		return stepTake
	}, nil)
	return w.JobPage, err
}

// checkListJobs checks the arguments of a listing.
func checkListJobs(p *ListJobsParams) error {
	if err := ValidateTopicName(p.Topic); err != nil {
		return err
	}
	if p.Limit < 1 || p.Limit > ListLimitMax {
		return Invalid("limit", "limit must be between 1 and %d", ListLimitMax)
	}
	q := *p
	return CheckList(&q)
}

// SearchJobsParams are the arguments of Engine.SearchJobs.
type SearchJobsParams struct {
	ListJobsParams
	// Contains is the text sought in the jobs' bodies, not empty.
	Contains string
	// Scan bounds the jobs read, 1 to ListScanMax; 0 means ListScanDefault.
	Scan int
}

// SearchPage is a page of Engine.SearchJobs.
type SearchPage struct {
	JobPage
	// Scanned is how many jobs the page passed over: those read up to
	// where Next goes on.
	Scanned int
}

// SearchJobs lists the jobs of p.Topic in p.State whose body contains
// p.Contains, reading the listing (Store.ListJobs) from p.After: it stops
// with p.Limit jobs found, at the end of the listing, once it has read
// p.Scan jobs, once the matches' bodies would pass ListPageBytes, or after
// SearchTimeMax, and Next goes on from where it stopped, so that a walk by
// Next finds every match once. Errors: *FieldError for a bad topic, state,
// limit, cursor, text or scan; the store's; ctx's when it ends (a search
// stops between two reads of the store once its caller has gone).
func (e *Engine) SearchJobs(ctx context.Context, p *SearchJobsParams) (SearchPage, error) {
	if p == nil {
		return SearchPage{}, noParams("search jobs")
	}
	if p.Contains == "" {
		return SearchPage{}, Invalid("contains", "contains must not be empty")
	}
	scan := cmp.Or(p.Scan, ListScanDefault)
	if scan < 1 || scan > ListScanMax {
		return SearchPage{}, Invalid("scan", "scan must be between 1 and %d", ListScanMax)
	}
	if err := checkListJobs(&p.ListJobsParams); err != nil {
		return SearchPage{}, err
	}
	text := []byte(p.Contains)
	var found, size int
	deadline := e.clock.Now().Add(SearchTimeMax)
	w, err := e.walk(ctx, p.ListJobsParams, scan, func(j *Job) step {
		if !bytes.Contains(j.Body, text) {
			return stepSkip
		}
		if size += len(j.Body); size > ListPageBytes && size > len(j.Body) {
			return stepEndBefore
		}
		if found++; found == p.Limit {
			return stepTakeLast
		}
		return stepTake
	}, func() bool { return !e.clock.Now().Before(deadline) })
	return SearchPage{JobPage: w.JobPage, Scanned: w.passed}, err
}

// step is what a walk does with a job of the listing.
type step int

const (
	// stepSkip passes over the job without taking it.
	stepSkip step = iota
	// stepTake takes the job and goes on.
	stepTake
	// stepTakeLast takes the job and ends the page after it.
	stepTakeLast
	// stepEndBefore ends the page before the job.
	stepEndBefore
)

// walked is the page a walk made.
type walked struct {
	JobPage
	// passed counts the jobs the page passed over, taken or not.
	passed int
}

// walk reads q's listing from q.After, by reads of the store of at most
// listReadBytes of bodies (Limits.MaxBodyBytes each, at most) and most jobs
// in all, and hands each job to decide. The page ends when decide says so,
// at the end of the listing, after most jobs, or after a read when
// stop (if set) says so; ctx is checked before each read. Next is where the
// listing goes on after the last job passed: the store's cursor after a
// read, so a page that ends within a read reads it again up to there, once,
// to learn that cursor (the stores' cursors are their own: the NATS store's
// follows its stream, not a job's fields).
func (e *Engine) walk(ctx context.Context, q ListJobsParams, most int, decide func(*Job) step, stop func() bool) (walked, error) {
	perRead := max(1, min(listReadBytes/e.limits.MaxBodyBytes, ListLimitMax))
	out := walked{JobPage: JobPage{Jobs: []*Job{}}}
	for {
		if err := ctx.Err(); err != nil {
			return walked{}, err
		}
		q.Limit = min(perRead, most-out.passed)
		page, err := e.store.ListJobs(ctx, &q)
		if err != nil {
			return walked{}, err
		}
		for i, j := range page.Jobs {
			s := decide(j)
			if s == stepEndBefore {
				return e.cut(ctx, q, i, page, out)
			}
			out.passed++
			if s != stepSkip {
				out.Jobs = append(out.Jobs, j)
			}
			if s == stepTakeLast {
				return e.cut(ctx, q, i+1, page, out)
			}
		}
		out.Next = page.Next
		if page.Next == "" || out.passed >= most || (stop != nil && stop()) {
			return out, nil
		}
		q.After = page.Next
	}
}

// cut ends out after the first n jobs of page, the read q made, with the
// cursor after them.
func (e *Engine) cut(ctx context.Context, q ListJobsParams, n int, page JobPage, out walked) (walked, error) {
	switch {
	case n == len(page.Jobs):
		out.Next = page.Next
	case n == 0:
		out.Next = q.After
	default:
		q.Limit = n
		again, err := e.store.ListJobs(ctx, &q)
		if err != nil {
			return walked{}, err
		}
		out.Next = again.Next
	}
	return out, nil
}
