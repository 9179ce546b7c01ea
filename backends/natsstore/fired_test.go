package natsstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// lastRaw reads a job's last message as stored, headers and all.
func lastRaw(t *testing.T, s *Store, id string) *jetstream.RawStreamMsg {
	t.Helper()
	m, err := s.stream.GetLastMsgForSubject(context.Background(), s.names.jobFilter(id))
	require.NoError(t, err)
	return m
}

// fireLate stores what nats-server stores when it fires sched, a schedule
// message it took up just before a write that replaces the schedule was
// applied: the schedule's message on the schedule's target, after the
// write, with the schedule's headers but the server's (nats-server's
// scheduler.go strips the scheduling, expectation, TTL and rollup ones;
// the others of sched are the direct get's), and its own. It returns the
// fired message's sequence.
func fireLate(t *testing.T, s *Store, sched *jetstream.RawStreamMsg) uint64 {
	t.Helper()
	m := nats.NewMsg(sched.Header.Get(hdrScheduleTarget))
	for k, v := range sched.Header {
		if !strings.HasPrefix(k, "Nats-") {
			m.Header[k] = v
		}
	}
	m.Header.Set(hdrScheduler, sched.Subject)
	m.Header.Set(hdrScheduleNext, "purge")
	m.Data = sched.Data
	ack, err := s.js.PublishMsg(context.Background(), m)
	require.NoError(t, err)
	return ack.Sequence
}

// requireGone checks that the message seq leaves the stream (a claim's
// acknowledgement of it is applied after the claim's answer).
func requireGone(t *testing.T, s *Store, seq uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := s.stream.GetMsg(context.Background(), seq)
		return errors.Is(err, jetstream.ErrMsgNotFound)
	}, 5*time.Second, 10*time.Millisecond, "the fired message is deleted")
}

// firedStore is a store on a clock a test moves ahead, and a message it
// holds for a claim.
type firedStore struct {
	*Store
	clock *shiftedClock
}

func newFiredStore(t *testing.T) *firedStore {
	clock := &shiftedClock{Clock: core.RealClock()}
	return &firedStore{Store: setup(t, func(c *Config) { c.Clock = clock }).store, clock: clock}
}

// claimAfter moves the store's clock past every time of the test's jobs,
// once the topic's fetcher holds the message seq, and claims the topic.
func (s *firedStore) claimAfter(t *testing.T, topic, id string, seq uint64) []*core.Job {
	t.Helper()
	q, err := s.queue(topic)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		held := q.byID[id]
		return held != nil && held.m.seq == seq
	}, 10*time.Second, 10*time.Millisecond, "the fetcher holds the fired message")
	s.clock.offset.Store(int64(2 * time.Hour))
	jobs, err := s.ClaimJobs(context.Background(), &core.ClaimJobsParams{Topic: topic, Max: 1})
	require.NoError(t, err)
	return jobs
}

// requireWriteStands claims j's topic once the fetcher holds the message
// fired (a fired message stored after a write): the claim takes nothing,
// the fired message is deleted, and j reads as the write left it, in
// state want.
func (s *firedStore) requireWriteStands(t *testing.T, j *core.Job, fired uint64, want core.State, msg string) {
	t.Helper()
	require.Empty(t, s.claimAfter(t, j.Topic, j.ID, fired), msg)
	requireGone(t, s.Store, fired)
	cur, err := s.GetJob(context.Background(), j.ID)
	require.NoError(t, err)
	require.Equal(t, want, cur.State)
}

// ackedLease puts j, due now, claims it and acknowledges it, and returns
// the lease schedule the ack replaced.
func (s *firedStore) ackedLease(t *testing.T, j *core.Job) *jetstream.RawStreamMsg {
	t.Helper()
	put(t, s.Store, j)
	got := claim(t, s.Store, j.Topic, 1, 5*time.Second)
	require.Len(t, got, 1)
	sched := lastRaw(t, s.Store, j.ID)
	require.Equal(t, kindLease, kindOfSubject(t, s.Store, sched.Subject))
	_, err := s.AckJob(context.Background(), &core.AckJobParams{ID: j.ID, Lease: got[0].Lease})
	require.NoError(t, err)
	return sched
}

