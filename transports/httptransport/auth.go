package httptransport

import (
	"context"
	"net/http"
	"strings"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// routeOps maps each route pattern to its operation, whose entry in the
// service's table says what it asks of a token. A pattern not listed needs
// admin; TestEveryRouteHasAnOp keeps the list whole.
var routeOps = map[string]service.Op{
	"GET /healthz":                     service.OpHealth,
	"GET /readyz":                      service.OpHealth,
	"GET /metrics":                     service.OpMetrics, // OpMetricsProtected under Config.ProtectMetrics
	"GET /v1/openapi.json":             service.OpOpenAPI,
	"GET /ui/":                         service.OpUI,
	"GET /ui":                          service.OpUI, // redirects to /ui/
	"GET /{$}":                         service.OpUI, // the root, redirects to /ui/
	"POST /v1/jobs":                    service.OpPush,
	"POST /v1/jobs/batch":              service.OpPushBatch,
	"PUT /v1/jobs/{id}":                service.OpReplace,
	"GET /v1/jobs/{id}":                service.OpGetJob,
	"DELETE /v1/jobs/{id}":             service.OpCancelJob,
	"POST /v1/jobs/{id}/ack":           service.OpAck,
	"POST /v1/jobs/{id}/nack":          service.OpNack,
	"POST /v1/jobs/{id}/touch":         service.OpTouch,
	"POST /v1/acks":                    service.OpAckBatch,
	"POST /v1/nacks":                   service.OpNackBatch,
	"POST /v1/jobs/{id}/requeue":       service.OpRequeue,
	"POST /v1/topics/{topic}/claim":    service.OpClaim,
	"GET /v1/topics/{topic}/subscribe": service.OpSubscribe,
	"GET /v1/topics":                   service.OpListTopics,
	"GET /v1/topics/{topic}":           service.OpGetTopic,
	"PUT /v1/topics/{topic}":           service.OpPutTopic,
	"PATCH /v1/topics/{topic}":         service.OpUpdateTopic,
	"DELETE /v1/topics/{topic}":        service.OpDeleteTopic,
	"POST /v1/topics/{topic}/pause":    service.OpPauseTopic,
	"POST /v1/topics/{topic}/resume":   service.OpResumeTopic,
	"GET /v1/topics/{topic}/dead":      service.OpListDead,
	"GET /v1/topics/{topic}/jobs":      service.OpFindJobs, // and ListJobs by ?state=, of the same scopes
	"DELETE /v1/topics/{topic}/jobs":   service.OpCancelByKey,
	"GET /v1/schedules":                service.OpListSchedules,
	"GET /v1/schedules/{name}":         service.OpGetSchedule,
	"PUT /v1/schedules/{name}":         service.OpPutSchedule,
	"DELETE /v1/schedules/{name}":      service.OpDeleteSchedule,
	"GET /v1/export":                   service.OpExport,
	"POST /v1/import":                  service.OpImport,
	"GET /v1/backup":                   service.OpBackup,
	"POST /v1/rekey":                   service.OpRekey,
	"GET /v1/whoami":                   service.OpWhoami,
	"GET /v1/stats":                    service.OpStats,
	"GET /v1/version":                  service.OpVersion,

	// The bulk operations of a topic's jobs by a filter.
	"POST /v1/topics/{topic}/jobs/cancel":  service.OpCancelJobs,
	"POST /v1/topics/{topic}/dead/requeue": service.OpRequeueDead,
	"POST /v1/schedules/{name}/run":        service.OpRunSchedule,
}

// Op returns the operation of the route of pattern, as the server checks
// it: "" for a pattern without one (which needs admin) and for a pattern
// mounted with HandleOwnAuth, whose handler checks its own calls.
func (s *Server) Op(pattern string) service.Op {
	if _, own := s.ownAuth.Load(pattern); own {
		return ""
	}
	if pattern == "GET /metrics" && s.protectMetrics {
		return service.OpMetricsProtected
	}
	return routeOps[pattern]
}

// IdentityFrom returns the token that authenticated the request of ctx,
// for a handler mounted with Handle that serves each token its own view
// (GET /metrics under Config.ProtectMetrics): nil when the server has no
// tokens or the route is open. It is service.IdentityFrom.
func IdentityFrom(ctx context.Context) *auth.Identity { return service.IdentityFrom(ctx) }

// authenticate checks the request's bearer token for the route of pattern
// ("" for a path without a route, which needs any valid token) and, with
// the service, whether the token may do the route's operation. It returns
// the request with the identity in its context (service.WithIdentity), or
// an error wrapping wire.ErrUnauthenticated (with WWW-Authenticate set on
// w) or wire.ErrPermissionDenied. Without tokens every request passes as
// is; so do open routes and those mounted with HandleOwnAuth.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, pattern string) (*http.Request, error) {
	if s.tokens.Len() == 0 {
		return r, nil
	}
	op := s.Op(pattern)
	if _, own := s.ownAuth.Load(pattern); own || op.Open() {
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
	if pattern != "" {
		if err := s.svc.Authorize(id, op); err != nil {
			return nil, err
		}
	}
	return r.WithContext(service.WithIdentity(r.Context(), id)), nil
}

// guard wraps a handler mounted with Handle, which does not go through the
// service, so that the service checks the topic of its path (the {topic}
// or the topic of the job {id}) before it runs.
func (s *Server) guard(pattern string, h http.Handler) http.Handler {
	var check func(r *http.Request) error
	switch {
	case strings.Contains(pattern, "{topic}"):
		check = func(r *http.Request) error { return s.svc.AllowTopic(r.Context(), r.PathValue("topic")) }
	case strings.Contains(pattern, "{id}"):
		check = func(r *http.Request) error { return s.svc.AllowJob(r.Context(), r.PathValue("id")) }
	default:
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := check(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
