package httptransport

import (
	"net/http"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/service"
)

// whoamiView is the answer of GET /v1/whoami.
type whoamiView struct {
	// Auth is true when the server has tokens, so that requests need one.
	Auth bool `json:"auth"`
	// Scopes are the scopes the request's token grants (admin grants push
	// and consume too, so they are listed with it); every scope without
	// tokens.
	Scopes []auth.Scope `json:"scopes"`
	// Topics are the token's topic patterns; absent when it may use every
	// topic.
	Topics []string `json:"topics,omitempty"`
}

// whoami serves GET /v1/whoami: what the request's token may do, so that a
// client such as the web UI shows only the actions that would be allowed.
// Any valid token may ask; without tokens it answers every scope.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	v := whoamiView{Auth: s.tokens.Len() > 0, Scopes: []auth.Scope{}}
	id := service.IdentityFrom(r.Context())
	for _, sc := range []auth.Scope{auth.ScopePush, auth.ScopeConsume, auth.ScopeAdmin} {
		if id == nil || id.HasScope(sc) {
			v.Scopes = append(v.Scopes, sc)
		}
	}
	if id != nil {
		v.Topics = id.Topics()
	}
	s.writeJSON(w, r, http.StatusOK, v)
	return nil
}
