package connecttransport

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/service"
)

// Bounds of export and import, those of the HTTP API.
const (
	// exportBatchJobs is the most jobs of one ExportResponse.
	exportBatchJobs = 256
	// importBatchJobs is the most jobs given to one Engine.Import call.
	importBatchJobs = 1000
	// importMaxErrors is the most errors an ImportResponse lists; the
	// others are only counted.
	importMaxErrors = 1000
)

// Export streams every schedule, then every scheduled, ready, reserved and
// dead job, in batches of both, as GET /v1/export does: schedules as
// GetSchedule shows them without next_runs, jobs without a lease, and for
// a token restricted to topics only those of its topics. Each batch must
// be taken within Config.SendTimeout. Errors: Unimplemented when the backend cannot export;
// an error after the first batch ends the stream with its status, so that
// a client sees a broken export rather than a short one.
func (s *Server) Export(ctx context.Context, _ *connect.Request[delayqv1.ExportRequest], stream *connect.ServerStream[delayqv1.ExportResponse]) error {
	rc := responseController(ctx)
	if rc != nil {
		// Bounded by progress, each batch by SendTimeout, however long
		// the whole export takes.
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
	}
	batch := &delayqv1.ExportResponse{}
	send := func() error {
		if rc != nil {
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.SendTimeout)) // a socket deadline: the real clock
			defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
		}
		err := stream.Send(batch)
		batch.Jobs, batch.Schedules = batch.Jobs[:0], batch.Schedules[:0]
		return err
	}
	sendFull := func() error {
		if len(batch.Jobs)+len(batch.Schedules) >= exportBatchJobs {
			return send()
		}
		return nil
	}
	err := s.svc.Export(ctx, func(sc *core.Schedule) error {
		batch.Schedules = append(batch.Schedules, scheduleMessage(sc, time.Time{}, 0))
		return sendFull()
	}, func(j *core.Job) error {
		batch.Jobs = append(batch.Jobs, exportMessage(j))
		return sendFull()
	})
	if err == nil && len(batch.Jobs)+len(batch.Schedules) > 0 {
		err = send()
	}
	return err
}

// Import reads batches of exported schedules and jobs until the client
// ends the stream, gives each batch's schedules to Engine.ImportSchedule
// and then its jobs to Engine.Import, and answers the counts of those
// imported, skipped (their name or id was in use) and failed, with the
// errors of the first 1000 that failed, each by its 1-based position in
// the stream: an item fails alone, as a line of POST /v1/import does (a
// job with an id of the engine's derived forms, from a token restricted to
// topics, too: service.AllowImportedID).
// Errors: Unimplemented when the backend cannot import; a store failure
// fails the call, and since an import is idempotent by name and id the
// whole stream may be sent again.
func (s *Server) Import(ctx context.Context, stream *connect.ClientStream[delayqv1.ImportRequest]) (*connect.Response[delayqv1.ImportResponse], error) {
	// Ask with no jobs first, so that a backend without the capability
	// answers Unimplemented whatever the stream holds.
	if _, err := s.svc.Import(ctx, nil); err != nil {
		return nil, err
	}
	rc := responseController(ctx)
	ans := &delayqv1.ImportResponse{}
	fail := func(index int64, err error) {
		ans.Failed++
		if len(ans.Errors) < importMaxErrors {
			ans.Errors = append(ans.Errors, &delayqv1.ImportError{Index: index, Error: errorMessage(s.apiError(ctx, err))})
		}
	}
	var index int64
	for {
		if rc != nil {
			// Bounded by progress: each message must arrive within
			// ReceiveTimeout, and the answer be written WriteTimeout
			// after that, however long the whole import takes. A socket
			// deadline: the real clock.
			deadline := time.Now().Add(s.cfg.ReceiveTimeout)
			_ = rc.SetReadDeadline(deadline)
			_ = rc.SetWriteDeadline(deadline.Add(s.cfg.WriteTimeout))
		}
		if !stream.Receive() {
			break
		}
		for _, m := range stream.Msg().Schedules {
			index++
			imported, err := s.importSchedule(ctx, m)
			switch {
			case err != nil && !service.ItemFailed(err):
				return nil, err // the store's failure: the whole stream may be sent again
			case err != nil:
				fail(index, err)
			case imported:
				ans.Imported++
			default:
				ans.Skipped++
			}
		}
		var jobs []*core.Job
		var at []int64
		for _, m := range stream.Msg().Jobs {
			index++
			j, err := importJob(m)
			if err == nil {
				err = s.svc.CheckImport(ctx, j)
			}
			if err != nil {
				fail(index, err)
				continue
			}
			jobs, at = append(jobs, j), append(at, index)
		}
		for len(jobs) > 0 {
			n := min(len(jobs), importBatchJobs)
			results, err := s.svc.Import(ctx, jobs[:n])
			if err != nil {
				return nil, err
			}
			for k, res := range results {
				switch {
				case res.Err != nil:
					fail(at[k], res.Err)
				case res.Imported:
					ans.Imported++
				default:
					ans.Skipped++
				}
			}
			jobs, at = jobs[n:], at[n:]
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(ans), nil
}

// importSchedule imports a schedule of an import stream: false when a
// schedule of its name exists (skipped). A token restricted to topics may
// import only theirs.
func (s *Server) importSchedule(ctx context.Context, m *delayqv1.Schedule) (bool, error) {
	sc, err := importedSchedule(m)
	if err != nil {
		return false, err
	}
	return s.svc.ImportSchedule(ctx, sc)
}
