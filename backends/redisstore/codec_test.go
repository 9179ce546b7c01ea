package redisstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// reservedPacked is a job as claim.lua packs it (cmsgpack): reserved, its
// 64-byte body in the job.
const reservedPacked = "\x8d\xa1a\x01\xa1s\xa8reserved\xa1b\xd9@" +
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" +
	"\xa1u\xcf\x00\x00\x01\xa2,\x1b\"J\xa1t\xa5burst\xa1v\xa0\xa1x\xcf\x00\x00\x01\xa2,\x1b\x97z" +
	"\xa1c\xcf\x00\x00\x01\xa2,\x1b\"J\xa1C\xa7c,http,\xa1m\x03\xa1l\xbbQ3TBTKFINC5PJIYJ7IEFL6YB2K1" +
	"\xa1r\xcf\x00\x00\x01\xa2,\x1b\x1eb\xa1d\xcdu0"

func TestDecodePacked(t *testing.T) {
	t.Parallel()
	j, err := decodePacked("id1", reservedPacked, nil)
	require.NoError(t, err)
	require.Equal(t, "burst", j.Topic)
	require.Equal(t, strings.Repeat("x", 64), string(j.Body))
	require.Equal(t, 1, j.Attempt)
	require.Equal(t, 3, j.MaxAttempts)
	require.Equal(t, "Q3TBTKFINC5PJIYJ7IEFL6YB2K1", j.Lease)
	require.Equal(t, int64(30000), j.TTR.Milliseconds())
	require.Equal(t, int64(0x1a22c1b1e62), j.RunAt.UnixMilli())
	require.Equal(t, int64(0x1a22c1b977a), j.LeaseExpiresAt.UnixMilli())

	// A body with a key of its own comes apart.
	j, err = decodePacked("id1", reservedPacked, []any{"apart"})
	require.NoError(t, err)
	require.Equal(t, "apart", string(j.Body))

	// Every kind of value a script may leave: a field it emptied (false,
	// nil), a whole number Lua packed as a double, a negative integer, a
	// string as bytes.
	raw, err := msgpack.Marshal(map[string]any{fState: "ready", fTopic: []byte("t"), fRunAt: float64(1764131234567),
		fAttempt: int64(0), fPriority: int64(-3), fMax: uint64(5), fKey: false, fLastError: nil, fTTR: int64(1000)})
	require.NoError(t, err)
	j, err = decodePacked("id2", string(raw), nil)
	require.NoError(t, err)
	require.Equal(t, "t", j.Topic)
	require.Equal(t, int64(1764131234567), j.RunAt.UnixMilli())
	require.Equal(t, -3, j.Priority)
	require.Equal(t, 5, j.MaxAttempts)
	require.Empty(t, j.Key)

	for _, bad := range []string{"", "\x81", "\x81\x01\x02", "\x81\xa1s\x91\x01", reservedPacked[:40]} {
		_, err := decodePacked("id3", bad, nil)
		require.Error(t, err, "%q", bad)
	}
}

func FuzzDecodePacked(f *testing.F) {
	f.Add(reservedPacked)
	f.Add("\x80")
	f.Add("\x81\xa1s\xa5ready")
	f.Fuzz(func(t *testing.T, raw string) {
		j, err := decodePacked("id", raw, nil)
		if err == nil && j == nil {
			t.Fatal("no job and no error")
		}
		// The fields read, packed again as strings, read the same.
		m, err := packedFields(raw)
		if err != nil {
			return
		}
		again, err := msgpack.Marshal(m)
		require.NoError(t, err)
		m2, err := packedFields(string(again))
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
}

func BenchmarkDecodePacked(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodePacked("id1", reservedPacked, nil); err != nil {
			b.Fatal(err)
		}
	}
}
