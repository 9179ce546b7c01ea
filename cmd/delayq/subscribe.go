package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
)

// Reconnection backoff of `delayq subscribe`.
const (
	subscribeBackoffMin = 100 * time.Millisecond
	subscribeBackoffMax = 10 * time.Second
	// subscribeStable is how long a connection must have lasted, when it
	// delivered nothing, for the backoff to start over.
	subscribeStable = 10 * time.Second
	// subscribeConnectAttempts bounds the attempts of a subscription that
	// never began, so that a wrong --server fails within seconds; once
	// subscribed, a lost connection is made again without bound.
	subscribeConnectAttempts = 6
	// subscribeReadLimit bounds a frame from the server: a job body of the
	// largest allowed size and its envelope, with room to spare.
	subscribeReadLimit = 64 << 20
)

// subscribeCommand is `delayq subscribe TOPIC`.
func (a *app) subscribeCommand() *cobra.Command {
	var (
		flags    clientFlags
		prefetch int
		noAck    bool
	)
	cmd := &cobra.Command{
		Use:   "subscribe TOPIC",
		Short: "Print a topic's deliveries as they come, and acknowledge them",
		Long: `Subscribe to a topic over the service's WebSocket route and print each delivery
as one JSON line on standard output: id, topic, body, attempt, run_at, lease and
lease_expires_at. Each is acknowledged once printed, unless --no-ack is given:
then deliveries are only shown, held until their ttr passes (or until this
command exits, which hands them back at once) and delivered again.

It competes with the topic's other consumers: each delivery goes to one of them.
A first connection that cannot be made is tried 6 times, in about 3s, then
the command exits 1. Once subscribed, a lost connection is made again, with a
growing pause (at most 10s), until the command is interrupted (Ctrl-C), which
ends it with exit code 0. A topic delivered by webhook or NATS is refused.`,
		Example: `  delayq subscribe orders.close
  delayq subscribe orders.close --prefetch 64 | jq .body`,
		Args: cobra.ExactArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			if prefetch < 1 || prefetch > 1000 {
				return usageErrorf("invalid --prefetch %d: want 1 to 1000", prefetch)
			}
			if err := consumerTopic(ctx, c, args[0]); err != nil {
				return err
			}
			s := &subscriber{
				client:   c,
				url:      subscribeURL(c.base, args[0], prefetch),
				topic:    args[0],
				prefetch: prefetch,
				ack:      !noAck,
				table:    c.output == outputTable,
				out:      cmd.OutOrStdout(),
				log:      cmd.ErrOrStderr(),
			}
			return s.run(ctx)
		}),
	}
	fs := cmd.Flags()
	addClientFlags(fs, &flags)
	fs.IntVar(&prefetch, "prefetch", 16, "most deliveries held unacknowledged at once (1-1000)")
	fs.BoolVar(&noAck, "no-ack", false, "print deliveries without acknowledging them")
	withEnv(fs, "prefetch", "no-ack")
	return cmd
}

// subscribeURL returns the WebSocket URL of a topic's subscribe route on
// the service at base (http or https).
func subscribeURL(base, topic string, prefetch int) string {
	u := "ws" + strings.TrimPrefix(base, "http")
	return u + "/v1/topics/" + url.PathEscape(topic) + "/subscribe?prefetch=" + strconv.Itoa(prefetch)
}

// subscriber is one run of `delayq subscribe`.
type subscriber struct {
	client   *cliClient
	url      string
	topic    string
	prefetch int
	ack      bool
	// table prints deliveries as rows under a header (--output table).
	table  bool
	headed bool
	// subscribed is set once a connection was made: from then on a lost
	// one is made again for ever, while before it the attempts are
	// bounded.
	subscribed bool
	out, log   io.Writer
}

