package connecttransport

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/gen/delayq/v1/delayqv1connect"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// procedureOps maps each procedure of the service to its operation, whose
// entry in the service's table says what it asks of a token. A procedure
// of the service not listed needs admin; procedures of other services
// (reflection) are service.OpReflection. TestEveryProcedureHasAnOp keeps
// the list whole.
var procedureOps = map[string]service.Op{
	delayqv1connect.DelayqServicePushProcedure:           service.OpPush,
	delayqv1connect.DelayqServicePushBatchProcedure:      service.OpPushBatch,
	delayqv1connect.DelayqServiceReplaceProcedure:        service.OpReplace,
	delayqv1connect.DelayqServiceGetJobProcedure:         service.OpGetJob,
	delayqv1connect.DelayqServiceCancelJobProcedure:      service.OpCancelJob,
	delayqv1connect.DelayqServiceFindJobsProcedure:       service.OpFindJobs,
	delayqv1connect.DelayqServiceListJobsProcedure:       service.OpListJobs,
	delayqv1connect.DelayqServiceCancelByKeyProcedure:    service.OpCancelByKey,
	delayqv1connect.DelayqServiceClaimProcedure:          service.OpClaim,
	delayqv1connect.DelayqServiceSubscribeProcedure:      service.OpSubscribe,
	delayqv1connect.DelayqServiceAckProcedure:            service.OpAck,
	delayqv1connect.DelayqServiceNackProcedure:           service.OpNack,
	delayqv1connect.DelayqServiceTouchProcedure:          service.OpTouch,
	delayqv1connect.DelayqServiceAckBatchProcedure:       service.OpAckBatch,
	delayqv1connect.DelayqServiceNackBatchProcedure:      service.OpNackBatch,
	delayqv1connect.DelayqServiceRequeueProcedure:        service.OpRequeue,
	delayqv1connect.DelayqServiceListDeadProcedure:       service.OpListDead,
	delayqv1connect.DelayqServiceGetTopicProcedure:       service.OpGetTopic,
	delayqv1connect.DelayqServiceListTopicsProcedure:     service.OpListTopics,
	delayqv1connect.DelayqServicePutTopicProcedure:       service.OpPutTopic,
	delayqv1connect.DelayqServiceUpdateTopicProcedure:    service.OpUpdateTopic,
	delayqv1connect.DelayqServiceDeleteTopicProcedure:    service.OpDeleteTopic,
	delayqv1connect.DelayqServicePauseTopicProcedure:     service.OpPauseTopic,
	delayqv1connect.DelayqServiceResumeTopicProcedure:    service.OpResumeTopic,
	delayqv1connect.DelayqServicePutScheduleProcedure:    service.OpPutSchedule,
	delayqv1connect.DelayqServiceGetScheduleProcedure:    service.OpGetSchedule,
	delayqv1connect.DelayqServiceListSchedulesProcedure:  service.OpListSchedules,
	delayqv1connect.DelayqServiceDeleteScheduleProcedure: service.OpDeleteSchedule,
	delayqv1connect.DelayqServiceExportProcedure:         service.OpExport,
	delayqv1connect.DelayqServiceImportProcedure:         service.OpImport,

	delayqv1connect.DelayqServiceRequeueDeadProcedure: service.OpRequeueDead,
	delayqv1connect.DelayqServiceCancelJobsProcedure:  service.OpCancelJobs,
	delayqv1connect.DelayqServiceRunScheduleProcedure: service.OpRunSchedule,
}

// servicePrefix starts the procedures of the service.
const servicePrefix = "/" + delayqv1connect.DelayqServiceName + "/"

// Op returns the operation of a call of procedure: its entry of
// procedureOps, "" (admin) for another procedure of the service,
// service.OpReflection for a procedure of another service.
func Op(procedure string) service.Op {
	if op, ok := procedureOps[procedure]; ok {
		return op
	}
	if strings.HasPrefix(procedure, servicePrefix) {
		return ""
	}
	return service.OpReflection
}

// authenticate checks the bearer token of a call of procedure, given its
// authorization metadata, and returns ctx with the identity. Errors wrap
// wire.ErrUnauthenticated (no valid token) or wire.ErrPermissionDenied (a
// token the service does not authorize for the procedure's operation).
// Without tokens every call passes.
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
	if err := s.svc.Authorize(id, Op(procedure)); err != nil {
		return nil, err
	}
	return service.WithIdentity(ctx, id), nil
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
	if s.tokens.Len() == 0 || service.IdentityFrom(ctx) != nil {
		return nil
	}
	return wire.WithMessage("a bearer token is required: metadata authorization: Bearer <token>", wire.ErrUnauthenticated)
}
