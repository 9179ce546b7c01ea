package httptransport

import (
	"net/http"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// claim serves POST /v1/topics/{topic}/claim with an optional body
// {"max": 10, "wait": "20s"} (defaults: max 1, wait 0): it waits up to wait
// for due jobs and answers 200 {"jobs": [delivery, ...]}, an empty list when
// the wait ran out.
func (s *Server) claim(w http.ResponseWriter, r *http.Request) error {
	var req claimRequest
	if err := readSmall(w, r, &req, true); err != nil {
		return err
	}
	max := 1
	if req.Max != nil {
		max = *req.Max
	}
	wait, _, err := parseDuration("wait", req.Wait)
	if err != nil {
		return err
	}
	if wait > 0 {
		// The answer comes after the wait (the engine refuses more than
		// core.ClaimWaitLimit). A socket deadline: the real clock.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(min(wait, core.ClaimWaitLimit) + s.writeTimeout))
	}
	jobs, err := s.svc.Claim(r.Context(), &core.ClaimJobsParams{Topic: r.PathValue("topic"), Max: max, Wait: wait, Via: core.ViaPull,
		Consumer: r.RemoteAddr})
	if err != nil {
		return err
	}
	writeJobList(w, jobs, appendDelivery, nil)
	return nil
}

// ackJob serves POST /v1/jobs/{id}/ack with {"lease": "..."}: 204; 409 when
// the lease was lost.
func (s *Server) ackJob(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req leaseRequest
	if err := readSmall(w, r, &req, false); err != nil {
		return err
	}
	if err := s.svc.Ack(r.Context(), &core.AckJobParams{ID: id, Lease: req.Lease}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// nackJob serves POST /v1/jobs/{id}/nack with {"lease", "delay", "error"}:
// the attempt failed; the job is retried after delay (default: the topic's
// backoff) or goes dead. 204; 409 when the lease was lost.
func (s *Server) nackJob(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req nackRequest
	if err := readSmall(w, r, &req, false); err != nil {
		return err
	}
	p := &core.NackParams{ID: id, Lease: req.Lease, Error: req.Error}
	if d, ok, err := parseDuration("delay", req.Delay); err != nil {
		return err
	} else if ok {
		p.Delay = &d
	}
	if err := s.svc.Nack(r.Context(), p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// touchJob serves POST /v1/jobs/{id}/touch with {"lease": "..."}: the lease
// is extended by the job's ttr; 200 {"lease_expires_at"}; 409 when the
// lease was lost.
func (s *Server) touchJob(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req leaseRequest
	if err := readSmall(w, r, &req, false); err != nil {
		return err
	}
	job, err := s.svc.Touch(r.Context(), &core.TouchJobParams{ID: id, Lease: req.Lease})
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, touchView{LeaseExpiresAt: wireTime(job.LeaseExpiresAt)})
	return nil
}

// requeueJob serves POST /v1/jobs/{id}/requeue: a dead job is ready again
// with a fresh attempt count. 204; 404 unknown; 409 when not dead.
func (s *Server) requeueJob(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Requeue(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// readSmall reads and decodes a request without a job body. With optional,
// an empty body leaves dst as it is.
func readSmall(w http.ResponseWriter, r *http.Request, dst any, optional bool) error {
	data, release, err := readBody(w, r, wire.SmallRequestBytes)
	if err != nil {
		return err
	}
	defer release()
	if optional && len(trimJSONSpace(data)) == 0 {
		return nil
	}
	return wire.DecodeObject(data, "", dst)
}
