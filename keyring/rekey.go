package keyring

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/delayq/delayq/core"
)

// RekeyLimitMax bounds the jobs one page of Rekey reads.
const RekeyLimitMax = 1000

// RekeyParams are the arguments of Store.Rekey.
type RekeyParams struct {
	// After is where the pass goes on: the Next of the previous page,
	// opaque; empty starts a pass, whose first page seals the topic
	// configurations and schedules again too.
	After string
	// Limit bounds the jobs the page reads, 1 to RekeyLimitMax.
	Limit int
}

// RekeyPage is what a page of Rekey did.
type RekeyPage struct {
	// Scanned counts the jobs read.
	Scanned int `json:"scanned"`
	// Rekeyed counts the jobs sealed again with the current key, or
	// sealed for the first time (plaintext from before encryption).
	Rekeyed int `json:"rekeyed"`
	// Changed counts the jobs (and records) that changed between the read
	// and the rewrite: replaced or gone, so already sealed with the
	// current key or no longer kept.
	Changed int `json:"changed"`
	// Records counts the topic configurations and schedules sealed again.
	Records int `json:"records"`
	// Next is the After of the next page; empty once the pass is over.
	Next string `json:"next,omitempty"`
}

// rekeyCursor is where a pass is: a topic, a state of it and the
// listing's cursor there.
type rekeyCursor struct {
	Topic string `json:"t"`
	State int    `json:"s"`
	After string `json:"a,omitempty"`
}

// Rekey seals with the current key what the store holds under an older
// key or in plaintext, while the service runs: a page of jobs at a time,
// walking every topic's listing of every state (core.Store.ListJobs), each
// job's body rewritten in place (core.BodyRewriter) with nothing else of
// it changed, so that claims, acks and deliveries go on; the first page
// of a pass seals the topic configurations and schedules again, each by
// compare-and-set on its revision. A job or record that changed meanwhile
// was written by a put, sealed with the current key. A job that moves in
// its listing while the pass goes on may be missed: a second pass that
// rekeys none says that all is done. Errors: core.ErrInvalidArgument for
// a bad limit or cursor; core.ErrUnsupported (after the records) when the
// store cannot rewrite a body; a *KeyError for a job or record the ring
// cannot open, which stops the pass there; those of the store.
func (s *Store) Rekey(ctx context.Context, params *RekeyParams) (RekeyPage, error) {
	var page RekeyPage
	if params.Limit < 1 || params.Limit > RekeyLimitMax {
		return page, core.Invalid("limit", "limit must be between 1 and %d", RekeyLimitMax)
	}
	var cur rekeyCursor
	if params.After != "" {
		raw, err := base64.RawURLEncoding.DecodeString(params.After)
		if err != nil || json.Unmarshal(raw, &cur) != nil || cur.State < 0 || cur.State >= len(core.States) {
			return page, core.Invalid("after", "after is not a cursor of rekey")
		}
	} else {
		n, changed, err := s.rekeyRecords(ctx)
		page.Records, page.Changed = n, changed
		if err != nil {
			return page, err
		}
	}
	rw, ok := s.next.(core.BodyRewriter)
	if !ok {
		return page, fmt.Errorf("rekey: jobs: %w: the store cannot rewrite a job's body in place, so its jobs keep the key they were sealed with until they finish", core.ErrUnsupported)
	}
	topics, err := s.next.ListTopicStates(ctx)
	if err != nil {
		return page, err
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	slices.Sort(names)
	ti, _ := slices.BinarySearch(names, cur.Topic)
	if ti < len(names) && names[ti] != cur.Topic {
		cur = rekeyCursor{Topic: names[ti]}
	}
	for ti < len(names) && page.Scanned < params.Limit {
		cur.Topic = names[ti]
		jobs, err := s.next.ListJobs(ctx, &core.ListJobsParams{Topic: cur.Topic, State: core.States[cur.State], After: cur.After, Limit: params.Limit - page.Scanned})
		if err != nil {
			return page, err
		}
		for _, j := range jobs.Jobs {
			page.Scanned++
			if err := s.rekeyJob(ctx, rw, j, &page); err != nil {
				return page, err
			}
		}
		switch {
		case jobs.Next != "":
			cur.After = jobs.Next
		case cur.State < len(core.States)-1:
			cur.State, cur.After = cur.State+1, ""
		default:
			ti++
			cur = rekeyCursor{}
		}
	}
	if ti < len(names) {
		raw, _ := json.Marshal(cur)
		page.Next = base64.RawURLEncoding.EncodeToString(raw)
	}
	return page, nil
}

// rekeyJob seals j's body, as the store keeps it, with the current key
// unless it is sealed with it, and counts what it did on page.
func (s *Store) rekeyJob(ctx context.Context, rw core.BodyRewriter, j *core.Job, page *RekeyPage) error {
	if id, sealed := BodyKey(j.Body); sealed && id == s.ring.current {
		return nil
	}
	plain, err := s.ring.OpenBody(j.ID, j.Body)
	if err != nil {
		return fmt.Errorf("rekey: %w", err)
	}
	err = rw.RewriteBody(ctx, &core.RewriteBodyParams{ID: j.ID, Old: j.Body, Body: s.ring.SealBody(j.ID, plain)})
	switch {
	case err == nil:
		page.Rekeyed++
	case errors.Is(err, core.ErrConflict) || errors.Is(err, core.ErrNotFound):
		page.Changed++
	default:
		return fmt.Errorf("rekey: job %s: %w", j.ID, err)
	}
	return nil
}

// rekeyRecords seals the topic configurations and schedules that are not
// sealed with the current key with it, and returns how many it sealed and
// how many changed meanwhile.
func (s *Store) rekeyRecords(ctx context.Context) (sealed, changed int, err error) {
	for kind := range sealedKinds {
		recs, err := s.next.ListRecords(ctx, kind)
		if err != nil {
			return sealed, changed, err
		}
		for _, r := range recs {
			if id, ok := KeyOf(r.Value); ok && id == s.ring.current {
				continue
			}
			plain, err := s.ring.Open(r.Value, recordAD(kind, r.Name))
			if err != nil {
				return sealed, changed, fmt.Errorf("rekey: %s %q: %w", kind, r.Name, err)
			}
			_, err = s.next.PutRecord(ctx, &core.PutRecordParams{Kind: kind, Name: r.Name, Value: s.ring.Seal(plain, recordAD(kind, r.Name)), Revision: r.Revision})
			switch {
			case err == nil:
				sealed++
			case errors.Is(err, core.ErrConflict) || errors.Is(err, core.ErrNotFound):
				changed++
			default:
				return sealed, changed, fmt.Errorf("rekey: %s %q: %w", kind, r.Name, err)
			}
		}
	}
	return sealed, changed, nil
}
