package httptransport

import (
	"cmp"
	"net/http"

	"github.com/delayq/delayq/keyring"
)

// rekeyLimitDefault is the jobs a page of POST /v1/rekey reads when the
// request names no limit.
const rekeyLimitDefault = 500

// rekeyRequest is the wire form of POST /v1/rekey's optional body.
type rekeyRequest struct {
	After string `json:"after"`
	Limit int    `json:"limit"`
}

// rekeyAnswer is the wire form of what a page of rekey did.
type rekeyAnswer struct {
	Scanned   int    `json:"scanned"`
	Rekeyed   int    `json:"rekeyed"`
	Changed   int    `json:"changed"`
	Records   int    `json:"records"`
	NextAfter string `json:"next_after,omitempty"`
}

// rekey serves POST /v1/rekey: a page of re-encryption of the store's
// data with the current key (service.Rekey) from after, of limit jobs
// (rekeyLimitDefault when absent), answered 200 with what it did and
// next_after while the pass goes on. 501 when encryption at rest is off
// or the backend cannot rewrite a job's body.
func (s *Server) rekey(w http.ResponseWriter, r *http.Request) error {
	var req rekeyRequest
	if err := readSmall(w, r, &req, true); err != nil {
		return err
	}
	page, err := s.svc.Rekey(r.Context(), &keyring.RekeyParams{After: req.After, Limit: cmp.Or(req.Limit, rekeyLimitDefault)})
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, rekeyAnswer{Scanned: page.Scanned, Rekeyed: page.Rekeyed, Changed: page.Changed,
		Records: page.Records, NextAfter: page.Next})
	return nil
}
