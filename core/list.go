package core

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"strconv"
	"strings"
)

// Bounds of Engine.ListJobs and Engine.SearchJobs.
const (
	// ListLimitMax bounds one page of a listing.
	ListLimitMax = 1000
	// ListScanDefault is how many jobs a search reads when it is not told.
	ListScanDefault = 10_000
	// ListScanMax bounds the jobs one search reads.
	ListScanMax = 100_000
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

// ListJobs lists a page of p.Topic's jobs in p.State (Store.ListJobs).
// Errors: *FieldError for a bad topic, state, limit or cursor.
func (e *Engine) ListJobs(ctx context.Context, p *ListJobsParams) (JobPage, error) {
	if p == nil {
		return JobPage{}, noParams("list jobs")
	}
	if err := ValidateTopicName(p.Topic); err != nil {
		return JobPage{}, err
	}
	if p.Limit < 1 || p.Limit > ListLimitMax {
		return JobPage{}, Invalid("limit", "limit must be between 1 and %d", ListLimitMax)
	}
	q := *p
	if err := CheckList(&q); err != nil {
		return JobPage{}, err
	}
	return e.store.ListJobs(ctx, &q)
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
	// Scanned is how many jobs the search read.
	Scanned int
}

// SearchJobs lists the jobs of p.Topic in p.State whose body contains
// p.Contains, reading the listing (Store.ListJobs) from p.After: it stops
// with p.Limit jobs found, at the end of the listing, or once it has read
// p.Scan jobs, and Next goes on from where it stopped. It asks the store
// for pages no longer than the jobs it still needs, so that it never reads
// past the last job it returns. Errors: *FieldError for a bad topic,
// state, limit, cursor, text or scan.
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
	text := []byte(p.Contains)
	out := SearchPage{JobPage: JobPage{Jobs: []*Job{}}}
	q := p.ListJobsParams
	want := q.Limit
	for {
		q.Limit = min(want-len(out.Jobs), scan-out.Scanned)
		page, err := e.ListJobs(ctx, &q)
		if err != nil {
			return SearchPage{}, err
		}
		out.Scanned += len(page.Jobs)
		for _, j := range page.Jobs {
			if bytes.Contains(j.Body, text) {
				out.Jobs = append(out.Jobs, j)
			}
		}
		out.Next = page.Next
		if page.Next == "" || len(out.Jobs) == want || out.Scanned >= scan {
			return out, nil
		}
		q.After = page.Next
	}
}
