package connecttransport

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
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

// Export streams every scheduled, ready, reserved and dead job, in batches,
// as GET /v1/export does: no lease, and for a token restricted to topics
// only the jobs of its topics. Each batch must be taken within
// Config.SendTimeout. Errors: Unimplemented when the backend cannot export;
// an error after the first batch ends the stream with its status, so that
// a client sees a broken export rather than a short one.
func (s *Server) Export(ctx context.Context, _ *connect.Request[delayqv1.ExportRequest], stream *connect.ServerStream[delayqv1.ExportResponse]) error {
	id := identityFrom(ctx)
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
		batch.Jobs = batch.Jobs[:0]
		return err
	}
	err := s.engine.Export(ctx, func(j *core.Job) error {
		if id != nil && !id.AllowsTopic(j.Topic) {
			return nil
		}
		batch.Jobs = append(batch.Jobs, exportMessage(j))
		if len(batch.Jobs) >= exportBatchJobs {
			return send()
		}
		return nil
	})
	if err == nil && len(batch.Jobs) > 0 {
		err = send()
	}
	return describe(err, errors.ErrUnsupported, "export is not supported by this backend")
}

// Import reads batches of exported jobs until the client ends the stream,
// gives them to Engine.Import, and answers the counts of jobs imported,
// skipped (their id was in use) and failed, with the errors of the first
// 1000 that failed, each by its 1-based position in the stream: a job
// fails alone, as a line of POST /v1/import does. Errors: Unimplemented
// when the backend cannot import; a store failure fails the call, and
// since an import is idempotent by id the whole stream may be sent again.
func (s *Server) Import(ctx context.Context, stream *connect.ClientStream[delayqv1.ImportRequest]) (*connect.Response[delayqv1.ImportResponse], error) {
	// Ask with no jobs first, so that a backend without the capability
	// answers Unimplemented whatever the stream holds.
	if _, err := s.engine.Import(ctx, nil); err != nil {
		return nil, describe(err, errors.ErrUnsupported, "import is not supported by this backend")
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
		var jobs []*core.Job
		var at []int64
		for _, m := range stream.Msg().Jobs {
			index++
			j, err := importJob(m)
			if err == nil {
				err = s.allowTopic(ctx, j.Topic)
			}
			if err != nil {
				fail(index, err)
				continue
			}
			jobs, at = append(jobs, j), append(at, index)
		}
		for len(jobs) > 0 {
			n := min(len(jobs), importBatchJobs)
			results, err := s.engine.Import(ctx, jobs[:n])
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
