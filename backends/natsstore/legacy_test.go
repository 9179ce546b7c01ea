package natsstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestUpgradeFromFirstLayout builds a stream of the first layout by hand
// (records on <prefix>.job.<id>), and requires New to refuse it, then,
// with Upgrade, to move exactly its unfinished jobs, in their states as of
// now (a reserved job whose lease ran out ready, a body byte for byte, a
// record rewritten twice once), and delete the old stream.
func TestUpgradeFromFirstLayout(t *testing.T) {
	t.Parallel()
	nc, err := sharedEmbedded(t).Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	prefix := uniquePrefix()
	var subjects []string
	for _, k := range []string{"job.*", "sched.>", "lead.>", "soon.>", "near.>", "ready.>", "lease.>", "expire.>", "dead.>", "fin.>"} {
		subjects = append(subjects, prefix+"."+k)
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: LegacyStream(prefix), Subjects: subjects, Retention: jetstream.WorkQueuePolicy,
		MaxMsgsPerSubject: 1, AllowDirect: true, AllowMsgTTL: true, AllowMsgSchedules: true,
	})
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Millisecond)
	rec := func(j *core.Job) {
		data, err := encodeRecord(j)
		require.NoError(t, err)
		_, err = js.Publish(ctx, prefix+".job."+j.ID, data)
		require.NoError(t, err)
	}
	mk := func(id string, state core.State) *core.Job {
		j := job("up", time.Hour)
		j.ID, j.State, j.CreatedAt, j.UpdatedAt = id, state, now, now
		return j
	}
	scheduled := mk("sched", core.StateScheduled)
	scheduled.Body = []byte(`{ "spaced":  [1, 2] }`)
	ready := mk("ready", core.StateScheduled)
	ready.RunAt = now.Add(-time.Minute)
	reserved := mk("resv", core.StateReserved)
	reserved.RunAt, reserved.Attempt, reserved.Lease, reserved.LeaseExpiresAt = now.Add(-time.Minute), 1, "old", now.Add(-time.Second)
	dead := mk("dead", core.StateDead)
	dead.LastError = "gave up"
	for _, j := range []*core.Job{scheduled, ready, reserved, dead, mk("done", core.StateDone), mk("cancelled", core.StateCancelled)} {
		rec(j)
	}
	rec(scheduled) // rewritten: moves to the stream's end, still one job
	rec(scheduled)

	_, err = New(ctx, Config{Conn: nc, Prefix: prefix})
	require.ErrorIs(t, err, ErrLegacyLayout)
	require.True(t, strings.Contains(err.Error(), "--nats-upgrade"), err.Error())

	s := openStore(t, nc, prefix, func(c *Config) { c.Upgrade = true })
	legacy, err := HasLegacyLayout(ctx, js, prefix)
	require.NoError(t, err)
	require.False(t, legacy, "the first layout's stream is still there")
	var got []*core.Job
	require.NoError(t, s.ExportJobs(ctx, func(j *core.Job) error { got = append(got, j); return nil }))
	byID := map[string]*core.Job{}
	for _, j := range got {
		byID[j.ID] = j
	}
	require.Len(t, byID, 4, "moved: %v", byID)
	require.Len(t, got, 4)
	require.Equal(t, core.StateScheduled, byID["sched"].State)
	require.Equal(t, string(scheduled.Body), string(byID["sched"].Body))
	require.Equal(t, core.StateReady, byID["ready"].State)
	require.Equal(t, core.StateReady, byID["resv"].State)
	require.Equal(t, core.LeaseExpired, byID["resv"].LastError)
	require.Equal(t, core.StateDead, byID["dead"].State)
	require.Equal(t, "gave up", byID["dead"].LastError)
	for _, id := range []string{"done", "cancelled"} {
		_, err := s.GetJob(ctx, id)
		require.ErrorIs(t, err, core.ErrNotFound, id)
	}
	claimed := claim(t, s, "up", 2, 5*time.Second)
	require.ElementsMatch(t, []string{"ready", "resv"}, []string{claimed[0].ID, claimed[len(claimed)-1].ID})
}

// TestNoLegacyLayout: a prefix without the first layout's stream has none.
func TestNoLegacyLayout(t *testing.T) {
	t.Parallel()
	nc, err := sharedEmbedded(t).Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	legacy, err := HasLegacyLayout(context.Background(), js, uniquePrefix())
	require.NoError(t, err)
	require.False(t, legacy)
}

// TestNewerFormatRefused requires New to refuse a stream whose format a
// later version wrote, naming it, and to leave the stream's format as it
// was (a downgrade must not rewrite it).
func TestNewerFormatRefused(t *testing.T) {
	t.Parallel()
	nc, err := sharedEmbedded(t).Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	prefix := uniquePrefix()
	openStore(t, nc, prefix) // this version's stream
	stream := newNames(prefix).stream
	st, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	cfg := st.CachedInfo().Config
	require.Equal(t, FormatVersion, cfg.Metadata[metaFormat])
	cfg.Metadata = map[string]string{metaFormat: "99"}
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	_, err = New(ctx, Config{Conn: nc, Prefix: prefix})
	require.ErrorIs(t, err, ErrNewerFormat)
	require.ErrorContains(t, err, "has format 99, this version writes "+FormatVersion)
	st, err = js.Stream(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, "99", st.CachedInfo().Config.Metadata[metaFormat], "the refusal left the stream as it was")
}
