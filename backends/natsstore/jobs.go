package natsstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// maxTries bounds the compare-and-set retries of one change.
const maxTries = 8

// leaseCache keeps the lease messages of the jobs this instance's claims
// reserved, so that their acknowledgement (or retry, bury, touch) writes
// without reading first: one op per acknowledgement. An entry is a guess,
// taken out by the first change of its job: the write's compare-and-set
// catches a message that changed since (a touch elsewhere), and a refusal
// made on a guess is checked against the job's stored message.
type leaseCache struct {
	mu sync.Mutex
	m  map[string]*stored
}

// maxCached bounds the entries of a leaseCache, and maxCachedBody the body
// of one: a job past it is read again when acknowledged.
const (
	maxCached     = 100_000
	maxCachedBody = 16 << 10
)

// put keeps the lease message of a job. When the cache is full it first
// drops the entries whose lease ran out (their claimers stopped
// answering), and skips m if that frees nothing.
func (c *leaseCache) put(m *stored, now time.Time) {
	if len(m.job.Body) > maxCachedBody {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*stored)
	}
	if len(c.m) >= maxCached {
		for id, e := range c.m {
			if !e.job.LeaseExpiresAt.After(now) {
				delete(c.m, id)
			}
		}
		if len(c.m) >= maxCached {
			return
		}
	}
	c.m[m.job.ID] = m
}

// take removes and returns the message kept for id, nil if none.
func (c *leaseCache) take(id string) *stored {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.m[id]
	delete(c.m, id)
	return m
}

// PutJobs implements core.Store. A create is one publish that holds only
// while the job has no message at all (compare-and-set against sequence 0
// over its subjects); the creates of a batch are pipelined. A create that
// finds a message, and every replace, reads the job's message and writes
// against it: a finished job is overwritten, an unfinished one conflicts
// (create) or is replaced unless reserved. Errors: ErrClosed,
// ErrStorageFull while the disk is full (Config.DiskReserve) or JetStream
// is at its storage limit, ErrUnavailable.
func (s *Store) PutJobs(ctx context.Context, params *core.PutJobsParams) ([]core.PutResult, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	if err := s.admit(); err != nil {
		return nil, err
	}
	topics := make(map[string]struct{})
	for _, j := range params.Jobs {
		topics[j.Topic] = struct{}{}
	}
	for t := range topics {
		if err := s.markSeen(ctx, t); err != nil {
			return nil, err
		}
	}
	res := make([]core.PutResult, len(params.Jobs))
	slow := make([]bool, len(params.Jobs))
	replace := params.Replace && !params.IfAbsent
	if !replace {
		if err := s.createAll(ctx, params.Jobs, slow); err != nil {
			return nil, err
		}
	} else {
		for i := range slow {
			slow[i] = true
		}
	}
	// The rest, one at a time in order: a later duplicate id must see the
	// earlier one.
	for i, in := range params.Jobs {
		if !slow[i] {
			continue
		}
		r, err := s.put(ctx, in, replace, params.IfAbsent)
		if err != nil {
			return nil, err
		}
		res[i] = r
	}
	return res, nil
}

// createAll publishes the creates of jobs pipelined, each holding only
// while its job has no message, and marks in slow those refused for that.
func (s *Store) createAll(ctx context.Context, jobs []*core.Job, slow []bool) error {
	if err := s.connected("put job"); err != nil {
		return err
	}
	now := s.now()
	futs := make([]jetstream.PubAckFuture, len(jobs))
	var first error
	for i, in := range jobs {
		j := in.Clone()
		j.Reset(now, now)
		m, _, err := s.message(j, now, nil)
		if err != nil {
			return err
		}
		if futs[i], err = s.js.PublishMsgAsync(m); err != nil {
			first = unavailable("put job", err)
			break
		}
	}
	actx, cancel := opContext(ctx)
	defer cancel()
	created := make([]bool, len(jobs))
	for i, f := range futs {
		if f == nil {
			continue
		}
		_, err := await(actx, f)
		switch {
		case isWrongSeq(err):
			slow[i] = true
		case err != nil:
			first = cmp.Or(first, unavailable("put job", err))
		default:
			created[i] = true
		}
	}
	s.keyAll(ctx, jobs, created)
	return first
}

