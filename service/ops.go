package service

import (
	"fmt"
	"strings"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/transports/wire"
)

// Op is one operation of the API, named as its gRPC method where it has
// one. Each HTTP route and gRPC procedure maps to one Op, and ops decides
// what the Op asks of a token.
type Op string

// The operations of the API.
const (
	OpPush           Op = "Push"
	OpPushBatch      Op = "PushBatch"
	OpReplace        Op = "Replace"
	OpGetJob         Op = "GetJob"
	OpCancelJob      Op = "CancelJob"
	OpFindJobs       Op = "FindJobs"
	OpListJobs       Op = "ListJobs"
	OpCancelByKey    Op = "CancelByKey"
	OpClaim          Op = "Claim"
	OpSubscribe      Op = "Subscribe"
	OpAck            Op = "Ack"
	OpNack           Op = "Nack"
	OpTouch          Op = "Touch"
	OpAckBatch       Op = "AckBatch"
	OpNackBatch      Op = "NackBatch"
	OpRequeue        Op = "Requeue"
	OpListDead       Op = "ListDead"
	OpGetTopic       Op = "GetTopic"
	OpListTopics     Op = "ListTopics"
	OpPutTopic       Op = "PutTopic"
	OpUpdateTopic    Op = "UpdateTopic"
	OpDeleteTopic    Op = "DeleteTopic"
	OpPauseTopic     Op = "PauseTopic"
	OpResumeTopic    Op = "ResumeTopic"
	OpPutSchedule    Op = "PutSchedule"
	OpGetSchedule    Op = "GetSchedule"
	OpListSchedules  Op = "ListSchedules"
	OpDeleteSchedule Op = "DeleteSchedule"
	OpExport         Op = "Export"
	OpImport         Op = "Import"
	OpBackup         Op = "Backup"
	OpWhoami         Op = "Whoami"
	OpStats          Op = "Stats"
	// OpVersion reads the server's version, commit and Go version.
	OpVersion Op = "Version"
	// OpHealth is a liveness or readiness probe.
	OpHealth Op = "Health"
	// OpOpenAPI reads the API's OpenAPI description.
	OpOpenAPI Op = "OpenAPI"
	// OpUI reads a page of the web UI, whose data comes through the API.
	OpUI Op = "UI"
	// OpMetrics reads the Prometheus metrics, open to all.
	OpMetrics Op = "Metrics"
	// OpMetricsProtected reads the metrics of a server that protects them
	// (httptransport.Config.ProtectMetrics).
	OpMetricsProtected Op = "MetricsProtected"
	// OpReflection is a call of gRPC server reflection.
	OpReflection Op = "Reflection"
	// OpRequeueDead requeues a topic's dead jobs that a filter matches.
	OpRequeueDead Op = "RequeueDead"
	// OpCancelJobs cancels a topic's unfinished jobs that a filter matches.
	OpCancelJobs Op = "CancelJobs"
	// OpRunSchedule pushes one job of a schedule now.
	OpRunSchedule Op = "RunSchedule"
	// OpRekey seals a page of the store's data again with the current
	// key of encryption at rest.
	OpRekey Op = "Rekey"
)

// access is what an operation asks of a token: open ones need none (not
// even a token), the others one of scopes.
type access struct {
	open   bool
	scopes []auth.Scope
}

// Access classes of ops.
var (
	open     = access{open: true}
	push     = access{scopes: []auth.Scope{auth.ScopePush}}
	consume  = access{scopes: []auth.Scope{auth.ScopeConsume}}
	reader   = access{scopes: []auth.Scope{auth.ScopePush, auth.ScopeConsume}}
	anyScope = access{scopes: []auth.Scope{auth.ScopePush, auth.ScopeConsume, auth.ScopeAdmin}}
	admin    = access{scopes: []auth.Scope{auth.ScopeAdmin}}
)

// ops says what each operation asks of a token (docs/api.md's "Access:
// tokens and scopes"): the one table the HTTP routes and gRPC procedures
// are checked by. An Op not listed needs admin.
var ops = map[Op]access{
	OpPush:        push,
	OpPushBatch:   push,
	OpReplace:     push,
	OpCancelJob:   push,
	OpCancelByKey: push,
	OpCancelJobs:  push,
	OpGetJob:      reader,
	OpFindJobs:    reader,
	OpListJobs:    reader,
	OpClaim:       consume,
	OpSubscribe:   consume,
	OpAck:         consume,
	OpNack:        consume,
	OpTouch:       consume,
	OpAckBatch:    consume,
	OpNackBatch:   consume,
	// Reading topics and the live statistics is open to every token (its
	// own topics), for the web UI's read-only view; changing them needs
	// admin.
	OpListTopics: anyScope,
	OpGetTopic:   anyScope,
	OpStats:      anyScope,
	OpWhoami:     anyScope,
	OpVersion:    anyScope,
	// Reflection describes the service, as the OpenAPI description does,
	// but only to a valid token.
	OpReflection: anyScope,
	OpHealth:     open,
	OpOpenAPI:    open, // documentation, as in the repository
	OpUI:         open, // static pages: their data comes through the API
	OpMetrics:    open,

	OpRequeue: admin, OpRequeueDead: admin, OpRunSchedule: admin, OpListDead: admin, OpPutTopic: admin, OpUpdateTopic: admin, OpDeleteTopic: admin,
	OpPauseTopic: admin, OpResumeTopic: admin, OpPutSchedule: admin, OpGetSchedule: admin,
	OpListSchedules: admin, OpDeleteSchedule: admin, OpExport: admin, OpImport: admin,
	OpBackup: admin, OpMetricsProtected: admin, OpRekey: admin,
}

// Ops returns every operation of the table, for tests that check each
// route and procedure maps to one.
func Ops() []Op {
	out := make([]Op, 0, len(ops))
	for op := range ops {
		out = append(out, op)
	}
	return out
}

// Known reports whether op is in the table.
func (op Op) Known() bool {
	_, ok := ops[op]
	return ok
}

// Open reports whether op needs no token at all.
func (op Op) Open() bool { return ops[op].open }

// Scopes returns the scopes of which a token needs one for op, nil for an
// open op.
func (op Op) Scopes() []auth.Scope {
	a, ok := ops[op]
	if !ok {
		return admin.scopes
	}
	return a.scopes
}

// Authorize returns nil when id may do op: op is open, id is nil (the API
// without tokens) or it has one of op's scopes. Otherwise an error wrapping
// wire.ErrPermissionDenied that names the scopes and op, the same for every
// transport. It does not check topics: the methods of Service do.
func (s *Service) Authorize(id *auth.Identity, op Op) error {
	if id == nil || op.Open() {
		return nil
	}
	scopes := op.Scopes()
	if id.HasAnyScope(scopes...) {
		return nil
	}
	s.log.Info("service: permission denied", "token", id.Name, "op", op, "need", scopes)
	return wire.WithMessage(fmt.Sprintf("token %q lacks the %s scope for %s", id.Name, scopeList(scopes), op), wire.ErrPermissionDenied)
}

// scopeList writes scopes as "push or consume".
func scopeList(scopes []auth.Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, " or ")
}
