package httptransport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// routeAccess is what a route asks of a token: open routes need none, the
// others one of scopes.
type routeAccess struct {
	open   bool
	scopes []auth.Scope
}

// Route patterns that decide access. Patterns not listed need admin.
var routeAccessTable = map[string]routeAccess{
	"GET /healthz":                     {open: true},
	"GET /readyz":                      {open: true},
	"GET /metrics":                     {open: true}, // unless Config.ProtectMetrics
	"GET /v1/openapi.json":             {open: true}, // documentation, as in the repository
	"POST /v1/jobs":                    {scopes: []auth.Scope{auth.ScopePush}},
	"POST /v1/jobs/batch":              {scopes: []auth.Scope{auth.ScopePush}},
	"PUT /v1/jobs/{id}":                {scopes: []auth.Scope{auth.ScopePush}},
	"DELETE /v1/jobs/{id}":             {scopes: []auth.Scope{auth.ScopePush}},
	"GET /v1/jobs/{id}":                {scopes: []auth.Scope{auth.ScopePush, auth.ScopeConsume}},
	"GET /v1/topics/{topic}/jobs":      {scopes: []auth.Scope{auth.ScopePush, auth.ScopeConsume}},
	"DELETE /v1/topics/{topic}/jobs":   {scopes: []auth.Scope{auth.ScopePush}},
	"POST /v1/jobs/{id}/ack":           {scopes: []auth.Scope{auth.ScopeConsume}},
	"POST /v1/jobs/{id}/nack":          {scopes: []auth.Scope{auth.ScopeConsume}},
	"POST /v1/jobs/{id}/touch":         {scopes: []auth.Scope{auth.ScopeConsume}},
	"POST /v1/acks":                    {scopes: []auth.Scope{auth.ScopeConsume}},
	"POST /v1/nacks":                   {scopes: []auth.Scope{auth.ScopeConsume}},
	"POST /v1/topics/{topic}/claim":    {scopes: []auth.Scope{auth.ScopeConsume}},
	"GET /v1/topics/{topic}/subscribe": {scopes: []auth.Scope{auth.ScopeConsume}},
	// Reading topics and the live statistics is open to every token, for
	// the web UI's read-only view; changing them needs admin.
	"GET /v1/topics":         {scopes: anyScope},
	"GET /v1/topics/{topic}": {scopes: anyScope},
	"GET /v1/stats":          {scopes: anyScope},
	"GET /v1/whoami":         {scopes: anyScope},
	// The web UI's pages are static: their data comes through the API.
	"GET /ui/": {open: true},
	"GET /ui":  {open: true}, // redirects to /ui/
}

// anyScope is what a route open to every valid token asks.
var anyScope = []auth.Scope{auth.ScopePush, auth.ScopeConsume, auth.ScopeAdmin}

// access returns what the route of pattern asks of a token.
func (s *Server) access(pattern string) routeAccess {
	if _, own := s.ownAuth.Load(pattern); own {
		return routeAccess{open: true} // the handler authenticates
	}
	a, ok := routeAccessTable[pattern]
	if !ok {
		return routeAccess{scopes: []auth.Scope{auth.ScopeAdmin}}
	}
	if pattern == "GET /metrics" && s.protectMetrics {
		return routeAccess{scopes: []auth.Scope{auth.ScopeAdmin}}
	}
	return a
}

// identityKey is the context key of the request's *auth.Identity.
type identityKey struct{}

// IdentityFrom returns the token that authenticated the request of ctx,
// for a handler mounted with Handle that serves each token its own view
// (GET /metrics under Config.ProtectMetrics): nil when the server has no
// tokens or the route is open.
func IdentityFrom(ctx context.Context) *auth.Identity { return identityFrom(ctx) }

// identityFrom returns the request's authenticated token, nil when the
// server has no tokens or the route is open.
func identityFrom(ctx context.Context) *auth.Identity {
	id, _ := ctx.Value(identityKey{}).(*auth.Identity)
	return id
}

