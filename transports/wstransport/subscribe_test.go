package wstransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/transports/wstransport"
)

func TestDeliverAndAck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := "{ \"order\" : 42,\n \"html\": \"<&>\" }"
	id := b.push(t, "orders.close", body)
	c := b.subscribe(t, "orders.close", 4)

	f := c.nextJob(5 * time.Second)
	require.Equal(t, id, f.ID)
	require.Equal(t, "orders.close", f.Topic)
	require.Equal(t, body, string(f.Body), "the body is delivered byte for byte")
	require.Contains(t, string(f.raw), body)
	require.Equal(t, 1, f.Attempt)
	require.NotEmpty(t, f.Lease)
	require.True(t, f.LeaseExpiresAt.After(f.RunAt))
	require.Contains(t, string(f.raw), `"run_at":"`+b.job(t, id).RunAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")+`"`)

	c.ack(f)
	require.Equal(t, []string{id}, b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second))
	done := b.job(t, id)
	require.Equal(t, core.StateDone, done.State)
	require.Len(t, done.History, 1)
	require.Equal(t, core.ViaWebSocket, done.History[0].Via)
	require.Equal(t, core.OutcomeAcked, done.History[0].Outcome)
}

func TestPrefetchBoundsUnacknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pushN(t, "credits", 5)
	c := b.subscribe(t, "credits", 2)
	first := []serverFrame{c.nextJob(5 * time.Second), c.nextJob(5 * time.Second)}

	// With no credit left the connection claims nothing more.
	topic, err := b.engine.GetTopic(context.Background(), "credits")
	require.NoError(t, err)
	require.Equal(t, int64(2), topic.Counts.Reserved)
	require.Equal(t, int64(3), topic.Counts.Ready)

	// Each ack returns one credit, and one more job comes.
	c.ack(first[0])
	third := c.nextJob(5 * time.Second)
	c.ack(first[1])
	c.ack(third)
	fourth, fifth := c.nextJob(5*time.Second), c.nextJob(5*time.Second)
	c.ack(fourth)
	c.ack(fifth)
	ids := b.store.Wait(t, storetest.OutcomeAck, 5, 5*time.Second)
	require.Len(t, ids, 5)
}

// TestAckElsewhereReturnsCredit: a delivery acked through another
// transport of the instance (the HTTP API's ack route, gRPC Ack: both call
// the engine) gives the connection its credit back at once, not when the
// lease expires.
func TestAckElsewhereReturnsCredit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pushN(t, "elsewhere", 2, withTTR(time.Hour))
	c := b.subscribe(t, "elsewhere", 1)
	first := c.nextJob(5 * time.Second)
	require.NoError(t, b.engine.Ack(context.Background(), &core.AckJobParams{ID: first.ID, Lease: first.Lease}))
	second := c.nextJob(5 * time.Second)
	require.NotEqual(t, first.ID, second.ID)
}

func TestCompetingSubscribersEachJobOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 300
	subs := []*client{b.subscribe(t, "compete", 16), b.subscribe(t, "compete", 16)}
	ids := b.pushN(t, "compete", n)

	var (
		mu   sync.Mutex
		seen = map[string]int{}
		per  = make([]int, len(subs))
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	for i, c := range subs {
		wg.Go(func() {
			for {
				select {
				case f := <-c.frames:
					if f.Type != "job" {
						t.Errorf("subscriber %d got %s", i, f.raw)
						continue
					}
					mu.Lock()
					seen[f.ID]++
					per[i]++
					mu.Unlock()
					if err := c.trySend(map[string]string{"type": "ack", "id": f.ID, "lease": f.Lease}); err != nil {
						t.Errorf("ack: %v", err)
					}
				case <-stop:
					return
				}
			}
		})
	}
	acked := b.store.Wait(t, storetest.OutcomeAck, n, 20*time.Second)
	close(stop)
	wg.Wait()

	require.ElementsMatch(t, ids, acked, "every job is acknowledged once")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, n)
	for id, k := range seen {
		require.Equal(t, 1, k, "job %s arrived %d times", id, k)
	}
	t.Logf("deliveries per subscriber: %v", per)
	require.Positive(t, per[0], "the jobs are spread over both subscribers")
	require.Positive(t, per[1], "the jobs are spread over both subscribers")
}

func TestDisconnectReleasesHeldDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.pushN(t, "release", 5, withTTR(time.Hour))
	a := b.subscribe(t, "release", 5)
	got := map[string]bool{}
	for range 5 {
		got[a.nextJob(5*time.Second).ID] = true
	}
	require.Len(t, got, 5)

	other := b.subscribe(t, "release", 16)
	// The first subscriber disconnects mid-delivery, without a closing
	// handshake.
	closed := time.Now()
	require.NoError(t, a.conn.CloseNow())
	var again []string
	for range 5 {
		f := other.nextJob(2 * time.Second)
		require.Equal(t, 2, f.Attempt, "a released delivery counts as an attempt")
		again = append(again, f.ID)
		other.ack(f)
	}
	t.Logf("redelivered %d jobs %s after the disconnect", len(again), time.Since(closed))
	require.Less(t, time.Since(closed), 2*time.Second)
	require.ElementsMatch(t, ids, again)
	b.store.Wait(t, storetest.OutcomeAck, 5, 5*time.Second)
	for _, id := range ids {
		j := b.job(t, id)
		require.Equal(t, core.StateDone, j.State)
		require.Equal(t, "subscriber disconnected", j.LastError)
	}
}

func TestAckSentBeforeClosingCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acked := b.push(t, "lastack", `1`, withTTR(time.Hour))
	released := b.push(t, "lastack", `2`, withTTR(time.Hour))
	c := b.subscribe(t, "lastack", 2)
	frames := map[string]serverFrame{}
	for range 2 {
		f := c.nextJob(5 * time.Second)
		frames[f.ID] = f
	}
	c.ack(frames[acked])
	require.NoError(t, c.conn.Close(websocket.StatusNormalClosure, "bye"))
	b.store.Wait(t, storetest.OutcomeRetry, 1, 5*time.Second)
	require.Equal(t, core.StateDone, b.job(t, acked).State)
	j := b.job(t, released)
	require.Equal(t, core.StateReady, j.State)
	require.Equal(t, "subscriber disconnected", j.LastError)
}

func TestNackAndTouch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, "retry", `"x"`, withTTR(time.Minute))
	c := b.subscribe(t, "retry", 1)
	f := c.nextJob(5 * time.Second)

	c.send(map[string]string{"type": "touch", "id": f.ID, "lease": f.Lease})
	touched := c.next(5 * time.Second)
	require.Equal(t, "touched", touched.Type, "%s", touched.raw)
	require.Equal(t, id, touched.ID)
	require.False(t, touched.LeaseExpiresAt.Before(f.LeaseExpiresAt))

	c.send(map[string]any{"type": "nack", "id": f.ID, "lease": f.Lease, "delay": 0, "error": "try again"})
	again := c.nextJob(5 * time.Second)
	require.Equal(t, id, again.ID)
	require.Equal(t, 2, again.Attempt)
	require.NotEqual(t, f.Lease, again.Lease)
	require.Equal(t, "try again", b.job(t, id).LastError)

	// A nack with a delay schedules the retry.
	c.send(map[string]any{"type": "nack", "id": again.ID, "lease": again.Lease, "delay": "1h"})
	b.store.Wait(t, storetest.OutcomeRetry, 2, 5*time.Second)
	j := b.job(t, id)
	require.Equal(t, core.StateScheduled, j.State)
	require.WithinDuration(t, time.Now().Add(time.Hour), j.RunAt, time.Minute)
}

func TestBadFramesKeepTheConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, "bad", `{}`, withTTR(time.Minute))
	c := b.subscribe(t, "bad", 1)
	f := c.nextJob(5 * time.Second)

	for _, tc := range []struct {
		frame any
		code  string
		field string
	}{
		{`not json`, "invalid_argument", ""},
		{`[1,2]`, "invalid_argument", ""},
		{`{"type":"ack"`, "invalid_argument", ""},
		{`{"type":"ack","id":"a","lease":"l"} {}`, "invalid_argument", ""},
		{map[string]any{"type": "hello"}, "invalid_argument", "type"},
		{map[string]any{"id": f.ID, "lease": f.Lease}, "invalid_argument", "type"},
		{map[string]any{"type": "ack", "id": f.ID}, "invalid_argument", "lease"},
		{map[string]any{"type": "ack", "lease": f.Lease}, "invalid_argument", "id"},
		{map[string]any{"type": "ack", "id": f.ID, "lease": f.Lease, "extra": 1}, "invalid_argument", "extra"},
		{map[string]any{"type": "ack", "id": 7, "lease": f.Lease}, "invalid_argument", "id"},
		{map[string]any{"type": "ack", "id": f.ID, "lease": f.Lease, "delay": "1s"}, "invalid_argument", "delay"},
		{map[string]any{"type": "nack", "id": f.ID, "lease": f.Lease, "delay": "soon"}, "invalid_argument", "delay"},
		{map[string]any{"type": "nack", "id": f.ID, "lease": f.Lease, "delay": true}, "invalid_argument", "delay"},
		{map[string]any{"type": "nack", "id": f.ID, "lease": f.Lease, "delay": "-1s"}, "invalid_argument", "delay"},
		{map[string]any{"type": "ack", "id": f.ID, "lease": "not-the-lease"}, "conflict", ""},
		{map[string]any{"type": "touch", "id": f.ID, "lease": "not-the-lease"}, "conflict", ""},
		{map[string]any{"type": "ack", "id": "no-such-job", "lease": "x"}, "not_found", ""},
		{map[string]any{"type": "ack", "id": "bad id!", "lease": "x"}, "not_found", ""},
	} {
		c.send(tc.frame)
		e := c.nextError(tc.code)
		require.Equal(t, tc.field, e.Field, "frame %v: %s", tc.frame, e.raw)
	}
	// A binary message is answered too.
	require.NoError(t, c.conn.Write(context.Background(), websocket.MessageBinary, []byte(`{"type":"ack"}`)))
	c.nextError("invalid_argument")

	// The connection still works, and the delivery is still held.
	c.ack(f)
	b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second)
	next := b.push(t, "bad", `{}`)
	require.Equal(t, next, c.nextJob(5*time.Second).ID)
}

func TestErrorFrameNamesTheFrame(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.subscribe(t, "named", 1)
	c.send(map[string]any{"type": "ack", "id": "job-1", "lease": "x"})
	e := c.nextError("not_found")
	require.Equal(t, "job-1", e.ID)
	require.Contains(t, e.Message, "job-1")
}

func TestLostLeaseReturnsCredit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, "lost", `{}`, withTTR(time.Second))
	c := b.subscribe(t, "lost", 1)
	first := c.nextJob(5 * time.Second)
	// Unacknowledged past its ttr, the delivery's lease is lost: its credit
	// comes back and the job is delivered again.
	again := c.nextJob(5 * time.Second)
	require.Equal(t, id, again.ID)
	require.Equal(t, 2, again.Attempt)

	c.ack(first)
	e := c.nextError("conflict")
	require.Equal(t, id, e.ID)
	c.ack(again)
	b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second)
}

// padFrame pads a JSON frame with trailing spaces, which decoding allows,
// to exactly n bytes.
func padFrame(t *testing.T, frame string, n int) string {
	t.Helper()
	require.LessOrEqual(t, len(frame), n)
	return frame + strings.Repeat(" ", n-len(frame))
}

func ackFrame(f serverFrame) string {
	return `{"type":"ack","id":"` + f.ID + `","lease":"` + f.Lease + `"}`
}

// TestFrameOverSoftLimit checks that a frame over Config.MaxFrameBytes, up
// to and including Config.MaxFrameHardBytes, is ignored and answered with
// an invalid_argument error frame that names the limit, has no id and
// repeats nothing of the frame, and that the same connection then still
// acks its delivery.
func TestFrameOverSoftLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *wstransport.Config) { c.MaxFrameBytes, c.MaxFrameHardBytes = 4096, 16384 })
	id := b.push(t, "soft", `{}`, withTTR(time.Hour))
	c := b.subscribe(t, "soft", 1)
	j := c.nextJob(5 * time.Second)

	for _, size := range []int{4097, 10000, 16384} {
		// A valid ack but for its size: it must not be handled.
		c.send(padFrame(t, ackFrame(j), size))
		e := c.nextError("invalid_argument")
		require.Empty(t, e.ID, "frame %s", e.raw)
		require.Empty(t, e.Field, "frame %s", e.raw)
		require.Contains(t, e.Message, "limit of 4096 bytes")
		require.Contains(t, e.Message, fmt.Sprintf("has %d bytes", size))
		require.NotContains(t, string(e.raw), j.Lease)
		require.NotContains(t, string(e.raw), j.ID)
		require.Equal(t, core.StateReserved, b.job(t, id).State)
	}
	// A binary frame over the soft limit is refused too, and kept no more.
	require.NoError(t, c.conn.Write(t.Context(), websocket.MessageBinary, make([]byte, 8000)))
	c.nextError("invalid_argument")

	c.ack(j)
	b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second)
	done := b.job(t, id)
	require.Equal(t, core.StateDone, done.State)
	require.Equal(t, 1, done.Attempt)
	require.Equal(t, 1, b.ws.Subscribers())
}

// TestFrameAtSoftLimit checks that a frame of exactly Config.MaxFrameBytes
// is handled as any other.
func TestFrameAtSoftLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *wstransport.Config) { c.MaxFrameBytes = 4096 })
	ids := b.pushN(t, "atlimit", 2, withTTR(time.Hour))
	c := b.subscribe(t, "atlimit", 1)
	j := c.nextJob(5 * time.Second)
	touch := `{"type":"touch","id":"` + j.ID + `","lease":"` + j.Lease + `"}`
	c.send(padFrame(t, touch, 4096))
	touched := c.next(5 * time.Second)
	require.Equal(t, "touched", touched.Type, "frame %s", touched.raw)
	require.Equal(t, j.ID, touched.ID)

	c.send(padFrame(t, ackFrame(j), 4096))
	b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second)
	require.Equal(t, core.StateDone, b.job(t, j.ID).State)
	// Its credit came back: the other job is delivered on the same
	// connection.
	require.Contains(t, ids, c.nextJob(5*time.Second).ID)
}

// TestFrameOverHardCap checks that a frame over Config.MaxFrameHardBytes
// closes the connection with status 1009 and releases its delivery at
// once.
func TestFrameOverHardCap(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *wstransport.Config) { c.MaxFrameBytes, c.MaxFrameHardBytes = 4096, 8192 })
	id := b.push(t, "big", `{}`, withTTR(time.Hour))
	c := b.subscribe(t, "big", 1)
	j := c.nextJob(5 * time.Second)
	// The server may close before the whole frame is written.
	_ = c.trySend(padFrame(t, ackFrame(j), 8193))
	require.Equal(t, websocket.StatusMessageTooBig, c.closeStatus(5*time.Second))
	b.store.Wait(t, storetest.OutcomeRetry, 1, 5*time.Second)
	require.Equal(t, 2, b.subscribe(t, "big", 1).nextJob(5*time.Second).Attempt)
	require.Equal(t, core.StateReserved, b.job(t, id).State)
}

func TestUpgradeErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upgrade := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	requireErrorBody(t, b.get(t, http.MethodGet, "/v1/topics/a..b/subscribe", upgrade...), 400, "invalid_argument", "topic")
	for _, q := range []string{"0", "1001", "x", "1.5", "2&prefetch=3"} {
		requireErrorBody(t, b.get(t, http.MethodGet, "/v1/topics/t/subscribe?prefetch="+q, upgrade...), 400, "invalid_argument", "prefetch")
	}
	requireErrorBody(t, b.get(t, http.MethodGet, "/v1/topics/t/subscribe"), 400, "invalid_argument", "")
	requireErrorBody(t, b.get(t, http.MethodPost, "/v1/topics/t/subscribe"), 405, "method_not_allowed", "")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.ws.Stop(ctx))
	a := b.get(t, http.MethodGet, "/v1/topics/t/subscribe", upgrade...)
	requireErrorBody(t, a, 503, "unavailable", "")
	require.Equal(t, "1", a.header.Get("Retry-After"))
}

func TestConfig(t *testing.T) {
	t.Parallel()
	_, err := wstransport.New(wstransport.Config{})
	require.ErrorContains(t, err, "Engine")
	b := setup(t)
	_, err = wstransport.New(wstransport.Config{Engine: b.engine, ClaimWait: time.Hour})
	require.ErrorContains(t, err, "ClaimWait")
	_, err = wstransport.New(wstransport.Config{Engine: b.engine, MaxFrameBytes: 10})
	require.ErrorContains(t, err, "MaxFrameBytes")
	_, err = wstransport.New(wstransport.Config{Engine: b.engine, MaxFrameBytes: 4096, MaxFrameHardBytes: 4095})
	require.ErrorContains(t, err, "MaxFrameHardBytes")
	_, err = wstransport.New(wstransport.Config{Engine: b.engine, MaxFrameBytes: 4096, MaxFrameHardBytes: 4096})
	require.NoError(t, err)

	def := wstransport.Config{}.WithDefaults()
	require.Equal(t, int64(64<<10), def.MaxFrameBytes)
	require.Equal(t, int64(1<<20), def.MaxFrameHardBytes)
	// A soft limit over the default hard cap raises the cap with it.
	require.Equal(t, int64(2<<20), wstransport.Config{MaxFrameBytes: 2 << 20}.WithDefaults().MaxFrameHardBytes)
}

func TestStopClosesAndReleases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.pushN(t, "stop", 3, withTTR(time.Hour))
	c := b.subscribe(t, "stop", 3)
	for range 3 {
		c.nextJob(5 * time.Second)
	}
	require.Equal(t, 1, b.ws.Subscribers())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.ws.Stop(ctx))
	require.NoError(t, b.ws.Stop(ctx), "Stop is idempotent")
	require.Equal(t, websocket.StatusGoingAway, c.closeStatus(5*time.Second))
	require.Equal(t, 0, b.ws.Subscribers())
	for _, id := range ids {
		j := b.job(t, id)
		require.Equal(t, core.StateReady, j.State, "released when the server stopped")
		require.Equal(t, 1, j.Attempt)
	}
}

func TestPingClosesUnresponsiveSubscriber(t *testing.T) {
	t.Parallel()
	// The pong timeout leaves a reading client room to answer on a busy
	// machine; 100ms cut it under load.
	b := setup(t, func(c *wstransport.Config) {
		c.PingInterval = 50 * time.Millisecond
		c.PongTimeout = time.Second
	})
	id := b.push(t, "ping", `{}`, withTTR(time.Hour))
	// A client that never reads answers no ping.
	b.dial(t, "ping", 1, false)
	b.store.Wait(t, storetest.OutcomeRetry, 1, 5*time.Second)
	j := b.job(t, id)
	require.Equal(t, core.StateReady, j.State)
	require.Equal(t, "subscriber disconnected", j.LastError)

	// A reading client answers pings and keeps its connection.
	c := b.subscribe(t, "ping", 1)
	f := c.nextJob(5 * time.Second)
	// Keep it busy across several ping intervals: it stays connected.
	for start := time.Now(); time.Since(start) < 8*50*time.Millisecond; {
		c.send(map[string]string{"type": "touch", "id": f.ID, "lease": f.Lease})
		require.Equal(t, "touched", c.next(5*time.Second).Type)
	}
	c.ack(f)
	b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second)
}

func TestStuckSubscriberHoldsUpNobody(t *testing.T) {
	t.Parallel()
	// The write timeout must also let a subscriber that reads take a 1 MiB
	// frame on a machine busy with other tests: 300ms cut the reader below
	// too, under load.
	b := setup(t, func(c *wstransport.Config) {
		c.WriteTimeout = 2 * time.Second
		c.PingInterval = time.Hour
	})
	// Bodies of almost 1 MiB fill the socket buffers of a subscriber that
	// does not read, so a write to it blocks.
	big := `"` + strings.Repeat("x", 1<<20-100) + `"`
	ids := make([]string, 16)
	for i := range ids {
		ids[i] = b.push(t, "slow", big, withTTR(time.Hour))
	}
	b.dial(t, "slow", 16, false)

	// Meanwhile another topic's subscriber gets its jobs at once.
	fast := b.subscribe(t, "fast", 4)
	start := time.Now()
	for range 20 {
		b.push(t, "fast", `{}`)
		fast.ack(fast.nextJob(time.Second))
	}
	t.Logf("20 jobs of another topic in %s", time.Since(start))

	// The stuck subscriber is cut at its write timeout; what it held goes
	// to a subscriber that reads.
	reader := b.subscribe(t, "slow", 16)
	got := map[string]int{}
	for len(got) < len(ids) {
		f := reader.nextJob(10 * time.Second)
		got[f.ID] = f.Attempt
		reader.ack(f)
	}
	require.Len(t, got, len(ids))
	released := 0
	for _, a := range got {
		if a == 2 {
			released++
		}
	}
	require.Positive(t, released, "some deliveries were released by the stuck subscriber")
}

// TestManySubscribersChurn runs many subscribers that ack, nack, drop
// connections mid-delivery and reconnect, and checks that every job ends
// acknowledged exactly once.
func TestManySubscribersChurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		jobs        = 1000
		subscribers = 20
	)
	ids := b.pushN(t, "churn", jobs, withTTR(time.Hour), withMaxAttempts(core.MaxAttemptsMax))
	var (
		wg       sync.WaitGroup
		stop     = make(chan struct{})
		mu       sync.Mutex
		attempts = map[string]int{}
	)
	for i := range subscribers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				conn, _, err := websocket.Dial(ctx, b.url("churn", fmt.Sprintf("prefetch=%d", 1+rng.IntN(8))), &websocket.DialOptions{HTTPClient: b.http})
				cancel()
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				churnConn(conn, rng, stop, func(id string, attempt int) {
					mu.Lock()
					attempts[id] = max(attempts[id], attempt)
					mu.Unlock()
				})
			}
		})
	}
	acked := b.store.Wait(t, storetest.OutcomeAck, jobs, 60*time.Second)
	close(stop)
	wg.Wait()
	require.ElementsMatch(t, ids, acked, "every job is acknowledged exactly once")
	for _, id := range ids {
		require.Equal(t, core.StateDone, b.job(t, id).State)
	}
	redelivered := 0
	for _, a := range attempts {
		if a > 1 {
			redelivered++
		}
	}
	t.Logf("%d of %d jobs were delivered more than once", redelivered, jobs)
	require.Positive(t, redelivered)
}

// churnConn consumes on conn until it decides to drop it: most deliveries
// are acknowledged, some nacked, and now and then the connection is dropped
// with deliveries unacknowledged, with or without a closing handshake.
func churnConn(conn *websocket.Conn, rng *rand.Rand, stop <-chan struct{}, seen func(id string, attempt int)) {
	defer conn.CloseNow()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	for n := 0; ; n++ {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var f serverFrame
		if json.Unmarshal(data, &f) != nil || f.Type != "job" {
			continue
		}
		seen(f.ID, f.Attempt)
		switch r := rng.IntN(100); {
		case r < 5:
			if r < 2 {
				_ = conn.Close(websocket.StatusNormalClosure, "bye")
			}
			return // dropped mid-delivery
		case r < 15:
			_ = conn.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"type":"nack","id":%q,"lease":%q,"delay":0}`, f.ID, f.Lease))
		default:
			_ = conn.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"type":"ack","id":%q,"lease":%q}`, f.ID, f.Lease))
		}
	}
}

func TestSubscribersFuncCountsOpenSubscriptions(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	count := map[string]int{}
	b := setup(t, func(c *wstransport.Config) {
		c.SubscribersFunc = func(topic string, delta int) {
			mu.Lock()
			count[topic] += delta
			mu.Unlock()
		}
	})
	counted := func(topic string, want int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return count[topic] == want
		}
	}
	a := b.subscribe(t, "gauge.a", 1)
	b.subscribe(t, "gauge.a", 1)
	b.subscribe(t, "gauge.b", 1)
	require.Eventually(t, counted("gauge.a", 2), 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, counted("gauge.b", 1), 5*time.Second, 5*time.Millisecond)
	require.NoError(t, a.conn.CloseNow())
	require.Eventually(t, counted("gauge.a", 1), 5*time.Second, 5*time.Millisecond, "a closed subscription counts down")
}

// TestSlowAckHoldsUpNoOtherJob: the frames of different jobs are handled
// at once, so one slow store call does not stall a connection's acks.
func TestSlowAckHoldsUpNoOtherJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pushN(t, "slow", 2)
	var (
		first   atomic.Bool
		blocked = make(chan string, 1)
		release = make(chan struct{})
	)
	b.store.BeforeAck = func(id string) {
		if first.CompareAndSwap(false, true) {
			blocked <- id
			<-release // the first ack to reach the store waits for the other
		}
	}
	var unblock sync.Once
	defer unblock.Do(func() { close(release) })
	c := b.subscribe(t, "slow", 2)
	f1, f2 := c.nextJob(5*time.Second), c.nextJob(5*time.Second)
	c.ack(f1)
	c.ack(f2)
	acked := b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second)
	slow := <-blocked
	require.NotEqual(t, slow, acked[0], "the other job's ack went through while the slow one waited")
	unblock.Do(func() { close(release) })
	require.Equal(t, []string{slow}, b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second))
	require.ElementsMatch(t, []string{f1.ID, f2.ID}, []string{acked[0], slow})
}

// TestFramesOfOneJobInOrder: a touch then an ack of one job are handled
// in that order, even when the touch is slow.
func TestFramesOfOneJobInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, "order", `"x"`, withTTR(time.Minute))
	c := b.subscribe(t, "order", 1)
	f := c.nextJob(5 * time.Second)
	c.send(map[string]string{"type": "touch", "id": f.ID, "lease": f.Lease})
	c.ack(f)
	touched := c.next(5 * time.Second)
	require.Equal(t, "touched", touched.Type, "the touch answers before the ack settles the job: %s", touched.raw)
	require.Equal(t, []string{id}, b.store.Wait(t, storetest.OutcomeAck, 1, 5*time.Second))
}

// TestAcksWaitBeyondOpConcurrency: while the store holds every batch, all
// of a connection's acks reach the server's acker, not only the 64 frames
// a connection handles at once, so that the next batch carries them all:
// an ack waiting for its batch holds no slot of its connection (a burst on
// Redis was held to 64 acks per connection per batch's round trip).
func TestAcksWaitBeyondOpConcurrency(t *testing.T) {
	t.Parallel()
	var gate *wstransport.AckGate
	b := setupOver(t, func(s core.Store) core.Store { gate = wstransport.NewAckGate(s, 0); return gate })
	t.Cleanup(gate.Let)
	const n = 200 // more than the 64 frames a connection handles at once
	b.pushN(t, "manyacks", n, withTTR(time.Hour))
	b.subscribe(t, "manyacks", n).ackNext(n)
	sent := func() (batches, acks int) {
		sizes := gate.Sizes()
		for _, k := range sizes {
			acks += k
		}
		return len(sizes), acks
	}
	require.Eventually(t, func() bool {
		batches, acks := sent()
		return batches == wstransport.AcksInFlight && acks+b.ws.QueuedAcks() == n
	}, 10*time.Second, time.Millisecond, "every ack waits in the acker while the store holds its batches")
	gate.Let()
	b.store.Wait(t, storetest.OutcomeAck, n, 10*time.Second)
	batches, acks := sent()
	require.Equal(t, n, acks)
	require.Equal(t, wstransport.AcksInFlight+1, batches, "the acks that waited went in one batch")
}

// TestSlowStoreKeepsPongs: while the store holds a subscriber's acks, more
// of them than a connection handles at once, the connection goes on reading
// its pongs, so pings across several pong timeouts do not close it; once
// the store answers, every ack counts and deliveries go on.
func TestSlowStoreKeepsPongs(t *testing.T) {
	t.Parallel()
	var gate *wstransport.AckGate
	b := setupOver(t, func(s core.Store) core.Store { gate = wstransport.NewAckGate(s, 1); return gate }, func(c *wstransport.Config) {
		// A pong timeout a reading client meets on a busy machine (see
		// TestPingClosesUnresponsiveSubscriber).
		c.PingInterval = 100 * time.Millisecond
		c.PongTimeout = time.Second
	})
	// Cleanups run last first: the held acks go before the bundle stops.
	t.Cleanup(gate.Let)
	const n = 200 // more than the 64 frames a connection handles at once
	ids := b.pushN(t, "slowacks", n, withTTR(time.Hour))
	c := b.subscribe(t, "slowacks", n)
	c.ackNext(n)
	<-gate.Entered
	// Pings every 100 ms, each closing the connection unless its pong is
	// read within 1 s: 3.5 s of them, with every ack held.
	select {
	case <-c.done:
		t.Fatalf("the connection ended while the store held its acks: %v", c.err)
	case <-time.After(3500 * time.Millisecond):
	}
	gate.Let()
	b.store.Wait(t, storetest.OutcomeAck, n, 10*time.Second)
	for _, id := range ids {
		require.Equal(t, core.StateDone, b.job(t, id).State)
	}
	b.push(t, "slowacks", `{"after":"acks"}`)
	c.nextJob(5 * time.Second)
}
