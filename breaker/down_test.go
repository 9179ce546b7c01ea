package breaker_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/delayq/delayq/core"
)

// downStore wraps a store and fakes outages: while down, every call fails
// with core.ErrUnavailable (or, with hang, waits until its ctx is done). It
// counts the calls that reach it.
type downStore struct {
	core.Store
	down  atomic.Bool
	hang  atomic.Bool
	calls atomic.Int64
	// hung, when set, receives a value each time a call starts hanging.
	hung chan struct{}
	// entered, when set, receives the name of every method called.
	entered chan string
}

func (d *downStore) enter(ctx context.Context, method string) error {
	d.calls.Add(1)
	if d.entered != nil {
		d.entered <- method
	}
	if !d.down.Load() {
		return nil
	}
	if d.hang.Load() {
		if d.hung != nil {
			d.hung <- struct{}{}
		}
		<-ctx.Done()
		return fmt.Errorf("fake backend: %w: %w", core.ErrUnavailable, ctx.Err())
	}
	return fmt.Errorf("fake backend: %w: connection refused", core.ErrUnavailable)
}

func (d *downStore) PutJobs(ctx context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	if err := d.enter(ctx, "PutJobs"); err != nil {
		return nil, err
	}
	return d.Store.PutJobs(ctx, p)
}

func (d *downStore) GetJob(ctx context.Context, id string) (*core.Job, error) {
	if err := d.enter(ctx, "GetJob"); err != nil {
		return nil, err
	}
	return d.Store.GetJob(ctx, id)
}

func (d *downStore) CancelJob(ctx context.Context, params *core.CancelJobParams) error {
	if err := d.enter(ctx, "CancelJob"); err != nil {
		return err
	}
	return d.Store.CancelJob(ctx, params)
}

func (d *downStore) ClaimJobs(ctx context.Context, p *core.ClaimJobsParams) ([]*core.Job, error) {
	if err := d.enter(ctx, "ClaimJobs"); err != nil {
		return nil, err
	}
	return d.Store.ClaimJobs(ctx, p)
}

func (d *downStore) AckJob(ctx context.Context, p *core.AckJobParams) (core.SettleResult, error) {
	if err := d.enter(ctx, "AckJob"); err != nil {
		return core.SettleResult{}, err
	}
	return d.Store.AckJob(ctx, p)
}

func (d *downStore) AckJobs(ctx context.Context, p *core.AckJobsParams) ([]core.AckResult, error) {
	if err := d.enter(ctx, "AckJobs"); err != nil {
		return nil, err
	}
	return d.Store.AckJobs(ctx, p)
}

func (d *downStore) RetryJob(ctx context.Context, p *core.RetryJobParams) (core.SettleResult, error) {
	if err := d.enter(ctx, "RetryJob"); err != nil {
		return core.SettleResult{}, err
	}
	return d.Store.RetryJob(ctx, p)
}

func (d *downStore) BuryJob(ctx context.Context, p *core.BuryJobParams) (core.SettleResult, error) {
	if err := d.enter(ctx, "BuryJob"); err != nil {
		return core.SettleResult{}, err
	}
	return d.Store.BuryJob(ctx, p)
}

func (d *downStore) TouchJob(ctx context.Context, p *core.TouchJobParams) (*core.Job, error) {
	if err := d.enter(ctx, "TouchJob"); err != nil {
		return nil, err
	}
	return d.Store.TouchJob(ctx, p)
}

func (d *downStore) RequeueJob(ctx context.Context, id string) error {
	if err := d.enter(ctx, "RequeueJob"); err != nil {
		return err
	}
	return d.Store.RequeueJob(ctx, id)
}

func (d *downStore) ListDeadJobs(ctx context.Context, p *core.ListDeadJobsParams) ([]*core.Job, error) {
	if err := d.enter(ctx, "ListDeadJobs"); err != nil {
		return nil, err
	}
	return d.Store.ListDeadJobs(ctx, p)
}

func (d *downStore) ListFinished(ctx context.Context, p *core.ListFinishedParams) (core.FinishedPage, error) {
	if err := d.enter(ctx, "ListFinished"); err != nil {
		return core.FinishedPage{}, err
	}
	return d.Store.ListFinished(ctx, p)
}

func (d *downStore) GetTopicState(ctx context.Context, name string) (core.TopicState, error) {
	if err := d.enter(ctx, "GetTopicState"); err != nil {
		return core.TopicState{}, err
	}
	return d.Store.GetTopicState(ctx, name)
}

func (d *downStore) ListTopicStates(ctx context.Context) ([]core.TopicState, error) {
	if err := d.enter(ctx, "ListTopicStates"); err != nil {
		return nil, err
	}
	return d.Store.ListTopicStates(ctx)
}

func (d *downStore) Ping(ctx context.Context) error {
	if err := d.enter(ctx, "Ping"); err != nil {
		return err
	}
	return d.Store.Ping(ctx)
}

// settleErr drops the result of a settling call (AckJob, RetryJob,
// BuryJob), for checks of its error alone.
func settleErr(_ core.SettleResult, err error) error { return err }