// await waits for a pipelined publish's acknowledgement.
func await(ctx context.Context, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	select {
	case ack := <-f.Ok():
		return ack, nil
	case err := <-f.Err():
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put stores one job against whatever message its id has; with absent,
// any message of its id (a finished job's too) is a conflict.
func (s *Store) put(ctx context.Context, in *core.Job, replace, absent bool) (core.PutResult, error) {
	for range maxTries {
		cur, err := s.load(ctx, in.ID)
		if err == nil {
			cur, err = s.afterFiring(ctx, in.ID, cur)
		}
		if err != nil {
			return core.PutResult{}, err
		}
		now := s.now()
		j := in.Clone()
		j.Reset(now, now)
		replaced := false
		if cur != nil {
			v := cur.view(now)
			if absent {
				return core.PutResult{Err: core.ExistsConflict(in.ID, v)}, nil
			}
			if !v.State.Finished() {
				if !replace {
					return core.PutResult{Err: core.ExistsConflict(in.ID, v)}, nil
				}
				if v.State == core.StateReserved {
					return core.PutResult{Err: core.ReservedConflict(in.ID, v)}, nil
				}
				j.CreatedAt, replaced = cur.job.CreatedAt, true
				j.Replaces(v)
			}
		}
		_, err = s.write(ctx, j, now, cur)
		if errors.Is(err, errCAS) {
			continue
		}
		if err != nil {
			return core.PutResult{}, err
		}
		return core.PutResult{Replaced: replaced}, nil
	}
	return core.PutResult{}, unavailable("put job", fmt.Errorf("job %q changed %d times in a row", in.ID, maxTries))
}

// GetJob implements core.Store: one direct get of the job's last message.
// Errors: ErrNotFound, ErrClosed, ErrUnavailable.
func (s *Store) GetJob(ctx context.Context, id string) (*core.Job, error) {
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	// The view's time is taken before the read: the message read was the
	// job's last at some moment after it. Taken after, a stall between
	// (a SIGSTOP as the answer came) showed a lease that the read found
	// holding as run out, and the job dead, though an ack had made it done
	// meanwhile: a state it never had.
	now := s.now()
	m, err := s.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("natsstore: job %q: %w", id, core.ErrNotFound)
	}
	return m.view(now), nil
}

// change reads a job's message, lets f change the job (as of now) and
// writes it, again while the message changed meanwhile. cur, when not nil,
// is a guess of the message (leaseCache's): a refusal by f on a guess is
// made again on the stored message. f returns an error to refuse.
func (s *Store) change(ctx context.Context, id string, cur *stored, f func(j *core.Job, now time.Time) error) (*core.Job, *stored, error) {
	if s.isClosed() {
		return nil, nil, core.ErrClosed
	}
	for range maxTries {
		guess := cur != nil
		var err error
		if !guess {
			if cur, err = s.load(ctx, id); err != nil {
				return nil, nil, err
			}
		}
		if cur, err = s.afterFiring(ctx, id, cur); err != nil {
			return nil, nil, err
		}
		if cur == nil {
			return nil, nil, fmt.Errorf("natsstore: job %q: %w", id, core.ErrNotFound)
		}
		now := s.now()
		j := cur.view(now)
		if err := f(j, now); err != nil {
			if guess {
				cur = nil
				continue
			}
			return nil, nil, err
		}
		seq, err := s.write(ctx, j, now, cur)
		if errors.Is(err, errCAS) {
			cur = nil
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		return j, &stored{job: j, seq: seq, kind: kindOf(j, now, s.cfg.Lead), subject: s.names.subject(kindOf(j, now, s.cfg.Lead), j.ID, j.Topic)}, nil
	}
	return nil, nil, unavailable("change job", fmt.Errorf("job %q changed %d times in a row", id, maxTries))
}

// CancelJob implements core.Store. With params.Running, the lease message
// the claim kept is the guess, as for a settling call. Errors:
// ErrNotFound, ErrConflict, ErrClosed, ErrUnavailable.
func (s *Store) CancelJob(ctx context.Context, params *core.CancelJobParams) error {
	id := params.ID
	var guess *stored
	if params.Running {
		guess = s.leases.take(id)
	}
	_, _, err := s.change(ctx, id, guess, func(j *core.Job, now time.Time) error {
		switch {
		case j.State.Finished():
			return fmt.Errorf("natsstore: job %q: %w", id, core.ErrNotFound)
		case j.State == core.StateReserved && !params.Running:
			return core.ReservedConflict(id, j.Clone())
		}
		j.Finish(core.StateCancelled, now)
		return nil
	})
	return err
}

// ExpireJob implements core.Store. Errors: ErrNotFound, ErrConflict,
// ErrClosed, ErrUnavailable.
func (s *Store) ExpireJob(ctx context.Context, id string) error {
	_, _, err := s.change(ctx, id, nil, func(j *core.Job, now time.Time) error {
		switch {
		case j.State.Finished():
			return fmt.Errorf("natsstore: job %q: %w", id, core.ErrNotFound)
		case !j.CanExpire(now):
			return core.NotExpiredConflict(id, j.Clone())
		}
		j.Bury(core.JobExpired, now)
		return nil
	})
	return err
}

// RewriteBody implements core.BodyRewriter: the job is written again as it
// is but for its body, under its lease if reserved, a finished one with
// what is left of its retention as its TTL. A finished job's new message
// is a new entry of the record of finished jobs (ListFinished), after the
// others: job events tell it once all the same, by their ids, and
// listings of finished jobs show it as the latest. Errors: ErrNotFound,
// *core.ConflictError (ErrConflict) when the body is not params.Old,
// ErrClosed, ErrUnavailable.
func (s *Store) RewriteBody(ctx context.Context, params *core.RewriteBodyParams) error {
	_, _, err := s.change(ctx, params.ID, nil, func(j *core.Job, _ time.Time) error {
		if !bytes.Equal(j.Body, params.Old) {
			return core.BodyChangedConflict(params.ID)
		}
		j.Body = append(json.RawMessage(nil), params.Body...)
		return nil
	})
	return err
}

// settle changes a reserved job under its lease: the job's lease message
// kept by the claim is the guess, so that a job claimed here is written
// without a read. A lease message that stays (a touch) is kept again.
func (s *Store) settle(ctx context.Context, id, lease string, f func(j *core.Job, now time.Time)) (*core.Job, error) {
	j, m, err := s.change(ctx, id, s.leases.take(id), func(j *core.Job, now time.Time) error {
		if err := leased(j, lease); err != nil {
			return err
		}
		f(j, now)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if m.kind == kindLease {
		s.leases.put(m, s.now())
	}
	return j, nil
}

// leased checks that lease is j's current, unexpired lease (j as of now).
func leased(j *core.Job, lease string) error {
	if j.State != core.StateReserved || lease == "" || j.Lease != lease {
		return fmt.Errorf("natsstore: job %q: %w", j.ID, core.ErrLeaseLost)
	}
	return nil
}

// settled is what a settling call returns of the job it wrote.
func settled(j *core.Job, err error) (core.SettleResult, error) {
	if err != nil {
		return core.SettleResult{}, err
	}
	return j.Settled(), nil
}

// AckJob implements core.Store: the done message replaces the lease
// schedule, which the server purges as it stores it (one publish).
// Errors: ErrNotFound, ErrLeaseLost, ErrClosed, ErrUnavailable.
func (s *Store) AckJob(ctx context.Context, params *core.AckJobParams) (core.SettleResult, error) {
	return settled(s.settle(ctx, params.ID, params.Lease, func(j *core.Job, now time.Time) {
		j.Finish(core.StateDone, now)
	}))
}

// AckJobs implements core.Store. Each job changes by a compare-and-set of
// its own, so the acks cannot share one write: they run concurrently
// (ackConcurrency at a time), which pipelines their publishes on the
// connection, and the acks of one id run in order, so that the second
// finds it done. Errors: ErrClosed, ErrUnavailable.
func (s *Store) AckJobs(ctx context.Context, params *core.AckJobsParams) ([]core.AckResult, error) {
	res := make([]core.AckResult, len(params.Acks))
	byID := make(map[string][]int, len(params.Acks))
	var ids []string
	for k, a := range params.Acks {
		if byID[a.ID] == nil {
			ids = append(ids, a.ID)
		}
		byID[a.ID] = append(byID[a.ID], k)
	}
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, ackConcurrency)
		mu   sync.Mutex
		fail error
	)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, k := range byID[id] {
				r := &res[k]
				r.Settled, r.Err = s.AckJob(ctx, &params.Acks[k])
				if r.Err != nil && !errors.Is(r.Err, core.ErrNotFound) && !errors.Is(r.Err, core.ErrLeaseLost) {
					mu.Lock()
					fail = cmp.Or(fail, r.Err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if fail != nil {
		return nil, fail
	}
	return res, nil
}

// ackConcurrency bounds the acks of one AckJobs call in flight at once.
const ackConcurrency = 64

// RetryJob implements core.Store: a schedule (or, due within Lead, a due
// message) replaces the lease schedule. A zero params.RunAt means now.
// Errors: ErrNotFound, ErrLeaseLost, ErrClosed, ErrUnavailable.
func (s *Store) RetryJob(ctx context.Context, params *core.RetryJobParams) (core.SettleResult, error) {
	return settled(s.settle(ctx, params.ID, params.Lease, func(j *core.Job, now time.Time) {
		j.RetryFor(params, now)
	}))
}

// BuryJob implements core.Store. Errors: ErrNotFound, ErrLeaseLost,
// ErrClosed, ErrUnavailable.
func (s *Store) BuryJob(ctx context.Context, params *core.BuryJobParams) (core.SettleResult, error) {
	return settled(s.settle(ctx, params.ID, params.Lease, func(j *core.Job, now time.Time) {
		j.Bury(params.Error, now)
	}))
}

// TouchJob implements core.Store: a new lease schedule, due at the new
// expiry, replaces the old on its subject. Errors: ErrNotFound,
// ErrLeaseLost, ErrClosed, ErrUnavailable.
func (s *Store) TouchJob(ctx context.Context, params *core.TouchJobParams) (*core.Job, error) {
	return s.settle(ctx, params.ID, params.Lease, func(j *core.Job, now time.Time) {
		j.LeaseExpiresAt = now.Add(j.TTR)
	})
}

// RequeueJob implements core.Store: the dead job's run_at becomes now.
// Errors: ErrNotFound, *core.ConflictError (ErrConflict) when not dead,
// ErrClosed, ErrUnavailable.
func (s *Store) RequeueJob(ctx context.Context, id string) error {
	_, _, err := s.change(ctx, id, nil, func(j *core.Job, now time.Time) error {
		if j.State != core.StateDead {
			return core.NotDeadConflict(id, j.Clone(), j.State)
		}
		j.Requeue(now)
		return nil
	})
	return err
}
