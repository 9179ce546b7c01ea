package natsstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// keySeen + topic, in the topic bucket: written once when the topic's
// first job came.
const keySeen = "seen."

// markSeen records that a topic has had jobs, once per topic and store
// instance, so that ListTopics needs no scan of jobs.
func (s *Store) markSeen(ctx context.Context, topic string) error {
	if _, ok := s.seen.Load(topic); ok {
		return nil
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	_, err := s.kv.Create(ctx, keySeen+topic, []byte("{}"))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return unavailable("mark topic", err)
	}
	s.seen.Store(topic, struct{}{})
	return nil
}

// GetTopicState implements core.Store; Paused is as this instance's
// claims see it. Errors: ErrClosed, ErrUnavailable.
func (s *Store) GetTopicState(ctx context.Context, name string) (core.TopicState, error) {
	if s.isClosed() {
		return core.TopicState{}, core.ErrClosed
	}
	counts, err := s.counts(ctx, name)
	if err != nil {
		return core.TopicState{}, err
	}
	paused := s.pauses.paused(name)
	return core.TopicState{Name: name, Paused: paused, Counts: counts}, nil
}

// ListTopicStates implements core.Store: the topics marked seen or paused
// in the topic bucket. Errors: ErrClosed, ErrUnavailable.
func (s *Store) ListTopicStates(ctx context.Context) ([]core.TopicState, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	seen, err := s.keyNames(ctx, keySeen, "topics")
	if err != nil {
		return nil, err
	}
	paused, err := s.keyNames(ctx, keyPaused, "paused topics")
	if err != nil {
		return nil, err
	}
	names := append(seen, paused...)
	slices.Sort(names)
	names = slices.Compact(names)
	states := make([]core.TopicState, len(names))
	err = s.each(ctx, len(names), func(i int) error {
		var err error
		states[i], err = s.GetTopicState(ctx, names[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	return states, nil
}

// counts asks the server how many jobs of a topic each state has: a job
// has one message, on a subject of its own, so the number of subjects of
// a kind with messages is the number of jobs. A due message whose run_at
// is still ahead (within Lead of it) counts as scheduled (notYetDue).
// While a claim moves a job from its due message to its lease schedule
// both exist for a moment; counts are exact once settled.
func (s *Store) counts(ctx context.Context, topic string) (core.Counts, error) {
	n := make([]int64, len(kinds)+1)
	now := s.now()
	err := s.each(ctx, len(n), func(i int) error {
		if i == len(kinds) {
			var err error
			n[i], err = s.notYetDue(ctx, topic, now)
			return err
		}
		// An offset past the end makes the server send the total only.
		_, total, err := s.subjects(ctx, s.names.kindFilter(kinds[i], topic), 1<<30)
		n[i] = int64(total)
		return err
	})
	if err != nil {
		return core.Counts{}, err
	}
	// In the order of kinds: sched, due, lease, dead, done, cancelled.
	early := min(n[6], n[1])
	return core.Counts{Scheduled: n[0] + early, Ready: n[1] - early, Reserved: n[2], Dead: n[3], Done: n[4], Cancelled: n[5]}, nil
}

// notYetDue counts a topic's due messages whose run_at is after now. Such
// a message was stored at most Lead before its run_at (a put or retry due
// that soon, or a schedule firing Lead early, never early itself), so
// only the messages stored in the last Lead, and a second for clocks and
// firing late, are read.
func (s *Store) notYetDue(ctx context.Context, topic string, now time.Time) (int64, error) {
	var n int64
	since := time.Now().Add(-s.cfg.Lead - time.Second) // the server's timestamps: real time
	err := scan(ctx, s.nc, s.names.stream, s.names.kindFilter(kindDue, topic), since, func(msg *nats.Msg, seq uint64) (bool, error) {
		if j, err := decodeRecord(msg.Data); err == nil && j.State != core.StateReserved && j.RunAt.After(now) {
			n++
		}
		return true, nil
	})
	return n, err
}

// streamInfoRequest is JetStream's stream info request with subject details.
type streamInfoRequest struct {
	SubjectsFilter string `json:"subjects_filter,omitempty"`
	Offset         int    `json:"offset,omitempty"`
}

// streamInfoResponse is the part of the stream info answer the store reads.
type streamInfoResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
	Total int                 `json:"total"`
	Limit int                 `json:"limit"`
	State struct {
		Subjects map[string]uint64 `json:"subjects"`
	} `json:"state"`
}

// subjects returns a page of the subjects of the job stream that match
// filter, with message counts, from offset in sorted order, and how many
// match in all.
func (s *Store) subjects(ctx context.Context, filter string, offset int) (map[string]uint64, int, error) {
	req, _ := json.Marshal(streamInfoRequest{SubjectsFilter: filter, Offset: offset})
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO."+s.names.stream, req)
	if err != nil {
		return nil, 0, unavailable("count", err)
	}
	var resp streamInfoResponse
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, 0, unavailable("count", err)
	}
	if resp.Error != nil {
		return nil, 0, unavailable("count", resp.Error)
	}
	return resp.State.Subjects, resp.Total, nil
}

// deadIDs returns the ids of the dead messages of topic: all of them, or
// with since those stored from a minute before it on, read in stream
// order from there rather than every dead job of the topic. A death is
// stored after it happened (a lease fires into dead at its expiry or
// later), and the minute covers clocks apart; the server stamps messages
// on the real clock, so a store clock ahead of it reads from the real
// time instead.
func (s *Store) deadIDs(ctx context.Context, topic string, since time.Time) ([]string, error) {
	var ids []string
	filter := s.names.kindFilter(kindDead, topic)
	if !since.IsZero() {
		seen := make(map[string]struct{})
		from := minTime(since, time.Now()).Add(-time.Minute)
		err := scan(ctx, s.nc, s.names.stream, filter, from, func(msg *nats.Msg, _ uint64) (bool, error) {
			if _, id, _, ok := s.names.parse(msg.Subject); ok {
				if _, dup := seen[id]; !dup {
					seen[id] = struct{}{}
					ids = append(ids, id)
				}
			}
			return true, nil
		})
		return ids, err
	}
	for offset := 0; ; {
		page, total, err := s.subjects(ctx, filter, offset)
		if err != nil {
			return nil, err
		}
		for subj := range page {
			if _, id, _, ok := s.names.parse(subj); ok {
				ids = append(ids, id)
			}
		}
		offset += len(page)
		if len(page) == 0 || offset >= total {
			return ids, nil
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ListDeadJobs implements core.Store: the dead messages name the jobs, and
// those still their jobs' last message give the order of death. Errors: ErrInvalidArgument when
// params.Limit < 1, ErrClosed, ErrUnavailable.
func (s *Store) ListDeadJobs(ctx context.Context, params *core.ListDeadJobsParams) ([]*core.Job, error) {
	if params == nil || params.Limit < 1 {
		return nil, core.Invalid("limit", "limit must be at least 1")
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	ids, err := s.deadIDs(ctx, params.Topic, params.Since)
	if err != nil {
		return nil, err
	}
	jobs := make([]*core.Job, len(ids))
	var mu sync.Mutex
	err = s.each(ctx, len(ids), func(i int) error {
		m, err := s.load(ctx, ids[i])
		if err != nil {
			return err
		}
		if m != nil && m.kind == kindDead && m.job.Topic == params.Topic {
			v := m.view(s.now()) // a lease schedule fired into dead is still reserved
			if !v.UpdatedAt.Before(params.Since) {
				mu.Lock()
				jobs[i] = v
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	jobs = slices.DeleteFunc(jobs, func(j *core.Job) bool { return j == nil })
	slices.SortFunc(jobs, func(a, b *core.Job) int {
		return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), strings.Compare(a.ID, b.ID))
	})
	if len(jobs) > params.Limit {
		jobs = jobs[:params.Limit]
	}
	return jobs, nil
}

// keyNames lists the keys of the topics bucket under prefix and returns
// what follows the prefix in each, sorted; what names the keys in the
// error. Errors: ErrUnavailable.
func (s *Store) keyNames(ctx context.Context, prefix, what string) ([]string, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, prefix+">")
	if err != nil {
		return nil, unavailable("list "+what, err)
	}
	defer func() { _ = lister.Stop() }() // errs once the keys were all read
	var names []string
	for k := range lister.Keys() {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

var _ core.TopicChecker = (*Store)(nil)

// CheckTopic implements core.TopicChecker: the NATS store's fetcher holds a
// topic's due messages in stream order, so it cannot pass over a key's
// jobs to bound them, to serve keys in turn or to hold one back for its
// rate, and refuses key_concurrency, fair and rate.per_key rather than
// ignore them.
func (s *Store) CheckTopic(t *core.Topic) error {
	if t.KeyConcurrency != 0 {
		return core.Invalid("key_concurrency", "key_concurrency is not supported by the nats and jetstream backends: they deliver a topic's due jobs in stream order (docs/backends.md)")
	}
	if t.Fair {
		return core.Invalid("fair", "fair is not supported by the nats and jetstream backends: they deliver a topic's due jobs in stream order (docs/backends.md)")
	}
	if t.Rate.PerKey {
		return core.Invalid("rate.per_key", "rate.per_key is not supported by the nats and jetstream backends: they deliver a topic's due jobs in stream order (docs/backends.md)")
	}
	return nil
}
