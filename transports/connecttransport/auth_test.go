package connecttransport_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/delayq/delayq/auth"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// Tokens of the access tests.
const (
	pushToken       = "push-token-0123456789"
	consumeToken    = "consume-token-0123456789"
	adminToken      = "admin-token-0123456789"
	mailOnlyToken   = "mail-only-token-0123456789"
	quotaTokenValue = "quota-token-0123456789"
)

func withTokens(c *setupConfig) {
	c.tokens = []auth.Token{
		{Name: "pusher", Token: pushToken, Scopes: []auth.Scope{auth.ScopePush}},
		{Name: "consumer", Token: consumeToken, Scopes: []auth.Scope{auth.ScopeConsume}},
		{Name: "admin", Token: adminToken, Scopes: []auth.Scope{auth.ScopeAdmin}},
		{Name: "mail", Token: mailOnlyToken, Scopes: []auth.Scope{auth.ScopeAdmin}, Topics: []string{"mail"}},
		{Name: "quota", Token: quotaTokenValue, Scopes: []auth.Scope{auth.ScopePush}, IntakeRate: 0.001, IntakeBurst: 2},
	}
}

// TestAccess checks tokens, scopes and topic restrictions as the HTTP API
// has them, read from the authorization metadata.
func TestAccess(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	push := &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "mail", Id: "m1"}}
	var pushed delayqv1.PushResponse

	err := b.call(t, "", "Push", push, &pushed)
	requireStatus(t, err, codes.Unauthenticated, "unauthenticated", "")
	err = b.call(t, "not-a-token-0123456789", "Push", push, &pushed)
	requireStatus(t, err, codes.Unauthenticated, "unauthenticated", "")
	err = b.call(t, consumeToken, "Push", push, &pushed)
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	require.NoError(t, b.call(t, pushToken, "Push", push, &pushed))

	// push or consume read jobs; only consume claims; only admin configures.
	require.NoError(t, b.call(t, consumeToken, "GetJob", &delayqv1.GetJobRequest{Id: "m1"}, &delayqv1.GetJobResponse{}))
	require.NoError(t, b.call(t, pushToken, "GetJob", &delayqv1.GetJobRequest{Id: "m1"}, &delayqv1.GetJobResponse{}))
	err = b.call(t, pushToken, "Claim", &delayqv1.ClaimRequest{Topic: "mail"}, &delayqv1.ClaimResponse{})
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	err = b.call(t, consumeToken, "PutTopic", &delayqv1.PutTopicRequest{Name: "mail", Config: &delayqv1.TopicConfig{}}, &delayqv1.PutTopicResponse{})
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	// Any token reads topics, as over HTTP (the web UI's read-only view).
	require.NoError(t, b.call(t, consumeToken, "ListTopics", &delayqv1.ListTopicsRequest{}, &delayqv1.ListTopicsResponse{}))
	require.NoError(t, b.call(t, pushToken, "GetTopic", &delayqv1.GetTopicRequest{Name: "mail"}, &delayqv1.GetTopicResponse{}))
	require.NoError(t, b.call(t, adminToken, "Claim", &delayqv1.ClaimRequest{Topic: "mail"}, &delayqv1.ClaimResponse{}), "admin grants consume")
	_, err = b.subscribe(t, pushToken, &delayqv1.SubscribeRequest{Topic: "mail"}).next()
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")

	// A token restricted to mail may not use other topics, nor jobs of
	// them, and does not see another topic's job in a conflict.
	b.push(t, "secret", `"x"`, withID("s1"))
	err = b.call(t, mailOnlyToken, "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "secret"}}, &pushed)
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	err = b.call(t, mailOnlyToken, "GetJob", &delayqv1.GetJobRequest{Id: "s1"}, &delayqv1.GetJobResponse{})
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	err = b.call(t, mailOnlyToken, "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "mail", Id: "s1"}}, &pushed)
	d := requireStatus(t, err, codes.Aborted, "conflict", "")
	require.Nil(t, d.Job, "the job of another topic is not shown")
	err = b.call(t, adminToken, "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "mail", Id: "s1"}}, &pushed)
	d = requireStatus(t, err, codes.Aborted, "conflict", "")
	require.Equal(t, "s1", d.Job.GetId(), "a token for every topic sees it")
	_, err = b.subscribe(t, mailOnlyToken, &delayqv1.SubscribeRequest{Topic: "secret"}).next()
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	err = b.call(t, mailOnlyToken, "PutTopic", &delayqv1.PutTopicRequest{Name: "mail", Config: &delayqv1.TopicConfig{OnDead: "secret"}}, &delayqv1.PutTopicResponse{})
	requireStatus(t, err, codes.PermissionDenied, "permission_denied", "")
	var list delayqv1.ListTopicsResponse
	require.NoError(t, b.call(t, mailOnlyToken, "ListTopics", &delayqv1.ListTopicsRequest{}, &list))
	require.Len(t, list.Topics, 1)
	require.Equal(t, "mail", list.Topics[0].Name)

	// The intake quota counts every job and refuses a batch whole.
	var batch delayqv1.PushBatchResponse
	err = b.call(t, quotaTokenValue, "PushBatch", &delayqv1.PushBatchRequest{Jobs: make([]*delayqv1.JobSpec, 3)}, &batch)
	requireStatus(t, err, codes.ResourceExhausted, "too_large", "jobs")
	require.NoError(t, b.call(t, quotaTokenValue, "PushBatch", &delayqv1.PushBatchRequest{Jobs: []*delayqv1.JobSpec{{Topic: "q"}, {Topic: "q"}}}, &batch))
	err = b.call(t, quotaTokenValue, "Push", &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "q"}}, &pushed)
	d = requireStatus(t, err, codes.ResourceExhausted, "rate_limited", "")
	require.NotEmpty(t, d.RetryAfter)
}

// TestReflection lists the services with grpc-go's reflection client, as
// grpcurl does; with tokens it needs a valid one of any scope.
func TestReflection(t *testing.T) {
	t.Parallel()
	b := setup(t, withTokens)
	list := func(token string) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		stream, err := reflectionpb.NewServerReflectionClient(b.conn).ServerReflectionInfo(ctx)
		if err != nil {
			return nil, err
		}
		// A stream the server refused answers Send with io.EOF, and Recv
		// with the status.
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		res, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		_ = stream.CloseSend()
		var names []string
		for _, s := range res.GetListServicesResponse().GetService() {
			names = append(names, s.Name)
		}
		return names, nil
	}
	_, err := list("")
	requireStatus(t, err, codes.Unauthenticated, "unauthenticated", "")
	names, err := list(consumeToken)
	require.NoError(t, err)
	require.Contains(t, names, "delayq.v1.DelayqService")
}

// TestHostChecked checks that the HTTP API's Host check guards gRPC calls
// too, so that a DNS rebinding name cannot reach them from a browser: a
// call naming another host on a loopback listener is refused before any
// token check, with the HTTP API's 421, which grpc-go reports as Unknown.
func TestHostChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn, err := grpc.NewClient("passthrough:///"+b.srv.Listener.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("rebind.example:80"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	err = conn.Invoke(t.Context(), method("Push"), &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "mail"}}, &delayqv1.PushResponse{})
	require.Equal(t, codes.Unknown, status.Code(err), "%v", err)
	require.Contains(t, err.Error(), "421")
	ts, err := b.engine.ListTopics(t.Context())
	require.NoError(t, err)
	require.Empty(t, ts, "nothing was pushed")
}
