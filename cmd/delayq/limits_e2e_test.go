package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestE2EMaxConnections runs the service with --max-connections 2: a third
// connection is not served while two are open, and is once one closes.
func TestE2EMaxConnections(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off", "--max-connections", "2")
	addr := strings.TrimPrefix(srv.HTTPURL, "http://")
	type conn struct {
		net.Conn
		rd *bufio.Reader
	}
	open := func() *conn {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		require.NoError(t, err)
		return &conn{Conn: c, rd: bufio.NewReader(c)}
	}
	answered := func(c *conn, within time.Duration) error {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(within)))
		res, err := http.ReadResponse(c.rd, nil)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		_, err = io.Copy(io.Discard, res.Body)
		require.Equal(t, http.StatusOK, res.StatusCode)
		return err
	}

	first, second := open(), open()
	require.NoError(t, answered(first, 10*time.Second))
	require.NoError(t, answered(second, 10*time.Second))
	// Both stay open (keep-alive), so the third waits to be accepted: no
	// answer in half a second, long for a health probe on loopback.
	third := open()
	var ne net.Error
	require.True(t, errors.As(answered(third, 500*time.Millisecond), &ne) && ne.Timeout(), "a third connection was served")
	require.NoError(t, first.Close())
	require.NoError(t, answered(third, 10*time.Second))
}
