package apicompat_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// wsConn is a WebSocket subscription whose frames are recorded.
type wsConn struct {
	t    *testing.T
	conn *websocket.Conn
	tr   *transcript
}

// send writes a frame, written with placeholders.
func (c *wsConn) send(frame string) {
	c.t.Helper()
	c.tr.lines(">", frame)
	require.NoError(c.t, c.conn.Write(c.t.Context(), websocket.MessageText, []byte(c.tr.resolve(frame))))
}

// read waits for the next frame and records it.
func (c *wsConn) read() map[string]any {
	c.t.Helper()
	_, frame, err := c.conn.Read(c.t.Context())
	require.NoError(c.t, err)
	c.tr.collect(frame)
	c.tr.lines("<", string(frame))
	var v map[string]any
	require.NoError(c.t, json.Unmarshal(frame, &v))
	return v
}

// runWebSocketScenario subscribes to a topic with two due jobs and
// records the frames of each kind both ways in ws.txt; the jobs are pushed
// and the subscription counted through the HTTP run h.
func runWebSocketScenario(t *testing.T, b *testBundle, tr *transcript, h *httpRun) {
	h.do(httpStep{title: "for the subscriber", method: http.MethodPost, path: "/v1/jobs", token: tokenAdmin, body: `{"topic":"orders.ws","id":"ws-1","body":{"n":1},"priority":-2}`})
	h.do(httpStep{title: "for the subscriber", method: http.MethodPost, path: "/v1/jobs", token: tokenAdmin, body: `{"topic":"orders.ws","id":"ws-2","body":[2],"priority":-1}`})

	const path = "/v1/topics/orders.ws/subscribe?prefetch=2"
	tr.section("subscribe")
	tr.lines(">", "GET "+path)
	tr.lines(">", "Authorization: Bearer "+tokenConsume)
	conn, res, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(b.srv.URL, "http")+path, &websocket.DialOptions{
		HTTPClient: b.srv.Client(),
		HTTPHeader: http.Header{"Authorization": {"Bearer " + tokenConsume}},
	})
	require.NoError(t, err)
	defer conn.CloseNow()
	h.saw("GET /v1/topics/{topic}/subscribe", res.StatusCode)
	tr.lines("<", res.Status)
	for _, name := range slices.Sorted(maps.Keys(res.Header)) {
		// The accept key answers the client's random key.
		if name != "Sec-Websocket-Accept" && !slices.Contains(skippedHeaders, name) {
			tr.lines("<", name+": "+strings.Join(res.Header[name], ", "))
		}
	}
	c := &wsConn{t: t, conn: conn, tr: tr}

	tr.section("deliveries, most urgent first, up to prefetch")
	require.Equal(t, "ws-1", c.read()["id"])
	require.Equal(t, "ws-2", c.read()["id"])

	// Frames of one job are handled in order, so a frame answered after
	// one that is not shows that the first was handled.
	tr.section("touch")
	c.send(`{"type":"touch","id":"ws-1","lease":"<lease-1>"}`)
	c.read()
	tr.section("ack, then a touch of the lease it ended")
	c.send(`{"type":"ack","id":"ws-1","lease":"<lease-1>"}`)
	c.send(`{"type":"touch","id":"ws-1","lease":"<lease-1>"}`)
	c.read()
	tr.section("nack with a delay and an error, then an ack of the lease it ended")
	c.send(`{"type":"nack","id":"ws-2","lease":"<lease-2>","delay":"10s","error":"later"}`)
	c.send(`{"type":"ack","id":"ws-2","lease":"<lease-2>"}`)
	c.read()
	tr.section("bad frames")
	c.send(`{"type":"sleep","id":"ws-1"}`)
	c.read()
	c.send(`not json`)
	c.read()
	c.send(`{"type":"nack","id":"ws-2","lease":"x","delay":"soon"}`)
	c.read()
	c.send(`{"type":"ack","id":"ws-1"}`)
	c.read()
	tr.section("unknown job")
	c.send(`{"type":"ack","id":"nope","lease":"x"}`)
	c.read()
	require.NoError(t, conn.Close(websocket.StatusNormalClosure, ""))

	h.do(httpStep{title: "acked by the subscriber", method: http.MethodGet, path: "/v1/jobs/ws-1", token: tokenAdmin})
	h.do(httpStep{title: "nacked by the subscriber", method: http.MethodGet, path: "/v1/jobs/ws-2", token: tokenAdmin})
}