// dialError is a connection that could not be made: nothing answered.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// permanentError ends the command instead of reconnecting: the server
// refused the subscription, or the output cannot be written.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// run subscribes and prints deliveries until ctx is done, reconnecting with
// a capped, jittered backoff. It returns nil when ctx is done, and an error
// when the first connection failed subscribeConnectAttempts times.
func (s *subscriber) run(ctx context.Context) error {
	wait := subscribeBackoffMin
	for attempt := 1; ; attempt++ {
		start := time.Now()
		delivered, err := s.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if pe, ok := errors.AsType[*permanentError](err); ok {
			return pe.err
		}
		if delivered > 0 || time.Since(start) >= subscribeStable {
			wait = subscribeBackoffMin
		}
		// Full jitter over the upper half, so that many subscribers of a
		// restarted server do not come back at one instant.
		pause := wait/2 + rand.N(wait/2+1)
		switch _, dial := errors.AsType[*dialError](err); {
		case s.subscribed:
			fmt.Fprintf(s.log, "delayq: subscription to %s lost: %v; reconnecting in %s\n", s.topic, err, pause.Round(time.Millisecond))
		case attempt == subscribeConnectAttempts && dial:
			return &exitCodeError{code: exitError, err: fmt.Errorf("cannot connect to %s (--server, DELAYQ_SERVER) after %d attempts: %w", s.client.base, attempt, err)}
		case attempt == subscribeConnectAttempts:
			return err
		case attempt == 1:
			fmt.Fprintf(s.log, "delayq: cannot subscribe to %s at %s yet: %v; retrying %d times\n", s.topic, s.client.base, err, subscribeConnectAttempts-1)
		}
		wait = min(wait*2, subscribeBackoffMax)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// session runs one connection until it ends and returns how many
// deliveries it printed and why it ended.
func (s *subscriber) session(ctx context.Context) (int, error) {
	conn, res, err := websocket.Dial(ctx, s.url, &websocket.DialOptions{HTTPClient: s.client.http, HTTPHeader: s.client.header()})
	if err != nil {
		if res != nil && res.StatusCode >= 400 && res.StatusCode < 500 &&
			res.StatusCode != http.StatusRequestTimeout && res.StatusCode != http.StatusTooManyRequests {
			body, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
			return 0, &permanentError{err: decodeAPIError(res.StatusCode, body)}
		}
		if res != nil && res.StatusCode != 0 {
			body, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
			return 0, decodeAPIError(res.StatusCode, body)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, &dialError{err: err}
	}
	defer conn.CloseNow()
	s.subscribed = true
	conn.SetReadLimit(subscribeReadLimit)
	fmt.Fprintf(s.log, "delayq: subscribed to %s (prefetch %d)\n", s.topic, s.prefetch)

	// An interrupt closes the connection with a closing handshake, so the
	// server hands back what this subscriber held at once; the read below
	// then ends.
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(closed)
		_ = conn.Close(websocket.StatusNormalClosure, "interrupted")
	})
	defer func() {
		if !stop() {
			<-closed
		}
	}()

	delivered := 0
	for {
		typ, data, err := conn.Read(context.Background())
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusGoingAway {
				err = errors.New("the server is shutting down")
			}
			return delivered, err
		}
		if typ != websocket.MessageText {
			continue
		}
		var f subscribeFrame
		if err := json.Unmarshal(data, &f); err != nil {
			fmt.Fprintf(s.log, "delayq: ignoring a frame that is not JSON: %.200s\n", data)
			continue
		}
		switch f.Type {
		case "job":
			if err := s.print(&f); err != nil {
				return delivered, &permanentError{err: fmt.Errorf("writing a delivery: %w", err)}
			}
			delivered++
			if s.ack {
				ack, _ := json.Marshal(map[string]string{"type": "ack", "id": f.ID, "lease": f.Lease})
				wctx, cancel := context.WithTimeout(context.Background(), clientRequestTimeout)
				err := conn.Write(wctx, websocket.MessageText, ack)
				cancel()
				if err != nil {
					return delivered, err
				}
			}
		case "error":
			fmt.Fprintf(s.log, "delayq: the server refused a frame for job %q: %s: %s\n", f.ID, f.Code, f.Message)
		}
	}
}

// subscribeFrame is a frame from the server: a job, or an error.
type subscribeFrame struct {
	Type           string          `json:"type"`
	ID             string          `json:"id"`
	Topic          string          `json:"topic"`
	Body           json.RawMessage `json:"body"`
	Attempt        int             `json:"attempt"`
	RunAt          string          `json:"run_at"`
	Lease          string          `json:"lease"`
	LeaseExpiresAt string          `json:"lease_expires_at"`
	Code           string          `json:"code"`
	Message        string          `json:"message"`
}

// deliveryLine is how a delivery is printed.
type deliveryLine struct {
	ID             string          `json:"id"`
	Topic          string          `json:"topic"`
	Body           json.RawMessage `json:"body"`
	Attempt        int             `json:"attempt"`
	RunAt          string          `json:"run_at"`
	Lease          string          `json:"lease"`
	LeaseExpiresAt string          `json:"lease_expires_at"`
}

// print writes a delivery as one compact JSON line; the body is compacted,
// not otherwise changed.
func (s *subscriber) print(f *subscribeFrame) error {
	d := &deliveryLine{
		ID: f.ID, Topic: f.Topic, Body: f.Body, Attempt: f.Attempt,
		RunAt: f.RunAt, Lease: f.Lease, LeaseExpiresAt: f.LeaseExpiresAt,
	}
	if !s.table {
		return writeDelivery(s.out, d)
	}
	// Each row is written as it comes, so the columns are of fixed width
	// (the longest id delayq makes, a time to the millisecond) rather than
	// aligned over rows not yet come.
	if !s.headed {
		s.headed = true
		if _, err := fmt.Fprintf(s.out, subscribeRow, "ID", "ATTEMPT", "RUN_AT", "LEASE_EXPIRES_AT", "LEASE", "BODY"); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(s.out, subscribeRow, cellReplacer.Replace(d.ID), strconv.Itoa(d.Attempt), d.RunAt, d.LeaseExpiresAt,
		d.Lease, cellReplacer.Replace(cellJSON(d.Body)))
	return err
}

// subscribeRow is the format of a row of `delayq subscribe --output table`:
// the ID column holds a ULID (26 characters) and the ids delayq derives
// (core.IsDerivedID: a prefix and 32 hex digits, 34), so that rows of a
// topic with unique keys or schedules stay aligned; LEASE is a ULID's
// width (a longer lease pushes BODY along).
const subscribeRow = "%-34s  %7s  %-24s  %-24s  %-26s  %s\n"

// writeDelivery writes d to w as one compact JSON line, as subscribe and
// claim print deliveries; the body is compacted, not otherwise changed.
func writeDelivery(w io.Writer, d *deliveryLine) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}
