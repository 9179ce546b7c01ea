package httptransport

import (
	"context"
	"net/http"
	"time"

	"github.com/delayq/delayq/core"
)

// releaseTimeout bounds giving back the jobs of a claim whose client left.
const releaseTimeout = 5 * time.Second

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
	jobs, err := s.engine.Claim(r.Context(), &core.ClaimJobsParams{Topic: r.PathValue("topic"), Max: max, Wait: wait, Via: core.ViaPull})
	if err != nil {
		return err
	}
	if err := r.Context().Err(); err != nil && len(jobs) > 0 {
		// The client left while the jobs were claimed: hand them out again
		// now rather than when their leases expire.
		s.release(r, jobs)
		return err
	}
	writeJobList(w, jobs, appendDelivery, nil)
	return nil
}

// release hands the deliveries of jobs, never sent, back at once with their
// attempts (core.Engine.Release).
func (s *Server) release(r *http.Request, jobs []*core.Job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), releaseTimeout)
	defer cancel()
	for _, j := range jobs {
		err := s.engine.Release(ctx, &core.ReleaseParams{ID: j.ID, Lease: j.Lease, Error: "claim abandoned: the client went away"})
		if err != nil {
			s.log.Warn("httptransport: releasing an abandoned claim failed", "id", j.ID, "err", err)
		}
	}
}

// ackJob serves POST /v1/jobs/{id}/ack with {"lease": "..."}: 204; 409 when
// the lease was lost.
func (s *Server) ackJob(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req leaseRequest
	if err := readSmall(w, r, &req, false); err != nil {
		return err
	}
	if err := s.engine.Ack(r.Context(), &core.AckJobParams{ID: id, Lease: req.Lease}); err != nil {
		return describeLease(err, id)
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
	if err := s.engine.Nack(r.Context(), p); err != nil {
		return describeLease(err, id)
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
	job, err := s.engine.Touch(r.Context(), &core.TouchJobParams{ID: id, Lease: req.Lease})
	if err != nil {
		return describeLease(err, id)
	}
	s.writeJSON(w, r, http.StatusOK, touchView{LeaseExpiresAt: wireTime(job.LeaseExpiresAt)})
	return nil
}

// requeueJob serves POST /v1/jobs/{id}/requeue: a dead job is ready again
// with a fresh attempt count. 204; 404 unknown; 409 when not dead.
func (s *Server) requeueJob(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.engine.Requeue(r.Context(), id); err != nil {
		return describe(err, core.ErrNotFound, "job %q not found", id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// describeLease gives the errors of lease operations clear messages.
func describeLease(err error, id string) error {
	err = describe(err, core.ErrLeaseLost, "the lease of job %q is lost: the delivery expired, was finished or was handed out again", id)
	return describe(err, core.ErrNotFound, "job %q not found", id)
}

// readSmall reads and decodes a request without a job body. With optional,
// an empty body leaves dst as it is.
func readSmall(w http.ResponseWriter, r *http.Request, dst any, optional bool) error {
	data, release, err := readBody(w, r, smallRequestBytes)
	if err != nil {
		return err
	}
	defer release()
	if optional && len(trimJSONSpace(data)) == 0 {
		return nil
	}
	return decodeObject(data, "", dst)
}
