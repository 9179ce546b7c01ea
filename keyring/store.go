package keyring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/delayq/delayq/core"
)

// sealedKinds are the kinds of records whose values Store seals: topic
// configurations (webhook secrets, delivery headers) and schedules (their
// jobs' bodies). Other kinds (cursors, the expiring marks) hold nothing
// of the users'.
var sealedKinds = map[string]bool{core.KindTopic: true, core.KindSchedule: true}

// Config configures a Store.
type Config struct {
	// Ring seals and opens; required.
	Ring *Ring
	// Logger says which claimed jobs could not be opened.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Store is a core.Store that seals job bodies and the values of topic and
// schedule records before the store under it keeps them, and opens them
// when it reads them: every caller above it sees plaintext, every backend
// under it ciphertext. A job or record that cannot be opened (its key is
// not in the ring) is an error of the call that reads it (a *KeyError),
// and a claimed one is buried rather than delivered (ClaimJobs). It is
// safe for concurrent use. Create it with New.
type Store struct {
	next core.Store
	ring *Ring
	log  *slog.Logger
}

var (
	_ core.Store        = (*Store)(nil)
	_ core.JobExporter  = (*Store)(nil)
	_ core.JobImporter  = (*Store)(nil)
	_ core.Checkpointer = (*Store)(nil)
)

// New returns store behind the encryption of cfg.Ring. It panics without a
// ring.
func New(store core.Store, cfg Config) *Store {
	if cfg.Ring == nil {
		panic("keyring: New without a ring")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Store{next: store, ring: cfg.Ring, log: cfg.Logger}
}

// Unwrap returns the store under the encryption.
func (s *Store) Unwrap() core.Store { return s.next }

// Ring returns the store's key ring.
func (s *Store) Ring() *Ring { return s.ring }

// recordAD is what a record's value is bound to: its kind and name.
func recordAD(kind, name string) []byte { return []byte("record\x00" + kind + "\x00" + name) }

// OpenJob replaces j's body and the bodies of its next steps (Then), as a
// store keeps them, by their plaintext, in place (the steps as copies).
// Errors: a *KeyError, and j is unchanged.
func (s *Store) OpenJob(j *core.Job) error {
	plain, err := s.ring.OpenBody(j.ID, j.Body)
	if err != nil {
		return err
	}
	then, err := s.steps(j.ID, j.Then, s.ring.OpenBody)
	if err != nil {
		return err
	}
	j.Body, j.Then = plain, then
	return nil
}

// stepID is what the body of job id's next step at depth (1 for Then, 2
// for Then.Then...) is sealed for: never a job's id, which has no colon.
func stepID(id string, depth int) string { return id + ":then:" + strconv.Itoa(depth) }

// steps returns a copy of the steps from then on (then, then.Then...) of
// job id with each body passed through f (the ring's SealBody or
// OpenBody) for its stepID. Errors: f's.
func (s *Store) steps(id string, then *core.PushParams, f func(id string, body []byte) ([]byte, error)) (*core.PushParams, error) {
	if then == nil {
		return nil, nil
	}
	out := then.Clone()
	depth := 1
	for p := out; p != nil; p, depth = p.Then, depth+1 {
		body, err := f(stepID(id, depth), p.Body)
		if err != nil {
			return nil, err
		}
		p.Body = body
	}
	return out, nil
}

// openJobs opens the bodies of jobs in place. Errors: the first *KeyError.
func (s *Store) openJobs(jobs []*core.Job) error {
	for _, j := range jobs {
		if err := s.OpenJob(j); err != nil {
			return err
		}
	}
	return nil
}

// openConflict opens the body of the job a *core.ConflictError carries,
// or leaves the job out when it does not open: the conflict stands.
func (s *Store) openConflict(err error) error {
	var ce *core.ConflictError
	if errors.As(err, &ce) && ce.Job != nil {
		if s.OpenJob(ce.Job) != nil {
			ce.Job = nil
		}
	}
	return err
}

// sealed returns copies of jobs with their bodies and their steps' sealed;
// the callers' jobs are theirs.
func (s *Store) sealed(jobs []*core.Job) []*core.Job {
	out := make([]*core.Job, len(jobs))
	seal := func(id string, body []byte) ([]byte, error) { return s.ring.SealBody(id, body), nil }
	for i, j := range jobs {
		c := *j
		c.Body = s.ring.SealBody(j.ID, j.Body)
		c.Then, _ = s.steps(j.ID, j.Then, seal)
		out[i] = &c
	}
	return out
}

// PutJobs implements core.Store, sealing each body. Errors: those of the
// store.
func (s *Store) PutJobs(ctx context.Context, params *core.PutJobsParams) ([]core.PutResult, error) {
	if params == nil {
		return s.next.PutJobs(ctx, params)
	}
	p := *params
	p.Jobs = s.sealed(params.Jobs)
	res, err := s.next.PutJobs(ctx, &p)
	for _, r := range res {
		s.openConflict(r.Err)
	}
	return res, err
}

// GetJob implements core.Store. Errors: those of the store, a *KeyError.
func (s *Store) GetJob(ctx context.Context, id string) (*core.Job, error) {
	j, err := s.next.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.OpenJob(j); err != nil {
		return nil, err
	}
	return j, nil
}

// CancelJob implements core.Store. Errors: those of the store.
func (s *Store) CancelJob(ctx context.Context, params *core.CancelJobParams) error {
	return s.openConflict(s.next.CancelJob(ctx, params))
}

// ExpireJob implements core.Store. Errors: those of the store.
func (s *Store) ExpireJob(ctx context.Context, id string) error {
	return s.openConflict(s.next.ExpireJob(ctx, id))
}

// ClaimJobs implements core.Store. A claimed job whose body does not open
// (its key is not in the ring) is never delivered: it is buried with the
// reason as its LastError, logged, and left out of the answer, so that an
// operator finds it among the dead jobs and requeues it once the ring
// has its key again. Errors: those of the store.
func (s *Store) ClaimJobs(ctx context.Context, params *core.ClaimJobsParams) ([]*core.Job, error) {
	jobs, err := s.next.ClaimJobs(ctx, params)
	if err != nil {
		return nil, err
	}
	out := jobs[:0]
	for _, j := range jobs {
		openErr := s.OpenJob(j)
		if openErr == nil {
			out = append(out, j)
			continue
		}
		s.log.Error("keyring: a claimed job does not open; it is buried, not delivered", "job", j.ID, "topic", j.Topic, "err", openErr)
		// The job stays where the store put it if the bury fails: its
		// lease runs out and the next claim tries again.
		if _, err := s.next.BuryJob(context.WithoutCancel(ctx), &core.BuryJobParams{ID: j.ID, Lease: j.Lease, Error: openErr.Error()}); err != nil {
			s.log.Error("keyring: burying a job that does not open failed", "job", j.ID, "err", err)
		}
	}
	return out, nil
}

// AckJob implements core.Store. Errors: those of the store.
func (s *Store) AckJob(ctx context.Context, params *core.AckJobParams) (core.SettleResult, error) {
	return s.next.AckJob(ctx, params)
}

// AckJobs implements core.Store. Errors: those of the store.
func (s *Store) AckJobs(ctx context.Context, params *core.AckJobsParams) ([]core.AckResult, error) {
	return s.next.AckJobs(ctx, params)
}

// RetryJob implements core.Store. Errors: those of the store.
func (s *Store) RetryJob(ctx context.Context, params *core.RetryJobParams) (core.SettleResult, error) {
	return s.next.RetryJob(ctx, params)
}

// BuryJob implements core.Store. Errors: those of the store.
func (s *Store) BuryJob(ctx context.Context, params *core.BuryJobParams) (core.SettleResult, error) {
	return s.next.BuryJob(ctx, params)
}

// TouchJob implements core.Store. Errors: those of the store, a *KeyError.
func (s *Store) TouchJob(ctx context.Context, params *core.TouchJobParams) (*core.Job, error) {
	j, err := s.next.TouchJob(ctx, params)
	if err != nil {
		return nil, err
	}
	if err := s.OpenJob(j); err != nil {
		return nil, err
	}
	return j, nil
}

// RequeueJob implements core.Store. Errors: those of the store.
func (s *Store) RequeueJob(ctx context.Context, id string) error {
	return s.openConflict(s.next.RequeueJob(ctx, id))
}

// ListDeadJobs implements core.Store. Errors: those of the store, a
// *KeyError.
func (s *Store) ListDeadJobs(ctx context.Context, params *core.ListDeadJobsParams) ([]*core.Job, error) {
	jobs, err := s.next.ListDeadJobs(ctx, params)
	if err != nil {
		return nil, err
	}
	return jobs, s.openJobs(jobs)
}

// ListFinished implements core.Store; its entries hold no body. Errors:
// those of the store.
func (s *Store) ListFinished(ctx context.Context, params *core.ListFinishedParams) (core.FinishedPage, error) {
	return s.next.ListFinished(ctx, params)
}

// FindJobs implements core.Store. Errors: those of the store, a *KeyError.
func (s *Store) FindJobs(ctx context.Context, params *core.FindJobsParams) ([]*core.Job, error) {
	jobs, err := s.next.FindJobs(ctx, params)
	if err != nil {
		return nil, err
	}
	return jobs, s.openJobs(jobs)
}

// ListJobs implements core.Store, opening every body of the page, so that
// a search of bodies (core's SearchJobs, which reads this listing) finds
// the plaintext. Errors: those of the store, a *KeyError.
func (s *Store) ListJobs(ctx context.Context, params *core.ListJobsParams) (core.JobPage, error) {
	page, err := s.next.ListJobs(ctx, params)
	if err != nil {
		return core.JobPage{}, err
	}
	if err := s.openJobs(page.Jobs); err != nil {
		return core.JobPage{}, err
	}
	return page, nil
}

// GetTopicState implements core.Store. Errors: those of the store.
func (s *Store) GetTopicState(ctx context.Context, name string) (core.TopicState, error) {
	return s.next.GetTopicState(ctx, name)
}

// ListTopicStates implements core.Store. Errors: those of the store.
func (s *Store) ListTopicStates(ctx context.Context) ([]core.TopicState, error) {
	return s.next.ListTopicStates(ctx)
}

// TakeRate implements core.Store. Errors: those of the store.
func (s *Store) TakeRate(ctx context.Context, params *core.TakeRateParams) (core.TakeRateResult, error) {
	return s.next.TakeRate(ctx, params)
}

// SetTopicPaused implements core.Store. Errors: those of the store.
func (s *Store) SetTopicPaused(ctx context.Context, name string, paused bool) error {
	return s.next.SetTopicPaused(ctx, name, paused)
}

// openRecord opens r's value in place when its kind is sealed. Errors: a
// *KeyError.
func (s *Store) openRecord(r *core.Record) error {
	if !sealedKinds[r.Kind] {
		return nil
	}
	plain, err := s.ring.Open(r.Value, recordAD(r.Kind, r.Name))
	if err != nil {
		return fmt.Errorf("%s %q: %w", r.Kind, r.Name, err)
	}
	r.Value = plain
	return nil
}

// GetRecord implements core.Store. Errors: those of the store, a
// *KeyError.
func (s *Store) GetRecord(ctx context.Context, kind, name string) (*core.Record, error) {
	r, err := s.next.GetRecord(ctx, kind, name)
	if err != nil {
		return nil, err
	}
	if err := s.openRecord(r); err != nil {
		return nil, err
	}
	return r, nil
}

// PutRecord implements core.Store, sealing the values of topic and
// schedule records. Errors: those of the store.
func (s *Store) PutRecord(ctx context.Context, params *core.PutRecordParams) (uint64, error) {
	if params == nil || !sealedKinds[params.Kind] {
		return s.next.PutRecord(ctx, params)
	}
	p := *params
	p.Value = s.ring.Seal(params.Value, recordAD(params.Kind, params.Name))
	return s.next.PutRecord(ctx, &p)
}

// DeleteRecord implements core.Store. Errors: those of the store.
func (s *Store) DeleteRecord(ctx context.Context, params *core.DeleteRecordParams) error {
	return s.next.DeleteRecord(ctx, params)
}

// ListRecords implements core.Store. Errors: those of the store, a
// *KeyError.
func (s *Store) ListRecords(ctx context.Context, kind string) ([]*core.Record, error) {
	recs, err := s.next.ListRecords(ctx, kind)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if err := s.openRecord(r); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// Ping implements core.Store. Errors: those of the store.
func (s *Store) Ping(ctx context.Context) error { return s.next.Ping(ctx) }

// Close implements core.Store: it closes the store under it.
func (s *Store) Close() error { return s.next.Close() }

// ExportJobs implements core.JobExporter: fn gets the jobs opened, as
// from any store; an export that is to hold ciphertext seals them again
// (Ring.SealBody). Errors: core.ErrUnsupported when the store lacks the
// capability, fn's error, those of the store, a *KeyError.
func (s *Store) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	x, ok := s.next.(core.JobExporter)
	if !ok {
		return core.ErrUnsupported
	}
	return x.ExportJobs(ctx, func(j *core.Job) error {
		if err := s.OpenJob(j); err != nil {
			return err
		}
		return fn(j)
	})
}

// ImportJobs implements core.JobImporter, sealing each body. Errors:
// core.ErrUnsupported when the store lacks the capability, those of the
// store.
func (s *Store) ImportJobs(ctx context.Context, jobs []*core.Job) ([]bool, error) {
	im, ok := s.next.(core.JobImporter)
	if !ok {
		return nil, core.ErrUnsupported
	}
	return im.ImportJobs(ctx, s.sealed(jobs))
}

// Checkpoint implements core.Checkpointer: the copy holds what the store
// holds, ciphertext. Errors: core.ErrUnsupported when the store lacks the
// capability, those of the store.
func (s *Store) Checkpoint(ctx context.Context, dir string) error {
	c, ok := s.next.(core.Checkpointer)
	if !ok {
		return core.ErrUnsupported
	}
	return c.Checkpoint(ctx, dir)
}
