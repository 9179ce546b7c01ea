package connecttransport

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/service"
)

// exportBatchJobs is the most jobs of one ExportResponse.
const exportBatchJobs = 256

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
	err := s.svc.Export(ctx, service.ExportOptions{}, func(sc *core.Schedule) error {
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
	im, err := s.svc.StartImport(ctx, s.cfg.MaxRequestBytes)
	if err != nil {
		return nil, err
	}
	rc := responseController(ctx)
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
			sc, err := importedSchedule(m)
			if err = im.Schedule(index, sc, err); err != nil {
				return nil, err // the store's failure: the whole stream may be sent again
			}
		}
		for _, m := range stream.Msg().Jobs {
			index++
			j, err := importJob(m)
			if err = im.Job(index, j, 0, err); err != nil {
				return nil, err
			}
		}
		if err := im.Flush(); err != nil {
			return nil, err
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	ans := &delayqv1.ImportResponse{Imported: im.Imported, Skipped: im.Skipped, Failed: im.Failed}
	for _, e := range im.Errors {
		ans.Errors = append(ans.Errors, &delayqv1.ImportError{Index: e.Index, Error: errorMessage(s.apiError(ctx, e.Err))})
	}
	return connect.NewResponse(ans), nil
}
