package natsstore

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// refuseLease is a JetStream whose first lease publish fails with the
// server's "wrong last sequence" without reaching the server, as a
// replicated stream's leader answers while the job's put is still in
// process on it.
type refuseLease struct {
	jetstream.JetStream
	lease  string       // the subjects' start of lease messages
	leases atomic.Int32 // lease publishes asked for
}

func (r *refuseLease) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if strings.HasPrefix(m.Subject, r.lease) && r.leases.Add(1) == 1 {
		f := &refusedFuture{msg: m, err: make(chan error, 1)}
		f.err <- &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence"}
		return f, nil
	}
	return r.JetStream.PublishMsgAsync(m, opts...)
}

type refusedFuture struct {
	msg *nats.Msg
	err chan error
}

func (f *refusedFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (f *refusedFuture) Err() <-chan error            { return f.err }
func (f *refusedFuture) Msg() *nats.Msg               { return f.msg }

// TestClaimRefusedNotLast: a claim whose lease publish is refused for the
// job's last sequence while the job's last message is still the one it
// claims keeps the job (a later take claims it) instead of acknowledging its
// only message away.
func TestClaimRefusedNotLast(t *testing.T) {
	t.Parallel()
	nc, err := sharedEmbedded(t).Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	prefix := uniquePrefix()
	s := openStore(t, nc, prefix)
	// Before any claim: nothing else reads s.js yet.
	js := &refuseLease{JetStream: s.js, lease: prefix + "." + kindLease + "."}
	s.js = js
	ctx := context.Background()
	j := job("refused", 0)
	put(t, s, j)

	jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "refused", Max: 1, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.EqualValues(t, 2, js.leases.Load(), "the first lease publish refused, the second made")
	require.Len(t, jobs, 1, "the job was kept, and claimed again")
	require.Equal(t, j.ID, jobs[0].ID)
	got, err := s.GetJob(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, got.State)
}
