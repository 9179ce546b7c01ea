//go:build delayq_mutants

package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/delayq/delayq/core"
)

// This file is built only into the test binary of TestE2EHistoryMutants
// (go build -tags delayq_mutants): each mutant is a bug the history
// checker (internal/history) must catch at the API. The release binary
// never has them.

func init() {
	mutantStore = func(s core.Store, log *slog.Logger) core.Store {
		m := os.Getenv("DELAYQ_MUTANT")
		if m == "" || m == mutantNone {
			// The control still goes through the wrapper: only the bug
			// differs between the runs.
			return &mutant{Store: s, name: mutantNone}
		}
		log.Warn("serving with a mutant store: a bug on purpose", "mutant", m)
		return &mutant{Store: s, name: m}
	}
}

// The mutants, by the name DELAYQ_MUTANT gives.
const (
	// mutantNone wraps the store without a bug: the control.
	mutantNone = "none"
	// mutantAckIgnoresLease acks a job reserved under another lease with
	// that lease: an ack with a stale lease is answered 204.
	mutantAckIgnoresLease = "ack-ignores-lease"
	// mutantClaimIgnoresPause never pauses a topic, answering as if it had.
	mutantClaimIgnoresPause = "claim-ignores-pause"
	// mutantClaimIgnoresCancel answers 204 to the cancel of a waiting job
	// and leaves it to be claimed.
	mutantClaimIgnoresCancel = "claim-ignores-cancel"
	// mutantAttemptNotIncremented answers a redelivery with the attempt of
	// the delivery before.
	mutantAttemptNotIncremented = "attempt-not-incremented"
	// mutantRetryBeforeRunAt retries a nacked job at once, whatever its
	// delay.
	mutantRetryBeforeRunAt = "retry-before-run-at"
	// mutantPushBeforeDurable answers a push before it is stored, and
	// stores it a second later: a kill -9 meanwhile loses it.
	mutantPushBeforeDurable = "push-before-durable"
)

// mutant is a store with the bug its name says.
type mutant struct {
	core.Store
	name string
}

func (m *mutant) AckJob(ctx context.Context, p *core.AckJobParams) (core.SettleResult, error) {
	res, err := m.Store.AckJob(ctx, p)
	if m.name == mutantAckIgnoresLease && errors.Is(err, core.ErrLeaseLost) {
		if j, gerr := m.Store.GetJob(ctx, p.ID); gerr == nil && j.State == core.StateReserved && j.Lease != "" {
			return m.Store.AckJob(ctx, &core.AckJobParams{ID: p.ID, Lease: j.Lease})
		}
	}
	return res, err
}

func (m *mutant) AckJobs(ctx context.Context, p *core.AckJobsParams) ([]core.AckResult, error) {
	if m.name != mutantAckIgnoresLease {
		return m.Store.AckJobs(ctx, p)
	}
	out := make([]core.AckResult, len(p.Acks))
	for i := range p.Acks {
		out[i].Settled, out[i].Err = m.AckJob(ctx, &p.Acks[i])
	}
	return out, nil
}

func (m *mutant) SetTopicPaused(ctx context.Context, name string, paused bool) error {
	if m.name == mutantClaimIgnoresPause {
		return nil
	}
	return m.Store.SetTopicPaused(ctx, name, paused)
}

func (m *mutant) CancelJob(ctx context.Context, p *core.CancelJobParams) error {
	if m.name == mutantClaimIgnoresCancel {
		if j, err := m.Store.GetJob(ctx, p.ID); err == nil && (j.State == core.StateScheduled || j.State == core.StateReady) {
			return nil
		}
	}
	return m.Store.CancelJob(ctx, p)
}

func (m *mutant) ClaimJobs(ctx context.Context, p *core.ClaimJobsParams) ([]*core.Job, error) {
	jobs, err := m.Store.ClaimJobs(ctx, p)
	if m.name == mutantAttemptNotIncremented {
		for _, j := range jobs {
			if j.Attempt > 1 {
				j.Attempt--
			}
		}
	}
	return jobs, err
}

func (m *mutant) RetryJob(ctx context.Context, p *core.RetryJobParams) (core.SettleResult, error) {
	if m.name == mutantRetryBeforeRunAt {
		q := *p
		q.RunAt = time.Time{}
		p = &q
	}
	return m.Store.RetryJob(ctx, p)
}

func (m *mutant) PutJobs(ctx context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	if m.name != mutantPushBeforeDurable {
		return m.Store.PutJobs(ctx, p)
	}
	go func() {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		<-t.C
		_, _ = m.Store.PutJobs(context.WithoutCancel(ctx), p)
	}()
	return make([]core.PutResult, len(p.Jobs)), nil
}