// TestFiredAfterWrite: nats-server may fire a schedule it took up just
// before a write that replaces the schedule is applied, and store the fired
// message after the write, as the job's newest (seen on a three-node
// cluster: acks answered 204 and the job delivered again or found dead, a
// cancel answered 204 and the job delivered, each write answered after the
// schedule's time). Such a fired message is recognised as stale, by a
// claim and by a read, and deleted: the write stands.
func TestFiredAfterWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("lease after an ack", func(t *testing.T) {
		t.Parallel()
		s := newFiredStore(t)
		j := job("t", 0)
		sched := s.ackedLease(t, j)
		require.Equal(t, s.names.subject(kindDue, j.ID, j.Topic), sched.Header.Get(hdrScheduleTarget))
		fired := fireLate(t, s.Store, sched)

		s.requireWriteStands(t, j, fired, core.StateDone, "the acknowledged job is not delivered again")
	})

	t.Run("schedule after a cancel", func(t *testing.T) {
		t.Parallel()
		s := newFiredStore(t)
		j := job("t", time.Hour)
		put(t, s.Store, j)
		// The fetcher runs, as when claims wait.
		require.Empty(t, claim(t, s.Store, "t", 1, 0))
		sched := lastRaw(t, s.Store, j.ID)
		require.Equal(t, kindSched, kindOfSubject(t, s.Store, sched.Subject))
		require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: j.ID}))
		fired := fireLate(t, s.Store, sched)

		s.requireWriteStands(t, j, fired, core.StateCancelled, "the cancelled job is not delivered")
	})

	t.Run("last lease after an ack, read", func(t *testing.T) {
		t.Parallel()
		s := newFiredStore(t)
		j := job("t", 0)
		j.MaxAttempts = 1
		sched := s.ackedLease(t, j)
		require.Equal(t, s.names.subject(kindDead, j.ID, j.Topic), sched.Header.Get(hdrScheduleTarget))
		fired := fireLate(t, s.Store, sched)
		s.clock.offset.Store(int64(2 * time.Hour))

		// No consumer reads dead messages: a read finds it out.
		cur, err := s.GetJob(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, core.StateDone, cur.State, "the acknowledged job is not dead")
		requireGone(t, s.Store, fired)
	})
}

// kindOfSubject is the kind of a job message's subject.
func kindOfSubject(t *testing.T, s *Store, subject string) string {
	t.Helper()
	kind, _, _, ok := s.names.parse(subject)
	require.True(t, ok, subject)
	return kind
}

// stallingStream is a stream whose reads of a job's last message take
// stall on the store's clock: the answer comes late, as to an instance
// stopped (SIGSTOP) while the read was on its way.
type stallingStream struct {
	jetstream.Stream
	clock *shiftedClock
	stall time.Duration
}

func (s *stallingStream) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := s.Stream.GetLastMsgForSubject(ctx, subject)
	s.clock.offset.Add(int64(s.stall))
	return m, err
}

// TestReadViewsAsOfItsStart: a read shows the job as its message stood
// when the read began, not as of when the answer came. A history run had
// an instance stopped as it read a job under its last attempt's lease; an
// ack answered 204 meanwhile, and the read, answered 3 s later, showed the
// job dead (its lease run out by then), a state it never had.
func TestReadViewsAsOfItsStart(t *testing.T) {
	t.Parallel()
	s := newFiredStore(t)
	j := job("t", 0)
	j.MaxAttempts = 1
	put(t, s.Store, j)
	got := claim(t, s.Store, j.Topic, 1, 5*time.Second)
	require.Len(t, got, 1)
	s.stream = &stallingStream{Stream: s.stream, clock: s.clock, stall: 2 * time.Hour}

	cur, err := s.GetJob(context.Background(), j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateReserved, cur.State, "as the message stood when the read began")
	require.Equal(t, got[0].Lease, cur.Lease)
}
