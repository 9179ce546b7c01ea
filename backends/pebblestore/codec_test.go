package pebblestore

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, st := range core.States {
		m := meta{topic: "orders.close", state: st, runAt: 1_700_000_000_123, attempt: 3, maxAttempts: 10,
			ttr: 30 * time.Second, updatedAt: 1_700_000_000_123_456_789}
		version := byte(metaVersion)
		if st == core.StateReserved {
			m.leaseExp, m.lease = 1_700_000_030_123, newLease()
			m.started, m.via = 1_700_000_000_100, viaCodes[core.ViaWebSocket]
			version = metaVersionAttempt
		}
		got, err := decodeMeta(m.encode())
		require.NoError(t, err)
		require.Equal(t, m, got)
		require.Equal(t, version, m.encode()[0], "without a priority, the first version's bytes unless reserved")

		// A priority: the second version, unless reserved.
		m.priority = -7
		enc := m.encode()
		if st != core.StateReserved {
			version = metaVersionPriority
		}
		require.Equal(t, version, enc[0])
		got, err = decodeMeta(enc)
		require.NoError(t, err)
		require.Equal(t, m, got)

		// An own retention: the full form, with and without ended
		// attempts.
		m.retention = 400 * 24 * time.Hour
		enc = m.encode()
		require.Equal(t, byte(metaVersionFull), enc[0])
		got, err = decodeMeta(enc)
		require.NoError(t, err)
		require.Equal(t, m, got)
		if st.Finished() {
			m.ended = encodeHistory([]core.Attempt{{Attempt: 3, StartedAt: time.UnixMilli(1_700_000_000_000).UTC(),
				EndedAt: time.UnixMilli(1_700_000_000_100).UTC(), Via: core.ViaPull, Outcome: core.OutcomeAcked}})
			got, err = decodeMeta(m.encode())
			require.NoError(t, err)
			require.Equal(t, m, got)
		}
		// Cut before the retention: corrupt.
		_, err = decodeMeta(enc[:len(enc)-1])
		require.Error(t, err, "a full form without its retention")
	}
}

// TestMetaReservedEarlierForm: a reserved meta written before attempts
// were kept (versions 1 and 2, no start or via) reads as an attempt
// started at its updated_at, via unknown.
func TestMetaReservedEarlierForm(t *testing.T) {
	for _, prio := range []int{0, 3} {
		m := meta{topic: "t", state: core.StateReserved, runAt: 1_700_000_000_123, attempt: 2, maxAttempts: 5,
			ttr: time.Minute, updatedAt: 1_700_000_000_456_789_000, leaseExp: 1_700_000_060_456, lease: newLease(), priority: prio}
		enc := m.encode()
		// The earlier form: the version of its priority, without what follows it.
		old := append([]byte(nil), enc[:len(enc)-binary.PutVarint(make([]byte, 10), m.started)-1]...)
		old[0] = metaVersion
		if prio != 0 {
			old[0] = metaVersionPriority
		} else {
			old = old[:len(old)-1] // no priority byte either
		}
		got, err := decodeMeta(old)
		require.NoError(t, err)
		want := m
		want.started, want.via = 1_700_000_000_456, 0
		require.Equal(t, want, got)
	}
}

