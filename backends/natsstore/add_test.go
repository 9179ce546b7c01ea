package natsstore

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
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
	q, j, raw := queuedJob(t, "newest")
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

// TestHoldKeepsRedelivered: a claim whose lease publish got no answer
// puts its item back (hold) while the consumer, whose leader changed with
// the stream's, has redelivered the same message to the fetcher. The
// fetcher used to take the redelivery for a newer message and acknowledge
// the claim's handle, which deletes the message, the job's only one, from
// the work-queue stream: a 10-minute NATS history lost a job answered 201
// so, 0.5 s after a kill -9 of a node.
func TestHoldKeepsRedelivered(t *testing.T) {
	t.Parallel()
	q, j, raw := queuedJob(t, "redelivered")
	f := &fetcher{}
	q.mu.Lock()
	q.f = f // a running fetcher, which hold puts items back into
	q.mu.Unlock()
	t.Cleanup(func() { // before the store's Close, which would stop it
		q.mu.Lock()
		q.f = nil
		q.mu.Unlock()
	})
	far := time.Now().Add(2 * time.Hour)

	first := &fakeMsg{subject: raw.Subject, data: raw.Data, seq: raw.Sequence}
	q.add(f, first)
	items, _ := q.take(1, far)
	require.Len(t, items, 1)
	items[0].tried = "lease-without-answer"
	again := &fakeMsg{subject: raw.Subject, data: raw.Data, seq: raw.Sequence}
	q.add(f, again) // the redelivery, while the claim has the item
	q.hold(items[0])
	require.Zero(t, first.acks+again.acks, "neither handle of the job's only message is acknowledged")
	q.mu.Lock()
	held := q.byID[j.ID]
	q.mu.Unlock()
	require.NotNil(t, held)
	require.Same(t, again, held.msg, "the latest delivery's handle is kept")
	require.Equal(t, "lease-without-answer", held.tried, "and what the claim tried of it")

	// A message of the job newer than the one held still wins either way.
	items, _ = q.take(1, far)
	require.Len(t, items, 1)
	newer := &fakeMsg{subject: raw.Subject, data: raw.Data, seq: raw.Sequence + 10}
	q.add(f, newer)
	q.hold(items[0])
	require.Equal(t, 1, again.acks, "the claim's older item is acknowledged away")
	items, _ = q.take(1, far)
	require.Len(t, items, 1)
	require.Same(t, newer, items[0].msg)
	older := &fakeMsg{subject: raw.Subject, data: raw.Data, seq: raw.Sequence + 5}
	q.add(f, older)
	q.hold(items[0])
	require.Equal(t, 1, older.acks, "an older message held meanwhile is acknowledged away")
	require.Zero(t, newer.acks)
}

// queuedJob puts a job of topic, due in an hour, on a store of its own and
// returns the topic's queue (its fetcher not started), the job and its
// message as stored, for a test to hand the queue fetched messages.
func queuedJob(t *testing.T, topic string) (*topicQueue, *core.Job, *jetstream.RawStreamMsg) {
	t.Helper()
	s := setup(t).store
	j := job(topic, time.Hour)
	put(t, s, j)
	q, err := s.queue(topic)
	require.NoError(t, err)
	return q, j, lastRaw(t, s, j.ID)
}
