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

// refusingStore opens a store whose first lease publish is refused
// (refuseLease).
func refusingStore(t *testing.T) (*Store, *refuseLease) {
	t.Helper()
	nc, err := sharedEmbedded(t).Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	prefix := uniquePrefix()
	s := openStore(t, nc, prefix)
	// Before any claim: nothing else reads s.js yet.
	js := &refuseLease{JetStream: s.js, lease: prefix + "." + kindLease + "."}
	s.js = js
	return s, js
}

// TestClaimRefusedNotLast: a claim whose lease publish is refused for the
// job's last sequence while the job's last message is still the one it
// claims keeps the job (a later take claims it) instead of acknowledging its
// only message away.
func TestClaimRefusedNotLast(t *testing.T) {
	t.Parallel()
	s, js := refusingStore(t)
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

// readBehind is a stream whose first read of a job's last message answers
// one sequence behind the last, as a replicated stream's new leader may
// before it has applied the writes its predecessor acknowledged.
type readBehind struct {
	jetstream.Stream
	reads atomic.Int32
}

func (r *readBehind) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := r.Stream.GetLastMsgForSubject(ctx, subject)
	if err == nil && r.reads.Add(1) == 1 {
		behind := *m
		behind.Sequence--
		return &behind, nil
	}
	return m, err
}

// TestClaimRefusedReadBehind: a claim whose lease publish is refused, and
// whose read of the job's last message then answers an older message than
// the one it claims, keeps the job: the read is behind, not the item, and
// acknowledging the item would delete the job's only message (the likely
// cause of two jobs answered 201 and lost in an hour-long history on a
// three-node cluster, each a few seconds from a node's kill -9).
func TestClaimRefusedReadBehind(t *testing.T) {
	t.Parallel()
	s, js := refusingStore(t)
	ctx := context.Background()
	j := job("behind", 0)
	put(t, s, j)
	rb := &readBehind{Stream: s.stream}
	s.stream = rb

	jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "behind", Max: 1, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Positive(t, rb.reads.Load(), "the refused claim read the job's last message")
	require.EqualValues(t, 2, js.leases.Load(), "the first lease publish refused, the second made")
	require.Len(t, jobs, 1, "the job was kept, and claimed again")
	require.Equal(t, j.ID, jobs[0].ID)
}
