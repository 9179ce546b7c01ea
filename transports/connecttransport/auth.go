package connecttransport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/gen/delayq/v1/delayqv1connect"
	"github.com/delayq/delayq/transports/wire"
)

// procedureScopes are the scopes of each procedure of the service, those of
// the HTTP route it mirrors (docs/api.md's "Access: tokens and scopes").
// Procedures of the service not listed need admin; procedures of other
// services (reflection) a valid token of any scope, as the HTTP API's paths
// without a route.
var procedureScopes = map[string][]auth.Scope{
	delayqv1connect.DelayqServicePushProcedure:        {auth.ScopePush},
	delayqv1connect.DelayqServicePushBatchProcedure:   {auth.ScopePush},
	delayqv1connect.DelayqServiceReplaceProcedure:     {auth.ScopePush},
	delayqv1connect.DelayqServiceCancelJobProcedure:   {auth.ScopePush},
	delayqv1connect.DelayqServiceCancelByKeyProcedure: {auth.ScopePush},
	delayqv1connect.DelayqServiceGetJobProcedure:      {auth.ScopePush, auth.ScopeConsume},
	delayqv1connect.DelayqServiceFindJobsProcedure:    {auth.ScopePush, auth.ScopeConsume},
	delayqv1connect.DelayqServiceListJobsProcedure:    {auth.ScopePush, auth.ScopeConsume},
	delayqv1connect.DelayqServiceClaimProcedure:       {auth.ScopeConsume},
	delayqv1connect.DelayqServiceSubscribeProcedure:   {auth.ScopeConsume},
	delayqv1connect.DelayqServiceAckProcedure:         {auth.ScopeConsume},
	delayqv1connect.DelayqServiceNackProcedure:        {auth.ScopeConsume},
	delayqv1connect.DelayqServiceTouchProcedure:       {auth.ScopeConsume},
	delayqv1connect.DelayqServiceAckBatchProcedure:    {auth.ScopeConsume},
	delayqv1connect.DelayqServiceNackBatchProcedure:   {auth.ScopeConsume},
	// Reading topics is open to every token (its own topics), as over HTTP.
	delayqv1connect.DelayqServiceGetTopicProcedure:   {auth.ScopePush, auth.ScopeConsume, auth.ScopeAdmin},
	delayqv1connect.DelayqServiceListTopicsProcedure: {auth.ScopePush, auth.ScopeConsume, auth.ScopeAdmin},
}

// servicePrefix starts the procedures of the service.
const servicePrefix = "/" + delayqv1connect.DelayqServiceName + "/"

// scopesOf returns the scopes a call of procedure needs, nil for any.
func scopesOf(procedure string) []auth.Scope {
	if s, ok := procedureScopes[procedure]; ok {
		return s
	}
	if strings.HasPrefix(procedure, servicePrefix) {
		return []auth.Scope{auth.ScopeAdmin}
	}
	return nil
}

// identityKey is the context key of the call's *auth.Identity.
type identityKey struct{}

// identityFrom returns the call's authenticated token, nil when the server
// has no tokens.
func identityFrom(ctx context.Context) *auth.Identity {
	id, _ := ctx.Value(identityKey{}).(*auth.Identity)
	return id
}

// authenticate checks the bearer token of a call of procedure, given its
// authorization metadata, and returns ctx with the identity. Errors wrap
// wire.ErrUnauthenticated (no valid token) or wire.ErrPermissionDenied (a
// token without the procedure's scope). Without tokens every call passes.
func (s *Server) authenticate(ctx context.Context, procedure, authorization string) (context.Context, error) {
	if s.tokens.Len() == 0 {
		return ctx, nil
	}
	scheme, secret, _ := strings.Cut(authorization, " ")
	secret = strings.TrimSpace(secret)
	if !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return nil, wire.WithMessage("a bearer token is required: metadata authorization: Bearer <token>", wire.ErrUnauthenticated)
	}
	id, ok := s.tokens.Authenticate(secret)
	if !ok {
		return nil, wire.WithMessage("the bearer token is not valid", wire.ErrUnauthenticated)
	}
	if scopes := scopesOf(procedure); scopes != nil && !id.HasAnyScope(scopes...) {
		s.log.Info("connecttransport: permission denied", "token", id.Name, "procedure", procedure, "need", scopes)
		return nil, wire.WithMessage(fmt.Sprintf("token %q lacks the %s scope for %s", id.Name, scopeList(scopes), procedure), wire.ErrPermissionDenied)
	}
	return context.WithValue(ctx, identityKey{}, id), nil
}

// authenticateFirst checks the token of each call before h reads its body,
// so that a call without a valid token or scope costs no read,
// decompression or decoding of what it sent; the identity goes to the
// handlers in the request's context. A refusal is written in the call's
// protocol (gRPC, gRPC-Web or Connect).
func (s *Server) authenticateFirst(h http.Handler) http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, err := s.authenticate(r.Context(), r.URL.Path, r.Header.Get("Authorization"))
		if err != nil {
			_ = errs.Write(w, r, s.toConnectError(r.Context(), r.URL.Path, err))
			return
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// authenticated returns nil when the call's context holds its identity, or
// the server has no tokens: a guard, in the interceptor, that no handler
// runs without authenticateFirst.
func (s *Server) authenticated(ctx context.Context) error {
	if s.tokens.Len() == 0 || identityFrom(ctx) != nil {
		return nil
	}
	return wire.WithMessage("a bearer token is required: metadata authorization: Bearer <token>", wire.ErrUnauthenticated)
}

// scopeList writes scopes as "push or consume".
func scopeList(scopes []auth.Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, " or ")
}

// allowTopic returns nil when the call's token may use topic (or the
// server has no tokens), else an error wrapping wire.ErrPermissionDenied.
func (s *Server) allowTopic(ctx context.Context, topic string) error {
	id := identityFrom(ctx)
	if id == nil || id.AllowsTopic(topic) {
		return nil
	}
	s.log.Info("connecttransport: permission denied", "token", id.Name, "topic", topic)
	return wire.WithMessage(fmt.Sprintf("token %q may not use topic %q", id.Name, topic), wire.ErrPermissionDenied)
}

// allowJob returns nil when the call's token may use the topic of the
// stored job jobID, when no such job exists (left to the caller, which
// answers NotFound or creates it), or when the token is not restricted to
// some topics, which skips the read. Otherwise an error wrapping
// wire.ErrPermissionDenied, or the store's error.
func (s *Server) allowJob(ctx context.Context, jobID string) error {
	id := identityFrom(ctx)
	if id == nil || !id.Restricted() {
		return nil
	}
	job, err := s.engine.Get(ctx, jobID)
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
	s.log.Info("connecttransport: permission denied", "token", id.Name, "topic", job.Topic)
	return wire.WithMessage(fmt.Sprintf("token %q may not use job %q", id.Name, job.ID), wire.ErrPermissionDenied)
}

// allowIntake takes n jobs from the intake quota of the call's token (see
// wire.AllowIntake).
func (s *Server) allowIntake(ctx context.Context, n int) error {
	id := identityFrom(ctx)
	err := wire.AllowIntake(id, n)
	if _, limited := errors.AsType[*wire.RateLimitError](err); limited {
		s.log.Info("connecttransport: intake quota exceeded", "token", id.Name, "jobs", n, "err", err)
	}
	return err
}