// authenticate checks the request's bearer token against the route of
// pattern ("" for a path without a route, which needs any valid token). It
// returns the request with the identity in its context, or an error wrapping
// wire.ErrUnauthenticated (with WWW-Authenticate set on w) or
// wire.ErrPermissionDenied. Without tokens every request passes as is.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, pattern string) (*http.Request, error) {
	if s.tokens.Len() == 0 {
		return r, nil
	}
	a := s.access(pattern)
	if a.open {
		return r, nil
	}
	scheme, secret, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	secret = strings.TrimSpace(secret)
	if !strings.EqualFold(scheme, "Bearer") || secret == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="delayq"`)
		return nil, wire.WithMessage("a bearer token is required: Authorization: Bearer <token>", wire.ErrUnauthenticated)
	}
	id, ok := s.tokens.Authenticate(secret)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="delayq", error="invalid_token"`)
		return nil, wire.WithMessage("the bearer token is not valid", wire.ErrUnauthenticated)
	}
	if pattern != "" && !id.HasAnyScope(a.scopes...) {
		s.log.Info("httptransport: permission denied", "token", id.Name, "method", r.Method, "path", r.URL.Path, "need", a.scopes)
		return nil, wire.WithMessage(fmt.Sprintf("token %q lacks the %s scope for %s", id.Name, scopeList(a.scopes), pattern), wire.ErrPermissionDenied)
	}
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, id)), nil
}

// scopeList writes scopes as "push or consume".
func scopeList(scopes []auth.Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, " or ")
}

// allowTopic returns nil when the request's token may use topic (or the
// server has no tokens), else an error wrapping wire.ErrPermissionDenied.
func (s *Server) allowTopic(r *http.Request, topic string) error {
	id := identityFrom(r.Context())
	if id == nil || id.AllowsTopic(topic) {
		return nil
	}
	s.log.Info("httptransport: permission denied", "token", id.Name, "method", r.Method, "path", r.URL.Path, "topic", topic)
	return wire.WithMessage(fmt.Sprintf("token %q may not use topic %q", id.Name, topic), wire.ErrPermissionDenied)
}

// allowPathTopics checks the topic a route names: the {topic} of its path,
// or, for a route given a job {id}, the topic of that job when it exists (a
// job that does not exist is left to the handler, which answers 404 or
// creates it). Only tokens restricted to some topics pay for the job read.
func (s *Server) allowPathTopics(r *http.Request, pattern string) error {
	id := identityFrom(r.Context())
	if id == nil || !id.Restricted() {
		return nil
	}
	switch {
	case strings.Contains(pattern, "{topic}"):
		return s.allowTopic(r, r.PathValue("topic"))
	case strings.Contains(pattern, "{id}"):
		return s.allowJob(r, r.PathValue("id"))
	}
	return nil
}

// allowJob returns nil when the request's token may use the topic of the
// stored job jobID, when no such job exists (left to the caller, which
// answers 404 or creates it), or when the token is not restricted to some
// topics, which skips the read. Otherwise it returns an error wrapping
// wire.ErrPermissionDenied, or the store's error. The batch routes check
// each item with it, as the routes given a job id check their path.
func (s *Server) allowJob(r *http.Request, jobID string) error {
	id := identityFrom(r.Context())
	if id == nil || !id.Restricted() {
		return nil
	}
	job, err := s.engine.Get(r.Context(), jobID)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if id.AllowsTopic(job.Topic) {
		return nil
	}
	// The message names the job, which the caller gave, and not its
	// topic, which is not the caller's to learn.
	s.log.Info("httptransport: permission denied", "token", id.Name, "method", r.Method, "path", r.URL.Path, "topic", job.Topic)
	return wire.WithMessage(fmt.Sprintf("token %q may not use job %q", id.Name, job.ID), wire.ErrPermissionDenied)
}

// allowIntake takes n jobs from the intake quota of the request's token,
// as wire.AllowIntake does: over the quota a *wire.RateLimitError (429
// rate_limited with Retry-After); more jobs than the token's burst a
// *core.FieldError wrapping core.ErrTooLarge on jobs.
func (s *Server) allowIntake(r *http.Request, n int) error {
	id := identityFrom(r.Context())
	err := wire.AllowIntake(id, n)
	if _, limited := errors.AsType[*wire.RateLimitError](err); limited {
		s.log.Info("httptransport: intake quota exceeded", "token", id.Name, "method", r.Method, "path", r.URL.Path, "jobs", n, "err", err)
	}
	return err
}

// guard wraps a handler mounted with Handle so that it checks the topic of
// its path before it runs.
func (s *Server) guard(pattern string, h http.Handler) http.Handler {
	if !strings.Contains(pattern, "{topic}") && !strings.Contains(pattern, "{id}") {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.allowPathTopics(r, pattern); err != nil {
			s.writeError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
