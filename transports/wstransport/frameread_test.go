package wstransport

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// TestReadFrame checks that readFrame keeps a message up to the limit
// whole, keeps only limit+1 bytes of a longer one while counting all of
// it, never grows its buffer past limit+1 bytes, whatever the reads, and
// returns the reader's errors.
func TestReadFrame(t *testing.T) {
	t.Parallel()
	const limit = 1024
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"data+EOF": iotest.DataErrReader,
	}
	var buf []byte // reused, as the pool does
	for name, wrap := range readers {
		for _, size := range []int{0, 1, frameBufMin - 1, frameBufMin, frameBufMin + 1, limit - 1, limit, limit + 1, limit + 2, 3*limit + 7} {
			msg := bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]
			data, n, err := readFrame(wrap(bytes.NewReader(msg)), buf, limit)
			require.NoError(t, err, "%s %d", name, size)
			require.Equal(t, int64(size), n, "%s %d", name, size)
			require.LessOrEqual(t, cap(data), limit+1, "%s %d", name, size)
			if size <= limit {
				require.Equal(t, msg, data, "%s %d", name, size)
			} else {
				require.Equal(t, msg[:limit+1], data, "%s %d", name, size)
			}
			buf = data
		}
	}

	boom := errors.New("boom")
	data, n, err := readFrame(io.MultiReader(bytes.NewReader([]byte("ab")), iotest.ErrReader(boom)), nil, limit)
	require.ErrorIs(t, err, boom)
	require.Equal(t, "ab", string(data))
	require.Equal(t, int64(2), n)
	// An error while the rest of a long frame is thrown away.
	_, _, err = readFrame(io.MultiReader(bytes.NewReader(make([]byte, 2*limit)), iotest.ErrReader(boom)), nil, limit)
	require.ErrorIs(t, err, boom)
}
