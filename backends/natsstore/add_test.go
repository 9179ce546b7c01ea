package natsstore

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// fakeMsg is a fetched message as the consumer hands it to a fetcher,
// with a stream sequence of the test's choosing and its settles counted.
type fakeMsg struct {
	jetstream.Msg // nil: only the methods below are called
	subject       string
	data          []byte
	seq           uint64
	acks          int
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}}, nil
}
func (m *fakeMsg) Subject() string      { return m.subject }
func (m *fakeMsg) Headers() nats.Header { return nil }
func (m *fakeMsg) Data() []byte         { return m.data }
func (m *fakeMsg) Ack() error           { m.acks++; return nil }

// TestAddKeepsNewest: when a job's older message arrives after a newer one
// is held (a redelivery of a message whose settle was lost), the fetcher
// keeps the newer and acknowledges the older away; it used to keep the
// one that came last, acknowledging (so deleting, in a work-queue stream)
// the job's newest message.
func TestAddKeepsNewest(t *testing.T) {
	t.Parallel()
	nc, err := sharedEmbedded(t).Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	s := openStore(t, nc, uniquePrefix())
	j := job("newest", time.Hour)
	put(t, s, j)
	raw, err := s.stream.GetLastMsgForSubject(context.Background(), s.names.jobFilter(j.ID))
	require.NoError(t, err)
	q, err := s.queue("newest")
	require.NoError(t, err)
	f := &fetcher{}

	newer := &fakeMsg{subject: raw.Subject, data: raw.Data, seq: raw.Sequence + 10}
	q.add(f, newer)
	older := &fakeMsg{subject: raw.Subject, data: raw.Data, seq: raw.Sequence}
	q.add(f, older)
	require.Equal(t, 1, older.acks, "the older message is acknowledged away")
	require.Zero(t, newer.acks, "the newer message is kept")
	q.mu.Lock()
	held := q.byID[j.ID]
	q.mu.Unlock()
	require.NotNil(t, held)
	require.Equal(t, newer.seq, held.m.seq)

	again := &fakeMsg{subject: raw.Subject, data: raw.Data, seq: newer.seq} // its redelivery
	q.add(f, again)
	require.Zero(t, newer.acks+again.acks, "a redelivery of the held message replaces its handle")
	q.mu.Lock()
	require.Same(t, again, q.byID[j.ID].msg)
	q.mu.Unlock()
}
