package redisstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func TestHistoryField(t *testing.T) {
	at := time.UnixMilli(1_764_131_234_567).UTC()
	h := []core.Attempt{
		{Attempt: 1, StartedAt: at, EndedAt: at.Add(15 * time.Millisecond), Via: core.ViaPull, Outcome: core.OutcomeRetried, Error: "a,b:c|d"},
		{Attempt: 2, StartedAt: at.Add(time.Minute), EndedAt: at.Add(time.Minute + 30*time.Second), Via: core.ViaWebhook, Outcome: core.OutcomeLeaseExpired},
		{Attempt: 1, StartedAt: at.Add(time.Hour), EndedAt: at.Add(time.Hour), Outcome: core.OutcomeAcked},
	}
	enc := encodeHistory(h)
	require.Equal(t, "3|1,1764131234567,15,p,r,7:a,b:c|d2,1764131294567,30000,h,x,0:1,1764134834567,0,,a,0:", enc)
	got, err := decodeHistory(enc)
	require.NoError(t, err)
	require.Equal(t, h, got)
	require.Empty(t, encodeHistory(nil))
	require.Len(t, encodeHistory(h[2:]), 25, "an acked first attempt stays far below the 64 bytes of a listpack value")

	for _, bad := range []string{"", "x|", "2|1,1,1,p,a,0:", "1|1,1,1,p,q,0:", "1|1,1,1,p,a,9:ab", "1|1,1,1,p,a", "21|"} {
		_, err := decodeHistory(bad)
		require.ErrorIs(t, err, errHistory, "%q", bad)
	}
}

// TestHistoryAttemptInProgress: a reserved hash's attempt in progress is
// its attempt, its u (the claim's time) and its v.
func TestHistoryAttemptInProgress(t *testing.T) {
	j, err := decodeMap("id", map[string]string{fState: "reserved", fTopic: "t", fAttempt: "2", fUpdated: "1764131234567",
		fVia: "w", fHistory: "1|1,1764131200000,5,p,r,0:"})
	require.NoError(t, err)
	require.Equal(t, []core.Attempt{
		{Attempt: 1, StartedAt: time.UnixMilli(1_764_131_200_000).UTC(), EndedAt: time.UnixMilli(1_764_131_200_005).UTC(), Via: core.ViaPull, Outcome: core.OutcomeRetried},
		{Attempt: 2, StartedAt: time.UnixMilli(1_764_131_234_567).UTC(), Via: core.ViaWebSocket},
	}, j.History)
	ready, err := decodeMap("id", map[string]string{fState: "ready", fTopic: "t", fAttempt: "2", fVia: "w"})
	require.NoError(t, err)
	require.Empty(t, ready.History, "v is meaningful only while reserved")
}

// TestTrailFields: an attempt's instance and consumer ride in its via
// (encodeVia), in progress and ended; a job's changes are its C field.
func TestTrailFields(t *testing.T) {
	at := time.UnixMilli(1_764_131_234_567).UTC()
	v := encodeVia(&core.ClaimJobsParams{Via: core.ViaGRPC, Instance: "host-a", Consumer: "[::1]:40000"})
	require.Equal(t, "g/host-a/[::1]:40000", v)
	require.Equal(t, "p", encodeVia(&core.ClaimJobsParams{Via: core.ViaPull}), "without them, the letter alone")
	h := []core.Attempt{{Attempt: 1, StartedAt: at, EndedAt: at, Via: core.ViaGRPC, Instance: "host-a", Consumer: "[::1]:40000",
		Outcome: core.OutcomeAcked}}
	got, err := decodeHistory(encodeHistory(h))
	require.NoError(t, err)
	require.Equal(t, h, got)
	j, err := decodeMap("id", map[string]string{fState: "reserved", fTopic: "t", fAttempt: "1", fUpdated: "1764131234567", fVia: v})
	require.NoError(t, err)
	require.Equal(t, []core.Attempt{{Attempt: 1, StartedAt: at, Via: core.ViaGRPC, Instance: "host-a", Consumer: "[::1]:40000"}}, j.History)

	changes := []core.Change{{At: at, Kind: core.ChangeCreated, Via: core.OriginHTTP, Token: "team-a"},
		{At: at.Add(time.Second), Kind: core.ChangeRequeued}}
	enc := encodeChanges(changes)
	require.Equal(t, "c1764131234567,http,team-a|q1764131235567,,", enc)
	back, err := decodeChanges(enc, time.Time{})
	require.NoError(t, err)
	require.Equal(t, changes, back)
	back, err = decodeChanges("c,nats,|r1764131235567,grpc,b", at)
	require.NoError(t, err)
	require.Equal(t, []core.Change{{At: at, Kind: core.ChangeCreated, Via: core.OriginNATS},
		{At: at.Add(time.Second), Kind: core.ChangeReplaced, Via: core.OriginGRPC, Token: "b"}}, back, "a put's created entry: at the job's creation")
	require.Equal(t, "grpc,ops_1", putChange(&core.Job{Changes: []core.Change{{Via: core.OriginGRPC, Token: "ops|1"}}}))
	for _, bad := range []string{"", "x1,http,t", "c1,http", "cx,http,t", "c1,http,t|"} {
		_, err := decodeChanges(bad, at)
		require.ErrorIs(t, err, errChanges, "%q", bad)
	}
}