// TestMetaEnded: a finished meta may carry the attempt that ended with
// the finish (metaVersionEnded), whatever its priority.
func TestMetaEnded(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	ended := encodeHistory([]core.Attempt{{Attempt: 1, StartedAt: at, EndedAt: at.Add(time.Second), Via: core.ViaPull, Outcome: core.OutcomeAcked}})
	for _, prio := range []int{0, -3} {
		m := meta{topic: "t", state: core.StateDone, runAt: 1, attempt: 1, maxAttempts: 5, ttr: time.Minute,
			updatedAt: 1_700_000_001_123_000_000, priority: prio, ended: ended}
		enc := m.encode()
		require.Equal(t, byte(metaVersionEnded), enc[0])
		got, err := decodeMeta(enc)
		require.NoError(t, err)
		require.Equal(t, m, got)
		j := &core.Job{ID: "j"}
		require.NoError(t, withHistory(j, &got, nil))
		require.Len(t, j.History, 1)
		_, err = decodeMeta(enc[:len(enc)-len(ended)])
		require.ErrorIs(t, err, errCorrupt, "no attempt after the priority")
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	h := []core.Attempt{
		{Attempt: 1, StartedAt: at, EndedAt: at.Add(1500 * time.Millisecond), Via: core.ViaPull, Outcome: core.OutcomeRetried, Error: "boom"},
		{Attempt: 2, StartedAt: at.Add(time.Hour), EndedAt: at.Add(time.Hour + 30*time.Second), Via: core.ViaWebhook, Outcome: core.OutcomeLeaseExpired},
		{Attempt: 1, StartedAt: at.Add(2 * time.Hour), EndedAt: at.Add(2 * time.Hour), Outcome: core.OutcomeAcked},
	}
	got, err := decodeHistory(encodeHistory(h))
	require.NoError(t, err)
	require.Equal(t, h, got)
	got, err = decodeHistory(nil)
	require.NoError(t, err)
	require.Nil(t, got)
	enc := encodeHistory(h)
	for _, bad := range [][]byte{{}, {9}, enc[:len(enc)-1], append(enc[:1:1], 1, 2, 2, 0, 9, 0)} {
		_, err := decodeHistory(bad)
		require.ErrorIs(t, err, errCorrupt, "%x", bad)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := record{key: "k", traceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		createdAt: 1_700_000_000_123_456_789, body: []byte(`{"a":1}`)}
	got, err := decodeRecord(r.encode())
	require.NoError(t, err)
	require.Equal(t, r, got)
	empty, err := decodeRecord((&record{}).encode())
	require.NoError(t, err)
	require.Nil(t, empty.body)

	// A retry schedule: version 2; without, the first version's bytes.
	r.delays = []time.Duration{time.Minute, 0, 1500 * time.Microsecond}
	enc := r.encode()
	require.Equal(t, byte(recordVersionDelays), enc[0])
	got, err = decodeRecord(enc)
	require.NoError(t, err)
	require.Equal(t, r, got)
	r.delays = nil
	require.Equal(t, byte(recordVersion), r.encode()[0])

	// A URL of its own: version 3, with or without a schedule.
	for _, delays := range [][]time.Duration{nil, {time.Second, 2 * time.Second}} {
		r.delays, r.url = delays, "https://hooks.example/a?b=1"
		enc := r.encode()
		require.Equal(t, byte(recordVersionURL), enc[0])
		got, err := decodeRecord(enc)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}

	// An expiry: version 4, with or without a schedule and a URL; a record
	// of that version without one is corrupt.
	for _, url := range []string{"", "https://hooks.example/a"} {
		for _, delays := range [][]time.Duration{nil, {time.Second}} {
			r.delays, r.url, r.expiresAt = delays, url, 1_700_000_060_123
			enc := r.encode()
			require.Equal(t, byte(recordVersionExpiry), enc[0])
			got, err := decodeRecord(enc)
			require.NoError(t, err)
			require.Equal(t, r, got)
		}
	}
	r.delays, r.url, r.expiresAt = nil, "", 0
	noExpiry := append([]byte{recordVersionExpiry}, r.encode()[1:]...)
	noExpiry = append(noExpiry[:len(noExpiry)-len(r.body)], 0, 0, 0)
	_, err = decodeRecord(noExpiry)
	require.ErrorIs(t, err, errCorrupt)

	// A next step: version 5, with or without an expiry.
	for _, expires := range []int64{0, 1_700_000_060_123} {
		r.expiresAt, r.then = expires, []byte(`{"topic":"next"}`)
		enc := r.encode()
		require.Equal(t, byte(recordVersionThen), enc[0])
		got, err := decodeRecord(enc)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
}

// TestTrailForms: an attempt in progress that names an instance or a
// consumer makes a reserved meta metaVersionFrom, with or without a
// retention; ended ones that do make an h value historyVersionFrom; and
// a record with changes is recordVersionChanges, with or without a next
// step. Without them the earlier forms are written, byte for byte.
func TestTrailForms(t *testing.T) {
	m := meta{topic: "t", state: core.StateReserved, runAt: 1_700_000_000_123, attempt: 2, maxAttempts: 5,
		ttr: 30 * time.Second, updatedAt: 1_700_000_000_123_456_789, leaseExp: 1_700_000_030_123, lease: newLease(),
		started: 1_700_000_000_100, via: viaCodes[core.ViaPull]}
	require.Equal(t, byte(metaVersionAttempt), m.encode()[0])
	m.instance, m.consumer = "host-a", "[::1]:40000"
	for _, retention := range []time.Duration{0, 48 * time.Hour} {
		m.retention = retention
		enc := m.encode()
		require.Equal(t, byte(metaVersionFrom), enc[0])
		got, err := decodeMeta(enc)
		require.NoError(t, err)
		require.Equal(t, m, got)
		require.Equal(t, core.Attempt{Attempt: 2, StartedAt: time.UnixMilli(m.started).UTC(), Via: core.ViaPull,
			Instance: "host-a", Consumer: "[::1]:40000"}, got.attemptInProgress())
	}

	at := time.UnixMilli(1_700_000_000_123).UTC()
	h := []core.Attempt{
		{Attempt: 1, StartedAt: at, EndedAt: at, Via: core.ViaWebhook, Outcome: core.OutcomeRetried, Error: "boom"},
		{Attempt: 2, StartedAt: at, EndedAt: at, Via: core.ViaGRPC, Instance: "host-a", Consumer: "10.0.0.1:1", Outcome: core.OutcomeAcked},
	}
	require.Equal(t, byte(historyVersion), encodeHistory(h[:1])[0])
	enc := encodeHistory(h)
	require.Equal(t, byte(historyVersionFrom), enc[0])
	got, err := decodeHistory(enc)
	require.NoError(t, err)
	require.Equal(t, h, got)

	for _, then := range [][]byte{nil, []byte(`{"topic":"next"}`)} {
		r := record{key: "k", createdAt: 1_700_000_000_123_456_789, then: then, body: []byte(`{}`),
			changes: []core.Change{{At: at, Kind: core.ChangeCreated, Via: core.OriginKafka, Token: "team-a"},
				{At: at.Add(time.Second), Kind: core.ChangeRequeued}}}
		enc := r.encode()
		require.Equal(t, byte(recordVersionChanges), enc[0])
		got, err := decodeRecord(enc)
		require.NoError(t, err)
		require.Equal(t, r, got)
		_, err = decodeRecord(enc[:len(enc)-len(r.body)-1])
		require.ErrorIs(t, err, errCorrupt, "cut in the changes")
	}
}

// FuzzDecode: the decoders of stored values refuse what they cannot read
// with an error, never a panic, and what they read encodes back the same.
func FuzzDecode(f *testing.F) {
	m := meta{topic: "t", state: core.StateReserved, runAt: 5, attempt: 1, maxAttempts: 2, ttr: time.Second, leaseExp: 9}
	f.Add(m.encode())
	f.Add((&record{key: "k", body: []byte("{}")}).encode())
	f.Add((&record{then: []byte(`{"topic":"t"}`), body: []byte("{}")}).encode())
	f.Add((&record{key: "k", delays: []time.Duration{time.Second, 0}, body: []byte("{}")}).encode())
	f.Add((&record{key: "k", url: "http://h/", body: []byte("{}")}).encode())
	f.Add((&record{key: "k", expiresAt: 1_700_000_000_000, body: []byte("{}")}).encode())
	f.Add((&record{changes: []core.Change{{Kind: core.ChangeCreated, Via: core.OriginHTTP, Token: "t"}}, body: []byte("{}")}).encode())
	m.instance, m.consumer = "i", "c"
	f.Add(m.encode())
	m.instance, m.consumer = "", ""
	m.priority = 3
	f.Add(m.encode())
	f.Add([]byte{metaVersion, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := decodeMeta(b); err == nil {
			again, err := decodeMeta(m.encode())
			require.NoError(t, err)
			require.Equal(t, m, again)
		}
		if r, err := decodeRecord(b); err == nil {
			again, err := decodeRecord(r.encode())
			require.NoError(t, err)
			require.Equal(t, r, again)
		}
	})
}

// TestRecordKey: recordKey reads the key of a record of every version, as
// decodeRecord does, and refuses what is not a record.
func TestRecordKey(t *testing.T) {
	for _, r := range []record{
		{key: "order:42 é", body: []byte(`{"n":1}`)},
		{body: []byte(`{}`)},
		{key: "k", delays: []time.Duration{time.Second}, url: "https://x/y", expiresAt: 5, then: []byte(`{}`), body: []byte(`1`)},
	} {
		raw := r.encode()
		k, err := recordKey(raw)
		require.NoError(t, err)
		require.Equal(t, r.key, k)
		full, err := decodeRecord(raw)
		require.NoError(t, err)
		require.Equal(t, full.key, k)
	}
	for _, bad := range [][]byte{nil, {0}, {recordVersion, 9, 'a'}} {
		_, err := recordKey(bad)
		require.ErrorIs(t, err, errCorrupt, "%q", bad)
	}
}
