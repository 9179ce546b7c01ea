package httptransport

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/delayq/delayq/core"
)

// createJob serves POST /v1/jobs: 201 with the job's id, topic, run_at and
// state; 409 with the existing job when the id names an unfinished job; 200
// with "replaced" when the topic's unique keys replaced the key's job.
func (s *Server) createJob(w http.ResponseWriter, r *http.Request) error {
	p, err := s.readJobRequest(w, r)
	if err != nil {
		return err
	}
	if err := s.allowTopic(r, p.Topic); err != nil {
		return err
	}
	if err := s.allowIntake(r, 1); err != nil {
		return err
	}
	// PushBatch of one rather than Push: a push to a topic whose unique
	// keys replace may replace a job, and says so.
	rs, err := s.engine.PushBatch(r.Context(), &core.PushBatchParams{Jobs: []*core.PushParams{p}})
	if err != nil {
		return err
	}
	if rs[0].Err != nil {
		return rs[0].Err
	}
	status := http.StatusCreated
	if rs[0].Replaced {
		status = http.StatusOK
	}
	w.Header().Set("Location", jobPath(rs[0].Job.ID))
	writeRaw(w, status, appendPushed(nil, rs[0].Job, rs[0].Replaced))
	return nil
}

// putJob serves PUT /v1/jobs/{id}: 201 created, 200 replaced (rescheduled),
// 409 while the job is reserved. An id in the body must match the path.
func (s *Server) putJob(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	p, err := s.readJobRequest(w, r)
	if err != nil {
		return err
	}
	if p.ID != "" && p.ID != id {
		return core.Invalid("id", "id %q does not match the id of the path %q", p.ID, id)
	}
	p.ID = id
	if err := s.allowTopic(r, p.Topic); err != nil {
		return err
	}
	if err := s.allowIntake(r, 1); err != nil {
		return err
	}
	job, replaced, err := s.engine.Replace(r.Context(), p)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if !replaced {
		status = http.StatusCreated
		w.Header().Set("Location", jobPath(job.ID))
	}
	writeRaw(w, status, appendPushed(nil, job, replaced))
	return nil
}

// readJobRequest reads and decodes the body of a single job request.
func (s *Server) readJobRequest(w http.ResponseWriter, r *http.Request) (*core.PushParams, error) {
	data, release, err := readBody(w, r, s.maxJobBytes)
	if err != nil {
		return nil, err
	}
	p, err := decodeJobRequest(data)
	release()
	if err != nil {
		return nil, err
	}
	p.TraceParent = traceParent(r)
	return p, nil
}

// createBatch serves POST /v1/jobs/batch: 200 with one result per job, in
// order, each job succeeding or failing on its own. An empty batch is 400, a
// batch over the engine's MaxBatch 413. When every job failed with a
// server-side error, the batch is answered with that error instead.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) error {
	data, release, err := readBody(w, r, s.maxRequestBytes)
	if err != nil {
		return err
	}
	decoded, raw, err := decodeBatch(data)
	release()
	if err != nil {
		return err
	}
	n := max(len(decoded), len(raw))
	limit := s.engine.Limits().MaxBatch
	switch {
	case n == 0:
		return core.Invalid("jobs", "jobs must hold at least one job")
	case n > limit:
		return core.TooLarge("jobs", "a batch holds at most %d jobs, not %d", limit, n)
	}
	// The quota counts every job of the batch, and refuses it whole.
	if err := s.allowIntake(r, n); err != nil {
		return err
	}

	results := make([]core.PushResult, n)
	params := make([]*core.PushParams, 0, n)
	idx := make([]int, 0, n)
	tp := traceParent(r)
	for i := range n {
		var p *core.PushParams
		var err error
		if decoded != nil {
			p, err = decoded[i].params()
		} else {
			p, err = decodeJobRequest(raw[i])
		}
		if err == nil {
			err = s.allowTopic(r, p.Topic)
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		p.TraceParent = tp
		params = append(params, p)
		idx = append(idx, i)
	}
	decoded, raw = nil, nil
	if len(params) > 0 {
		pushed, err := s.engine.PushBatch(r.Context(), &core.PushBatchParams{Jobs: params})
		if err != nil {
			return err
		}
		for k, res := range pushed {
			results[idx[k]] = res
		}
	}

	// Server-side failures are logged once per batch, not once per job.
	var serverErr error
	serverErrs := 0
	for _, res := range results {
		if res.Err != nil && toAPIError(res.Err).Status >= http.StatusInternalServerError {
			serverErr = cmpErr(serverErr, res.Err)
			serverErrs++
		}
	}
	if serverErrs == len(results) {
		return serverErr
	}
	if serverErr != nil {
		s.logError(r, toAPIError(serverErr), fmt.Errorf("%d jobs of the batch failed server-side, the first: %w", serverErrs, serverErr))
	}

	b := make([]byte, 0, 16+len(results)*96)
	b = append(b, `{"results":[`...)
	for i, res := range results {
		if i > 0 {
			b = append(b, ',')
		}
		if res.Err != nil {
			b = append(b, '{')
			b = appendErrorFields(b, s.apiError(r, res.Err))
			b = append(b, '}')
			continue
		}
		b = appendPushed(b, res.Job, res.Replaced)
	}
	b = append(b, "]}"...)
	writeRaw(w, http.StatusOK, b)
	return nil
}

// cmpErr returns a when it is set, else b.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// getJob serves GET /v1/jobs/{id}: the job, without its lease; 404 when
// unknown.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	job, err := s.engine.Get(r.Context(), id)
	if err != nil {
		return describe(err, core.ErrNotFound, "job %q not found", id)
	}
	writeRaw(w, http.StatusOK, appendJob(nil, job))
	return nil
}

// cancelJob serves DELETE /v1/jobs/{id}: 204 cancelled; 404 unknown or
// already finished; 409 while reserved.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.engine.Cancel(r.Context(), id); err != nil {
		return describe(err, core.ErrNotFound, "job %q not found or already finished", id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// jobPath is the URL path of a job.
func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }
