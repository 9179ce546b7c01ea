package apicompat_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	policy "github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/connecttransport"
	"github.com/delayq/delayq/transports/wire"
)

// The resources of the topic checks: a job, a schedule and a topic that
// the restricted token ("other", admin of other.*) may not use.
const (
	deniedTopic    = "orders.x"
	deniedJob      = "job-o"
	deniedSchedule = "sched-o"
)

// accessCase is one operation that acts on a topic or job, as a request of
// each transport and as the service's own call, all with the restricted
// token: the transports must refuse with the service's answer.
type accessCase struct {
	// method, path and body are the HTTP request ("" method: no route).
	method, path, body string
	// req is the gRPC request (nil: no method).
	req proto.Message
	// item says the refusal is an item's of a batch (HTTP 200 and gRPC OK
	// with the error in the first item), not the call's.
	item bool
	// want calls the service as the operation does.
	want func(ctx context.Context, s *policy.Service) error
}

// accessCases holds the operations that act on a topic, job or schedule
// given by the caller. ListTopics, ListSchedules, Export and Stats are not
// here: they show a restricted token only its topics rather than refuse.
var accessCases = map[policy.Op]accessCase{
	policy.OpPush: {
		method: "POST", path: "/v1/jobs", body: `{"topic":"orders.x","body":1}`,
		req: &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: deniedTopic, Body: "1"}},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.Push(ctx, &core.PushParams{Topic: deniedTopic, Body: json.RawMessage("1")})
			return err
		},
	},
	policy.OpPushBatch: {
		method: "POST", path: "/v1/jobs/batch", body: `{"jobs":[{"topic":"orders.x","body":1}]}`, item: true,
		req: &delayqv1.PushBatchRequest{Jobs: []*delayqv1.JobSpec{{Topic: deniedTopic, Body: "1"}}},
		want: func(ctx context.Context, s *policy.Service) error {
			rs, err := s.PushBatch(ctx, 1, func(int) (*core.PushParams, error) {
				return &core.PushParams{Topic: deniedTopic, Body: json.RawMessage("1")}, nil
			})
			if err != nil {
				return err
			}
			return rs[0].Err
		},
	},
	policy.OpReplace: {
		method: "PUT", path: "/v1/jobs/" + deniedJob, body: `{"topic":"other.a","body":1}`,
		req: &delayqv1.ReplaceRequest{Job: &delayqv1.JobSpec{Id: deniedJob, Topic: "other.a", Body: "1"}},
		want: func(ctx context.Context, s *policy.Service) error {
			_, _, err := s.Replace(ctx, &core.PushParams{ID: deniedJob, Topic: "other.a", Body: json.RawMessage("1")})
			return err
		},
	},
	policy.OpGetJob: {
		method: "GET", path: "/v1/jobs/" + deniedJob, req: &delayqv1.GetJobRequest{Id: deniedJob},
		want: func(ctx context.Context, s *policy.Service) error { _, err := s.Get(ctx, deniedJob); return err },
	},
	policy.OpCancelJob: {
		method: "DELETE", path: "/v1/jobs/" + deniedJob, req: &delayqv1.CancelJobRequest{Id: deniedJob},
		want: func(ctx context.Context, s *policy.Service) error {
			return s.Cancel(ctx, &core.CancelJobParams{ID: deniedJob})
		},
	},
	policy.OpFindJobs: {
		method: "GET", path: "/v1/topics/" + deniedTopic + "/jobs?key=k", req: &delayqv1.FindJobsRequest{Topic: deniedTopic, Key: "k"},
		want: func(ctx context.Context, s *policy.Service) error {
			_, _, err := s.FindJobs(ctx, &core.FindJobsParams{Topic: deniedTopic, Key: "k", Limit: policy.ListLimitDefault})
			return err
		},
	},
	policy.OpListJobs: {
		req: &delayqv1.ListJobsRequest{Topic: deniedTopic, State: "ready"},
		want: func(ctx context.Context, s *policy.Service) error {
			_, _, _, err := s.ListJobs(ctx, &core.SearchJobsParams{ListJobsParams: core.ListJobsParams{Topic: deniedTopic, State: core.StateReady, Limit: policy.ListLimitDefault}}, false)
			return err
		},
	},
	policy.OpCancelByKey: {
		method: "DELETE", path: "/v1/topics/" + deniedTopic + "/jobs?key=k", req: &delayqv1.CancelByKeyRequest{Topic: deniedTopic, Key: "k"},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.CancelByKey(ctx, deniedTopic, "k")
			return err
		},
	},
	policy.OpCancelJobs: {
		method: "POST", path: "/v1/topics/" + deniedTopic + "/jobs/cancel", body: `{"dry_run":true}`,
		req: &delayqv1.CancelJobsRequest{Topic: deniedTopic, Filter: &delayqv1.JobFilter{DryRun: true}},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.CancelJobs(ctx, &policy.BulkFilter{Topic: deniedTopic, DryRun: true})
			return err
		},
	},
	policy.OpRequeueDead: {
		method: "POST", path: "/v1/topics/" + deniedTopic + "/dead/requeue", body: `{"dry_run":true}`,
		req: &delayqv1.RequeueDeadRequest{Topic: deniedTopic, Filter: &delayqv1.JobFilter{DryRun: true}},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.RequeueDead(ctx, &policy.BulkFilter{Topic: deniedTopic, DryRun: true})
			return err
		},
	},
	policy.OpClaim: {
		method: "POST", path: "/v1/topics/" + deniedTopic + "/claim", req: &delayqv1.ClaimRequest{Topic: deniedTopic},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.Claim(ctx, &core.ClaimJobsParams{Topic: deniedTopic, Max: 1})
			return err
		},
	},
	policy.OpSubscribe: {
		method: "GET", path: "/v1/topics/" + deniedTopic + "/subscribe", req: &delayqv1.SubscribeRequest{Topic: deniedTopic},
		want: func(ctx context.Context, s *policy.Service) error { return s.AllowTopic(ctx, deniedTopic) },
	},
	policy.OpAck: {
		method: "POST", path: "/v1/jobs/" + deniedJob + "/ack", body: `{"lease":"l"}`, req: &delayqv1.AckRequest{Id: deniedJob, Lease: "l"},
		want: func(ctx context.Context, s *policy.Service) error {
			return s.Ack(ctx, &core.AckJobParams{ID: deniedJob, Lease: "l"})
		},
	},
	policy.OpNack: {
		method: "POST", path: "/v1/jobs/" + deniedJob + "/nack", body: `{"lease":"l"}`, req: &delayqv1.NackRequest{Id: deniedJob, Lease: "l"},
		want: func(ctx context.Context, s *policy.Service) error {
			return s.Nack(ctx, &core.NackParams{ID: deniedJob, Lease: "l"})
		},
	},
	policy.OpTouch: {
		method: "POST", path: "/v1/jobs/" + deniedJob + "/touch", body: `{"lease":"l"}`, req: &delayqv1.TouchRequest{Id: deniedJob, Lease: "l"},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.Touch(ctx, &core.TouchJobParams{ID: deniedJob, Lease: "l"})
			return err
		},
	},
	policy.OpAckBatch: {
		method: "POST", path: "/v1/acks", body: `{"acks":[{"id":"job-o","lease":"l"}]}`, item: true,
		req: &delayqv1.AckBatchRequest{Acks: []*delayqv1.AckRequest{{Id: deniedJob, Lease: "l"}}},
		want: func(ctx context.Context, s *policy.Service) error {
			errs, err := s.AckBatch(ctx, 1, func(int) (core.AckJobParams, error) {
				return core.AckJobParams{ID: deniedJob, Lease: "l"}, nil
			})
			if err != nil {
				return err
			}
			return errs[0]
		},
	},
	policy.OpNackBatch: {
		method: "POST", path: "/v1/nacks", body: `{"nacks":[{"id":"job-o","lease":"l"}]}`, item: true,
		req: &delayqv1.NackBatchRequest{Nacks: []*delayqv1.NackRequest{{Id: deniedJob, Lease: "l"}}},
		want: func(ctx context.Context, s *policy.Service) error {
			errs, err := s.NackBatch(ctx, 1, func(int) (*core.NackParams, error) {
				return &core.NackParams{ID: deniedJob, Lease: "l"}, nil
			})
			if err != nil {
				return err
			}
			return errs[0]
		},
	},
	policy.OpRequeue: {
		method: "POST", path: "/v1/jobs/" + deniedJob + "/requeue", req: &delayqv1.RequeueRequest{Id: deniedJob},
		want: func(ctx context.Context, s *policy.Service) error { return s.Requeue(ctx, deniedJob) },
	},
	policy.OpListDead: {
		method: "GET", path: "/v1/topics/" + deniedTopic + "/dead", req: &delayqv1.ListDeadRequest{Topic: deniedTopic},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.ListDead(ctx, &core.ListDeadJobsParams{Topic: deniedTopic, Limit: policy.ListLimitDefault})
			return err
		},
	},
	policy.OpGetTopic: {
		method: "GET", path: "/v1/topics/" + deniedTopic, req: &delayqv1.GetTopicRequest{Name: deniedTopic},
		want: func(ctx context.Context, s *policy.Service) error { _, err := s.GetTopic(ctx, deniedTopic); return err },
	},
	policy.OpPutTopic: {
		method: "PUT", path: "/v1/topics/" + deniedTopic, body: `{}`, req: &delayqv1.PutTopicRequest{Name: deniedTopic, Config: &delayqv1.TopicConfig{}},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.PutTopic(ctx, &core.Topic{Name: deniedTopic})
			return err
		},
	},
	policy.OpUpdateTopic: {
		method: "PATCH", path: "/v1/topics/" + deniedTopic, body: `{"max_attempts": 2}`,
		req: &delayqv1.UpdateTopicRequest{Name: deniedTopic, Config: &delayqv1.TopicConfig{MaxAttempts: 2}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_attempts"}}},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.UpdateTopic(ctx, deniedTopic, func(t *core.Topic) (*core.Topic, error) { return t, nil })
			return err
		},
	},
	policy.OpDeleteTopic: {
		method: "DELETE", path: "/v1/topics/" + deniedTopic, req: &delayqv1.DeleteTopicRequest{Name: deniedTopic},
		want: func(ctx context.Context, s *policy.Service) error { return s.DeleteTopic(ctx, deniedTopic) },
	},
	policy.OpPauseTopic: {
		method: "POST", path: "/v1/topics/" + deniedTopic + "/pause", req: &delayqv1.PauseTopicRequest{Name: deniedTopic},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.SetTopicPaused(ctx, deniedTopic, true)
			return err
		},
	},
	policy.OpResumeTopic: {
		method: "POST", path: "/v1/topics/" + deniedTopic + "/resume", req: &delayqv1.ResumeTopicRequest{Name: deniedTopic},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.SetTopicPaused(ctx, deniedTopic, false)
			return err
		},
	},
	policy.OpGetSchedule: {
		method: "GET", path: "/v1/schedules/" + deniedSchedule, req: &delayqv1.GetScheduleRequest{Name: deniedSchedule},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.GetSchedule(ctx, deniedSchedule)
			return err
		},
	},
	policy.OpPutSchedule: {
		method: "PUT", path: "/v1/schedules/s-new", body: `{"cron":"0 * * * *","topic":"orders.x"}`,
		req: &delayqv1.PutScheduleRequest{Name: "s-new", Schedule: &delayqv1.ScheduleConfig{Cron: "0 * * * *", Topic: deniedTopic}},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.PutSchedule(ctx, &core.Schedule{Name: "s-new", Cron: "0 * * * *", Topic: deniedTopic})
			return err
		},
	},
	policy.OpDeleteSchedule: {
		method: "DELETE", path: "/v1/schedules/" + deniedSchedule, req: &delayqv1.DeleteScheduleRequest{Name: deniedSchedule},
		want: func(ctx context.Context, s *policy.Service) error { return s.DeleteSchedule(ctx, deniedSchedule) },
	},
	policy.OpRunSchedule: {
		method: "POST", path: "/v1/schedules/" + deniedSchedule + "/run", req: &delayqv1.RunScheduleRequest{Name: deniedSchedule},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.RunSchedule(ctx, deniedSchedule)
			return err
		},
	},
	policy.OpImport: {
		method: "POST", path: "/v1/import", body: `{"schedule":{"name":"s-imp","cron":"0 * * * *","topic":"orders.x"}}`, item: true,
		req: &delayqv1.ImportRequest{Schedules: []*delayqv1.Schedule{{Name: "s-imp", Cron: "0 * * * *", Topic: deniedTopic}}},
		want: func(ctx context.Context, s *policy.Service) error {
			_, err := s.ImportSchedule(ctx, &core.Schedule{Name: "s-imp", Cron: "0 * * * *", Topic: deniedTopic})
			return err
		},
	},
	policy.OpBackup: {
		method: "GET", path: "/v1/backup",
		want: func(ctx context.Context, s *policy.Service) error { return s.AllowBackup(ctx) },
	},
}

// secrets are the bundle's tokens, by the order in which a token lacking
// an op's scopes is looked for.
var secrets = []string{tokenPush, tokenConsume, tokenQuota, tokenOther, tokenAdmin}

// TestEveryRouteGoesThroughTheService checks that every HTTP route and
// every gRPC method maps to an operation of the service's table, and that
// both transports leave the decision to the service: for each, a token
// without the op's scopes is refused with the message the service's
// Authorize gives, and for an operation on a topic, job or schedule, a
// token restricted to other topics is refused with the answer of the
// service's own method. A route or method added without an Op fails here.
func TestEveryRouteGoesThroughTheService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, err := b.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: []*core.PushParams{{ID: deniedJob, Topic: deniedTopic, Body: json.RawMessage("1")}}})
	require.NoError(t, err)
	_, err = b.engine.PutSchedule(ctx, &core.Schedule{Name: deniedSchedule, Cron: "0 * * * *", Topic: deniedTopic})
	require.NoError(t, err)
	other, ok := b.tokens.Authenticate(tokenOther)
	require.True(t, ok)
	otherCtx := policy.WithIdentity(ctx, other)

	covered := map[policy.Op]bool{}
	for _, pattern := range b.api.Routes() {
		method, path, _ := strings.Cut(pattern, " ")
		op := b.api.Op(pattern)
		require.True(t, op.Known(), "route %s has no operation of the service's table", pattern)
		covered[op] = true
		if secret, id := lacking(t, b.tokens, op); id != nil {
			want := b.svc.Authorize(id, op)
			require.Error(t, want, "%s: the service must refuse %s", pattern, id.Name)
			status, msg := b.httpError(t, method, fillPath(path), secret, "", false)
			require.Equal(t, http.StatusForbidden, status, "%s with token %s", pattern, id.Name)
			require.Equal(t, wire.ToError(want).Message, msg, "%s: HTTP's refusal must be the service's", pattern)
		}
		if strings.Contains(pattern, "{topic}") || strings.Contains(pattern, "{id}") || strings.Contains(pattern, "{name}") {
			_, listed := accessCases[op]
			require.True(t, listed, "route %s acts on a topic, job or schedule: accessCases needs %s", pattern, op)
		}
	}

	methods := service().Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		procedure := "/" + string(service().FullName()) + "/" + string(m.Name())
		op := connecttransport.Op(procedure)
		require.True(t, op.Known() && op != policy.OpReflection, "method %s has no operation of the service's table", m.Name())
		covered[op] = true
		if secret, id := lacking(t, b.tokens, op); id != nil {
			want := b.svc.Authorize(id, op)
			require.Error(t, want)
			err := b.grpcCall(t, procedure, secret, dynamicpb.NewMessage(m.Input()), nil)
			require.Equal(t, wire.ToError(want).Message, status.Convert(err).Message(), "%s: gRPC's refusal must be the service's", m.Name())
			require.Equal(t, "PermissionDenied", status.Code(err).String(), "%s", m.Name())
		}
		if actsOnResource(m.Input()) {
			_, listed := accessCases[op]
			require.True(t, listed, "method %s acts on a topic, job or schedule: accessCases needs %s", m.Name(), op)
		}
	}

	for op, c := range accessCases {
		require.True(t, covered[op], "accessCases has %s, which no route or method serves", op)
		want := c.want(otherCtx, b.svc)
		require.Error(t, want, "%s: the service must refuse the restricted token", op)
		we := wire.ToError(want)
		require.Contains(t, []string{wire.CodePermissionDenied, wire.CodeNotFound}, we.Code, "%s: %v", op, want)
		if c.method != "" {
			status, msg := b.httpError(t, c.method, c.path, tokenOther, c.body, c.item)
			if c.item {
				require.Equal(t, http.StatusOK, status, "%s", op)
			} else {
				require.Equal(t, we.Status, status, "%s %s", c.method, c.path)
			}
			require.Equal(t, we.Message, msg, "%s %s: HTTP's refusal must be the service's", c.method, c.path)
		}
		if c.req != nil {
			procedure := "/" + string(service().FullName()) + "/" + string(op)
			var out proto.Message
			if c.item {
				out = dynamicpb.NewMessage(service().Methods().ByName(protoreflect.Name(op)).Output())
			}
			err := b.grpcCall(t, procedure, tokenOther, c.req, out)
			msg := status.Convert(err).Message()
			if c.item {
				require.NoError(t, err, "%s", op)
				msg = firstItemError(out)
			}
			require.Equal(t, we.Message, msg, "%s: gRPC's refusal must be the service's", op)
		}
	}
}

// lacking returns a token of the bundle without any of op's scopes, with
// its identity; none when op is open or every token has one of them.
func lacking(t *testing.T, tokens *auth.Tokens, op policy.Op) (string, *auth.Identity) {
	t.Helper()
	if op.Open() {
		return "", nil
	}
	for _, secret := range secrets {
		id, ok := tokens.Authenticate(secret)
		require.True(t, ok)
		if !id.HasAnyScope(op.Scopes()...) {
			return secret, id
		}
	}
	return "", nil
}

// fillPath gives the wildcards of a route's path values.
func fillPath(path string) string {
	return strings.NewReplacer("{id}", deniedJob, "{topic}", deniedTopic, "{name}", deniedSchedule, "{$}", "").Replace(path)
}

// actsOnResource reports whether a gRPC request names a topic, job or
// schedule, or carries items that do.
func actsOnResource(d protoreflect.MessageDescriptor) bool {
	for _, f := range []protoreflect.Name{"topic", "id", "name", "job", "jobs", "acks", "nacks", "schedules"} {
		if d.Fields().ByName(f) != nil {
			return true
		}
	}
	return false
}

// httpError sends a request with token and returns the status and the
// error message of the answer, or of its first item (results, or an
// import's errors) with item.
func (b *testBundle) httpError(t *testing.T, method, path, token, body string, item bool) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		if path == "/v1/import" {
			req.Header.Set("Content-Type", "application/x-ndjson")
		}
	}
	res, err := b.client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	type apiError struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	var v struct {
		apiError
		Results []apiError `json:"results"`
		Errors  []apiError `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(data, &v), "%s %s: %s", method, path, data)
	switch {
	case !item:
		return res.StatusCode, v.Error.Message
	case len(v.Results) > 0:
		return res.StatusCode, v.Results[0].Error.Message
	case len(v.Errors) > 0:
		return res.StatusCode, v.Errors[0].Error.Message
	}
	t.Fatalf("%s %s: no item in %s", method, path, data)
	return 0, ""
}

// grpcCall calls procedure with token and req as a stream of one message
// each way, which serves every kind of method, and returns the call's
// error; out, when set, gets the answer.
func (b *testBundle) grpcCall(t *testing.T, procedure, token string, req, out proto.Message) error {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
	st, err := b.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, procedure)
	if err != nil {
		return err
	}
	if err := st.SendMsg(req); err != nil && err != io.EOF {
		return err
	}
	require.NoError(t, st.CloseSend())
	if out == nil {
		out = &delayqv1.Error{} // unread: the call is to fail
	}
	return st.RecvMsg(out)
}

// firstItemError returns the message of the error of the first item of a
// batch's or an import's answer (results or errors).
func firstItemError(m proto.Message) string {
	r := m.ProtoReflect()
	for _, name := range []protoreflect.Name{"results", "errors"} {
		f := r.Descriptor().Fields().ByName(name)
		if f == nil || r.Get(f).List().Len() == 0 {
			continue
		}
		it := r.Get(f).List().Get(0).Message()
		e := it.Get(it.Descriptor().Fields().ByName("error")).Message()
		return e.Get(e.Descriptor().Fields().ByName("message")).String()
	}
	return ""
}
