package httptransport

import (
	"net/http"
	"net/url"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// createJob serves POST /v1/jobs: 201 with the job's id, topic, run_at and
// state; 409 with the existing job when the id names an unfinished job; 200
// with "replaced" when the topic's unique keys replaced the key's job.
func (s *Server) createJob(w http.ResponseWriter, r *http.Request) error {
	p, err := s.readJobRequest(w, r)
	if err != nil {
		return err
	}
	res, err := s.svc.Push(r.Context(), p)
	if err != nil {
		return err
	}
	writePushed(w, res)
	return nil
}

// writePushed answers a push of one job: 201 with Location, 200 when it
// replaced a unique key's job.
func writePushed(w http.ResponseWriter, res core.PushResult) {
	status := http.StatusCreated
	if res.Replaced {
		status = http.StatusOK
	}
	w.Header().Set("Location", jobPath(res.Job.ID))
	writeRaw(w, status, appendPushed(nil, res.Job, res.Replaced))
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
	job, replaced, err := s.svc.Replace(r.Context(), p)
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
	p, err := wire.DecodeJob(data)
	release()
	if err != nil {
		return nil, err
	}
	p.TraceParent = wire.TraceParent(r.Header)
	return p, nil
}

// createBatch serves POST /v1/jobs/batch: 200 with one result per job, in
// order, each job succeeding or failing on its own (service.PushBatch). An
// empty batch is 400, a batch over the engine's MaxBatch 413. When every
// job failed with a server-side error, the batch is answered with that
// error instead.
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
	tp := wire.TraceParent(r.Header)
	results, err := s.svc.PushBatch(r.Context(), max(len(decoded), len(raw)), func(i int) (p *core.PushParams, err error) {
		if decoded != nil {
			p, err = decoded[i].Params()
		} else {
			p, err = wire.DecodeJob(raw[i])
		}
		if err == nil {
			p.TraceParent = tp
		}
		return p, err
	})
	if err != nil {
		return err
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

// getJob serves GET /v1/jobs/{id}: the job, without its lease, with its
// trail; 404 when unknown.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	job, err := s.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, appendJobTrail(nil, job))
	return nil
}

// cancelJob serves DELETE /v1/jobs/{id}: 204 cancelled; 404 unknown or
// already finished; 409 while reserved, unless ?running=true.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) error {
	p := &core.CancelJobParams{ID: r.PathValue("id")}
	switch running := r.URL.Query().Get("running"); running {
	case "", "false":
	case "true":
		p.Running = true
	default:
		return core.Invalid("running", "running must be true or false, not %q", running)
	}
	if err := s.svc.Cancel(r.Context(), p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// jobPath is the URL path of a job.
func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }
