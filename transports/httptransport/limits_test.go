package httptransport_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
)

// TestStalledBodyIsCut sends the headers of a 32 MiB batch and ten bytes of
// it, then nothing: the server answers 400 once the body read timeout has
// passed (a write timeout as short does not lose the answer) and closes
// the connection.
func TestStalledBodyIsCut(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) {
		c.bodyReadTimeout = 200 * time.Millisecond
		c.writeTimeout = 200 * time.Millisecond
	})
	conn, err := net.Dial("tcp", b.srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	// Bounds the test only: the server must close the connection long before.
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = fmt.Fprintf(conn, "POST /v1/jobs/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"jobs\":[", 32<<20)
	require.NoError(t, err)

	rd := bufio.NewReader(conn)
	res, err := http.ReadResponse(rd, nil)
	require.NoError(t, err, "the server did not answer a stalled body")
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "body: %s", body)
	require.Contains(t, string(body), "did not arrive")
	// The connection is closed: the read ends with EOF, not the deadline.
	_, err = rd.ReadByte()
	require.ErrorIs(t, err, io.EOF)
	require.Empty(t, storeLen(t, b.store))
}

// TestIntakeQuota checks a token's intake quota: over it, a push and a
// batch get 429 rate_limited with Retry-After and store nothing, a batch
// larger than the burst gets 413, and another token is unaffected.
func TestIntakeQuota(t *testing.T) {
	t.Parallel()
	tokens, err := auth.NewTokens([]auth.Token{
		// One job per 100 seconds after a burst of 3, on the fake clock.
		{Name: "slow", Token: "slow-secret-0123456789", Scopes: []auth.Scope{auth.ScopePush}, IntakeRate: 0.01, IntakeBurst: 3},
		{Name: "free", Token: "free-secret-0123456789", Scopes: []auth.Scope{auth.ScopePush}},
	})
	require.NoError(t, err)
	b := setup(t, func(c *setupConfig) { c.tokens = tokens })
	tokens.NowFunc = b.clock.Now
	slow := []string{"Authorization", "Bearer slow-secret-0123456789"}
	free := []string{"Authorization", "Bearer free-secret-0123456789"}

	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"q","id":"s-1"}`, slow...), http.StatusCreated)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"q","id":"s-2"},{"topic":"q","id":"s-3"}]}`, slow...), http.StatusOK)
	stored := storeLen(t, b.store)
	require.Equal(t, 3, stored)

	for _, req := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/jobs", `{"topic":"q","id":"s-4"}`},
		{http.MethodPut, "/v1/jobs/s-5", `{"topic":"q"}`},
		{http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"q","id":"s-6"}]}`},
	} {
		res := b.do(t, req.method, req.path, req.body, slow...)
		requireError(t, res, http.StatusTooManyRequests, "rate_limited", "")
		after, err := strconv.Atoi(res.header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After: %q", res.header.Get("Retry-After"))
		require.Equal(t, 100, after)
		require.Contains(t, string(res.body), `token \"slow\"`)
	}
	// More jobs than the burst can never pass: retrying will not help.
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"q"},{"topic":"q"},{"topic":"q"},{"topic":"q"}]}`, slow...),
		http.StatusRequestEntityTooLarge, "too_large", "jobs")
	require.Equal(t, stored, storeLen(t, b.store), "a refused request stored jobs")
	// Retry-After is right: then the quota holds a job again.
	b.clock.Advance(100 * time.Second)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"q","id":"s-7"}`, slow...), http.StatusCreated)
	stored++

	for i := range 5 {
		requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", fmt.Sprintf(`{"topic":"q","id":"f-%d"}`, i), free...), http.StatusCreated)
	}
	require.Equal(t, stored+5, storeLen(t, b.store))
}

// storeLen counts the jobs of a store.
func storeLen(t *testing.T, s core.Store) int {
	t.Helper()
	ts, err := s.ListTopicStates(t.Context())
	require.NoError(t, err)
	var n int64
	for _, tp := range ts {
		c := tp.Counts
		n += c.Scheduled + c.Ready + c.Reserved + c.Dead
	}
	return int(n)
}
