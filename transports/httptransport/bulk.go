package httptransport

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
)

// bulkRequest is the wire form of the filter of a bulk operation; an
// absent field does not filter.
type bulkRequest struct {
	ErrorContains string          `json:"error_contains"`
	Key           string          `json:"key"`
	Since         json.RawMessage `json:"since"`
	Until         json.RawMessage `json:"until"`
	State         string          `json:"state"`
	Limit         int             `json:"limit"`
	DryRun        bool            `json:"dry_run"`
	After         string          `json:"after"`
}

// requeueDead serves POST /v1/topics/{topic}/dead/requeue with an optional
// filter (bulkRequest): it requeues the topic's dead jobs the filter
// matches (service.RequeueDead) and answers 200 with the bulk answer.
func (s *Server) requeueDead(w http.ResponseWriter, r *http.Request) error {
	return s.serveBulk(w, r, s.svc.RequeueDead)
}

// cancelJobs serves POST /v1/topics/{topic}/jobs/cancel with an optional
// filter (bulkRequest): it cancels the topic's scheduled and ready jobs
// the filter matches (service.CancelJobs) and answers 200 with the bulk
// answer.
func (s *Server) cancelJobs(w http.ResponseWriter, r *http.Request) error {
	return s.serveBulk(w, r, s.svc.CancelJobs)
}

// serveBulk decodes the filter of a bulk route, runs op and answers
// {"count", "dry_run", "sample": [jobs as listings show them],
// "next_after"} (next_after only when the operation stopped before the
// end).
func (s *Server) serveBulk(w http.ResponseWriter, r *http.Request, op func(context.Context, *service.BulkFilter) (service.BulkResult, error)) error {
	var req bulkRequest
	if err := readSmall(w, r, &req, true); err != nil {
		return err
	}
	f := service.BulkFilter{Topic: r.PathValue("topic"), ErrorContains: req.ErrorContains, Key: req.Key,
		State: core.State(req.State), Limit: req.Limit, DryRun: req.DryRun, After: req.After}
	var err error
	if f.Since, _, err = parseTime("since", req.Since); err != nil {
		return err
	}
	if f.Until, _, err = parseTime("until", req.Until); err != nil {
		return err
	}
	res, err := op(r.Context(), &f)
	if err != nil {
		return err
	}
	b := strconv.AppendInt(append(make([]byte, 0, 1024), `{"count":`...), int64(res.Count), 10)
	b = strconv.AppendBool(append(b, `,"dry_run":`...), res.DryRun)
	b = append(b, `,"sample":[`...)
	for i, j := range res.Sample {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJob(b, j)
	}
	b = append(b, ']')
	if res.Next != "" {
		b = appendString(append(b, `,"next_after":`...), res.Next)
	}
	writeRaw(w, http.StatusOK, append(b, '}'))
	return nil
}
