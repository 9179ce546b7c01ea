package webhook

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/transports/wire"
)

// request is what the test server saw of one request.
type request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

type testBundle struct {
	d     *Deliverer
	clock *coretest.FakeClock
	srv   *httptest.Server
	// reqs receives every request the server sees, before its handler runs.
	reqs chan request
	// conns counts connections the server accepted.
	conns *atomic.Int64
	// release is closed when the test ends, to unblock blocking handlers.
	release chan struct{}
}

// setup starts a test server on 127.0.0.1 that records each request and
// then runs handler.
func setup(t *testing.T, handler http.HandlerFunc) *testBundle {
	t.Helper()
	b := &testBundle{
		clock:   coretest.NewFakeClockAt(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)),
		reqs:    make(chan request, 64),
		conns:   new(atomic.Int64),
		release: make(chan struct{}),
	}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		b.reqs <- request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
		handler(w, r)
	}))
	b.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	b.srv.Start()
	t.Cleanup(b.srv.Close)
	t.Cleanup(func() { close(b.release) }) // runs before srv.Close
	b.d = New(Config{Clock: b.clock, UserAgent: "delayq-test/1"})
	t.Cleanup(b.d.CloseIdleConnections)
	return b
}

// block is a handler that holds the request until the client gives up or the
// test ends; started, when not nil, is signalled once the request arrived.
func (b *testBundle) block(started chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if started != nil {
			started <- struct{}{}
		}
		select {
		case <-r.Context().Done():
		case <-b.release:
		}
	}
}

func (b *testBundle) topic() *core.Topic {
	t := core.Topic{Name: "orders.close", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: b.srv.URL + "/hook"}}.WithDefaults()
	return &t
}

func testJob() *core.Job {
	return &core.Job{
		ID:          "01JD0000000000000000000000",
		Topic:       "orders.close",
		Body:        json.RawMessage(`{ "order" : 42, "note": "<a&b>",  "price": 1.50 }`),
		RunAt:       time.Date(2026, 11, 21, 10, 0, 0, 250_000_000, time.UTC),
		Attempt:     3,
		MaxAttempts: 10,
		State:       core.StateReserved,
		Lease:       "lease-1",
	}
}

// answer returns a handler that answers status, headers and body.
func answerWith(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func TestDeliverRequest(t *testing.T) {
	t.Parallel()

	t.Run("HeadersAndExactBody", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusNoContent, ""))
		topic := b.topic()
		topic.Delivery.Secret = "s3cr3t"
		job := testJob()
		job.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		// A run_at in another zone goes out in UTC.
		job.RunAt = job.RunAt.In(time.FixedZone("CET", 3600))

		require.NoError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: job}))

		req := <-b.reqs
		require.Equal(t, http.MethodPost, req.Method)
		require.Equal(t, "/hook", req.Path)
		want := `{"id":"01JD0000000000000000000000","topic":"orders.close",` +
			`"body":{ "order" : 42, "note": "<a&b>",  "price": 1.50 },` +
			`"attempt":3,"run_at":"2026-11-21T10:00:00.250Z"}`
		require.Equal(t, want, string(req.Body))
		require.Equal(t, "application/json", req.Header.Get("Content-Type"))
		require.Equal(t, "delayq-test/1", req.Header.Get("User-Agent"))
		require.Equal(t, job.ID, req.Header.Get("Delayq-Id"))
		require.Equal(t, "3", req.Header.Get("Delayq-Attempt"))
		require.Equal(t, "2026-11-21T10:00:00.250Z", req.Header.Get("Delayq-Run-At"))
		require.Equal(t, job.TraceParent, req.Header.Get("traceparent"))

		sig := req.Header.Get("Delayq-Signature")
		require.Equal(t, Sign("s3cr3t", b.clock.Now(), req.Body), sig)
		require.True(t, strings.HasPrefix(sig, "t=1795255200,v1="), sig)
		require.NoError(t, Verify("s3cr3t", sig, req.Body, b.clock.Now(), time.Minute))
		require.ErrorIs(t, Verify("s3cr3t", sig, append(req.Body, ' '), b.clock.Now(), time.Minute), ErrSignatureMismatch)
	})

	t.Run("RotationSignsWithBothSecrets", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusNoContent, ""))
		topic := b.topic()
		topic.Delivery.Secret, topic.Delivery.PreviousSecret = "new-secret", "old-secret"
		job := testJob()
		require.NoError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: job}))
		req := <-b.reqs
		for _, s := range []string{"new-secret", "old-secret"} {
			require.NoError(t, Verify(s, req.Header.Get("Delayq-Signature"), req.Body, b.clock.Now(), time.Minute), s)
		}
		require.Equal(t, job.ID, req.Header.Get("Webhook-Id"), "stable across attempts: the job id")
		require.Equal(t, "1795255200", req.Header.Get("Webhook-Timestamp"))
		require.Len(t, strings.Fields(req.Header.Get("Webhook-Signature")), 2)
	})

	t.Run("TopicMethodAndHeaders", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusNoContent, ""))
		topic := b.topic()
		topic.Delivery.Method = http.MethodPut
		topic.Delivery.Headers = map[string]string{"authorization": "Bearer t0ken", "X-Api-Key": "k3y"}
		require.NoError(t, topic.Validate())
		require.NoError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: testJob()}))
		req := <-b.reqs
		require.Equal(t, http.MethodPut, req.Method)
		require.Equal(t, "Bearer t0ken", req.Header.Get("Authorization"))
		require.Equal(t, "k3y", req.Header.Get("X-Api-Key"))
		require.Equal(t, "application/json", req.Header.Get("Content-Type"))
	})

	t.Run("NoSecretNoTrace", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusOK, "ok"))
		job := testJob()
		job.Body = nil
		require.NoError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: b.topic(), Job: job}))
		req := <-b.reqs
		require.Empty(t, req.Header.Values("Delayq-Signature"))
		// A job pushed without a traceparent still gets one, unsampled,
		// whose trace id every attempt of the job shares.
		tp := req.Header.Get("traceparent")
		require.True(t, wire.ValidTraceParent(tp), tp)
		require.True(t, strings.HasPrefix(tp, "00-") && strings.HasSuffix(tp, "-00"), tp)
		job.Attempt++
		require.NoError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: b.topic(), Job: job}))
		again := (<-b.reqs).Header.Get("traceparent")
		require.Equal(t, tp[:36], again[:36], "one trace for the job's attempts")
		require.NotEqual(t, tp[36:52], again[36:52], "a parent id per attempt")
		require.Contains(t, string(req.Body), `"body":null,`)
		require.True(t, json.Valid(req.Body))
	})

	t.Run("DefaultUserAgent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusOK, ""))
		d := New(Config{})
		t.Cleanup(d.CloseIdleConnections)
		require.NoError(t, d.Deliver(context.Background(), &core.DeliverParams{Topic: b.topic(), Job: testJob()}))
		require.Equal(t, UserAgentDefault, (<-b.reqs).Header.Get("User-Agent"))
	})
}

func TestDeliverOutcome(t *testing.T) {
	t.Parallel()

	t.Run("Status2xx", func(t *testing.T) {
		t.Parallel()
		for _, status := range []int{200, 201, 202, 204, 299} {
			b := setup(t, answerWith(status, `{"ignored": true}`))
			require.NoError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: b.topic(), Job: testJob()}), "status %d", status)
		}
	})

	t.Run("Non2xx", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusServiceUnavailable, "down for\n  maintenance\n", "Retry-After", "7"))
		topic := b.topic()
		topic.Delivery.ErrorBody = true
		err := b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: testJob()})
		require.EqualError(t, err, "status 503: down for maintenance")
		var se *StatusError
		require.ErrorAs(t, err, &se)
		require.Equal(t, http.StatusServiceUnavailable, se.Status)
		require.Equal(t, 7*time.Second, se.RetryAfter())
	})

	t.Run("Non2xxEmptyAnswer", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusNotFound, ""))
		require.EqualError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: b.topic(), Job: testJob()}), "status 404")
	})

	t.Run("LongAnswerCut", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusInternalServerError, strings.Repeat("é", 300)))
		topic := b.topic()
		topic.Delivery.ErrorBody = true
		err := b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: testJob()})
		msg := strings.TrimPrefix(err.Error(), "status 500: ")
		require.LessOrEqual(t, len(msg), 200)
		require.Equal(t, strings.Repeat("é", 100), msg)
	})

	t.Run("Redirect", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		})
		// Even a client that would follow redirects does not.
		d := New(Config{Client: &http.Client{}})
		t.Cleanup(d.CloseIdleConnections)
		topic := b.topic()
		topic.Delivery.ErrorBody = true
		err := d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: testJob()})
		require.EqualError(t, err, "status 302: redirect to /elsewhere not followed")
		require.Equal(t, "/hook", (<-b.reqs).Path)
		require.Empty(t, b.reqs, "the redirect was followed")
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		var b *testBundle
		b = setup(t, func(w http.ResponseWriter, r *http.Request) { b.block(nil)(w, r) })
		topic := b.topic()
		topic.Delivery.Timeout = 50 * time.Millisecond
		err := b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: testJob()})
		require.EqualError(t, err, "timeout after 50ms")
	})

	t.Run("TimeoutReadingAnswer", func(t *testing.T) {
		t.Parallel()
		var b *testBundle
		b = setup(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"code":`)
			w.(http.Flusher).Flush()
			b.block(nil)(w, r)
		})
		topic := b.topic()
		topic.Delivery.Timeout = 50 * time.Millisecond
		topic.Delivery.Success = "body.?code.orValue(1) == 0"
		require.EqualError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: testJob()}), "timeout after 50ms")
	})

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusOK, ""))
		topic := b.topic()
		b.srv.Close()
		err := b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: testJob()})
		require.ErrorContains(t, err, "request failed: ")
		require.NotContains(t, err.Error(), topic.Delivery.URL)
	})

	t.Run("ContextCancelled", func(t *testing.T) {
		t.Parallel()
		started := make(chan struct{}, 1)
		var b *testBundle
		b = setup(t, func(w http.ResponseWriter, r *http.Request) { b.block(started)(w, r) })
		topic := b.topic()
		topic.Delivery.Timeout = 5 * time.Minute
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- b.d.Deliver(ctx, &core.DeliverParams{Topic: topic, Job: testJob()}) }()
		<-started
		cancel()
		err := <-done
		require.ErrorIs(t, err, context.Canceled)
		require.NotContains(t, err.Error(), "timeout")
	})

	t.Run("ConnectionsReused", func(t *testing.T) {
		t.Parallel()
		big := strings.Repeat("x", 100<<10) // more than MaxAnswerBytes, less than the drain limit
		status := []int{200, 500, 200, 503, 204}
		var n atomic.Int64
		b := setup(t, func(w http.ResponseWriter, r *http.Request) {
			answerWith(status[n.Add(1)-1], big)(w, r)
		})
		for range status {
			_ = b.d.Deliver(context.Background(), &core.DeliverParams{Topic: b.topic(), Job: testJob()})
		}
		require.Equal(t, int64(1), b.conns.Load())
	})
}

func TestDeliverCondition(t *testing.T) {
	t.Parallel()

	const cond = "status == 200 && body.code == 0"
	for _, tc := range []struct {
		name    string
		cond    string
		handler http.HandlerFunc
		wantErr string // empty for success
	}{
		{"True", cond, answerWith(200, `{"code": 0, "msg": "ok"}`), ""},
		{"False", cond, answerWith(200, `{"code": 7}`), "condition false: status == 200 && body.code == 0 (status 200)"},
		{"FalseOnStatus", cond, answerWith(500, `{"code": 0}`), "condition false: status == 200 && body.code == 0 (status 500)"},
		{"NonJSONAnswer", cond, answerWith(200, `<html>ok</html>`), "condition error: evaluation failed; set delivery.error_body to see why (status 200)"},
		{"NonJSONAnswerOptional", "status == 200 && body.?code.orValue(1) == 0", answerWith(200, `<html>ok</html>`), "condition false: status == 200 && body.?code.orValue(1) == 0 (status 200)"},
		{"NumberComparison", "body.code < 5 && body.code >= 0.5", answerWith(200, `{"code": 1}`), ""},
		{"DecidesOverNon2xx", "status == 409", answerWith(409, `already done`), ""},
		{"Rejects2xx", "status == 202", answerWith(200, ``), "condition false: status == 202 (status 200)"},
		{"Headers", `headers["X-Result"] == "ok"`, answerWith(200, ``, "x-result", "ok"), ""},
		{"JSONArray", `size(body) == 2`, answerWith(200, `[1, 2]`), ""},
		{"AnswerTooLarge", `body != null`, answerWith(200, `"`+strings.Repeat("x", MaxAnswerBytesDefault)+`"`), "condition false: body != null (status 200)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.handler)
			topic := b.topic()
			topic.Delivery.Success = tc.cond
			// Running a condition to its cost limit takes seconds under
			// -race on a loaded machine: the attempt's timeout is not
			// what this test is about.
			topic.Delivery.Timeout = time.Minute
			require.NoError(t, b.d.ValidateTopic(topic))
			err := b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: testJob()})
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.wantErr)
		})
	}
}

func TestValidateTopic(t *testing.T) {
	t.Parallel()

	d := New(Config{})
	t.Cleanup(d.CloseIdleConnections)
	topic := func(url, success string) *core.Topic {
		return &core.Topic{Name: "orders", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: url, Success: success}}
	}
	requireField := func(t *testing.T, err error, field string) {
		t.Helper()
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, field, fe.Field, fe.Message)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
	}

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()
		for _, u := range []string{
			"https://svc/hook",
			"http://127.0.0.1:8080/hook?x=1",
			"HTTPS://Example.COM",
			"http://[::1]:9/h",
		} {
			require.NoError(t, d.ValidateTopic(topic(u, "")), u)
		}
		require.NoError(t, d.ValidateTopic(topic("https://svc/hook", `status == 200 && body.code == 0`)))
		require.NoError(t, d.ValidateTopic(topic("https://svc/hook", `headers["X-Ok"] == "1" || status in [200, 202]`)))
	})

	t.Run("InvalidURL", func(t *testing.T) {
		t.Parallel()
		for _, u := range []string{
			"",
			"svc/hook",
			"/hook",
			"ftp://svc/hook",
			"nats://svc",
			"http:svc",
			"http://",
			"http://:8080/hook",
			"https://user:pass@svc/hook",
			"https://user@svc/hook",
			"http://svc/\x7f",
			"http://sv c/",
			"https://svc/" + strings.Repeat("a", MaxURLLen),
		} {
			requireField(t, d.ValidateTopic(topic(u, "")), "delivery.url")
		}
	})

	t.Run("InvalidCondition", func(t *testing.T) {
		t.Parallel()
		for src, msg := range map[string]string{
			"status ==":                "delivery.success: 1:10: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
			"status":                   "delivery.success: condition must be a bool, not int",
			"status == 200 && x":       "delivery.success: 1:18: undeclared reference to 'x'",
			"status == 200 and body.x": "delivery.success: 1:15: Syntax error: mismatched input 'and' expecting <EOF>",
			"   ":                      "delivery.success: condition is blank",
		} {
			err := d.ValidateTopic(topic("https://svc/hook", src))
			requireField(t, err, "delivery.success")
			require.EqualError(t, err, msg)
		}
		requireField(t, d.ValidateTopic(topic("https://svc/hook", strings.Repeat("1", MaxConditionLen+1))), "delivery.success")
	})

	t.Run("Secrets", func(t *testing.T) {
		t.Parallel()
		tp := topic("https://svc/hook", "")
		tp.Delivery.Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		tp.Delivery.PreviousSecret = "plain old secret"
		require.NoError(t, d.ValidateTopic(tp))
		tp.Delivery.Secret = "whsec_not-base64"
		requireField(t, d.ValidateTopic(tp), "delivery.secret")
		tp.Delivery.Secret = "s3cr3t"
		tp.Delivery.PreviousSecret = "whsec_c2hvcnQ="
		err := d.ValidateTopic(tp)
		requireField(t, err, "delivery.previous_secret")
		require.ErrorContains(t, err, "24 to 64 bytes, not 5")
	})

	t.Run("Subject", func(t *testing.T) {
		t.Parallel()
		tp := topic("https://svc/hook", "")
		tp.Delivery.Subject = "x"
		requireField(t, d.ValidateTopic(tp), "delivery.subject")
	})

	t.Run("WrongType", func(t *testing.T) {
		t.Parallel()
		tp := topic("https://svc/hook", "")
		tp.Delivery.Type = core.DeliveryNATS
		requireField(t, d.ValidateTopic(tp), "delivery.type")
	})
}

// TestAnswerWithheld checks that, unless the topic sets
// delivery.error_body, nothing of a failed answer reaches the error that
// becomes the job's last_error, which whoever reads the topic's jobs sees:
// not its body, its headers, nor values a condition read from it.
func TestAnswerWithheld(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-internal-value"
	for _, tc := range []struct {
		name     string
		handler  http.HandlerFunc
		cond     string
		withheld string // the error without error_body
		shown    string // the error with it
	}{
		{"Status", answerWith(http.StatusInternalServerError, secret), "",
			"status 500", "status 500: " + secret},
		{"Redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/"+secret, http.StatusFound) }, "",
			"status 302: redirect not followed", "status 302: redirect to /" + secret + " not followed"},
		{"ConditionKeyFromAnswer", answerWith(http.StatusOK, `{}`, "X-Key", secret), `body[headers["X-Key"]] == 1`,
			"condition error: evaluation failed; set delivery.error_body to see why (status 200)", "condition error: no such key: " + secret + " (status 200)"},
		{"ConditionValueFromAnswer", answerWith(http.StatusOK, `{"t": "`+secret+`"}`), `timestamp(body.t) > timestamp(0)`,
			"condition error: evaluation failed; set delivery.error_body to see why (status 200)", secret},
		{"ConditionLimit", answerWith(http.StatusOK, `{}`), intList(120) + ".all(a, " + intList(120) + ".all(b, " + intList(120) + ".all(c, true)))",
			"condition error: condition stopped: it reached the cost limit of 1000000 (status 200)", "condition error: condition stopped: it reached the cost limit of 1000000 (status 200)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.handler)
			topic := b.topic()
			topic.Delivery.Success = tc.cond
			// Running a condition to its cost limit takes seconds under
			// -race on a loaded machine: the attempt's timeout is not
			// what this test is about.
			topic.Delivery.Timeout = time.Minute
			require.NoError(t, b.d.ValidateTopic(topic))
			err := b.d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: testJob()})
			require.EqualError(t, err, tc.withheld)
			require.NotContains(t, err.Error(), secret)

			topic.Delivery.ErrorBody = true
			require.ErrorContains(t, b.d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: testJob()}), tc.shown)
		})
	}

	t.Run("NotHTTP", func(t *testing.T) {
		t.Parallel()
		// A service that is not HTTP answers with a banner, which net/http
		// quotes in its error.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				// Answer once the request is read, and hold the
				// connection until the client drops it: closing at once
				// could reset the request's write, and net/http would
				// then report the reset, not the banner.
				go func() {
					defer c.Close()
					if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
						return
					}
					_, _ = io.WriteString(c, "SSH-2.0-"+secret+"\r\n")
					_, _ = io.Copy(io.Discard, c)
				}()
			}
		}()
		d := New(Config{})
		t.Cleanup(d.CloseIdleConnections)
		topic := webhookTopic("http://" + ln.Addr().String() + "/")
		err = d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: testJob()})
		require.ErrorContains(t, err, "request failed: ")
		require.NotContains(t, err.Error(), secret)
		topic.Delivery.ErrorBody = true
		require.ErrorContains(t, d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: testJob()}), secret)
	})
}

// TestDeliverNilParams checks that Deliver refuses params without a topic
// or a job with ErrInvalidArgument rather than panicking.
func TestDeliverNilParams(t *testing.T) {
	t.Parallel()
	d := New(Config{})
	t.Cleanup(d.CloseIdleConnections)
	topic := &core.Topic{Name: "t", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: "http://127.0.0.1:1/"}}
	for _, p := range []*core.DeliverParams{nil, {Job: testJob()}, {Topic: topic}} {
		require.ErrorIs(t, d.Deliver(t.Context(), p), core.ErrInvalidArgument)
	}
}

func TestDeliverNoRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, success string
		status        int
		headers       []string
		want          string // "" for success
		stop          bool
	}{
		{name: "Reason", status: http.StatusGone, headers: []string{"Delayq-No-Retry", "order 42\tdeleted\u0085\u009b "},
			want: "receiver stopped retries: order 42 deleted (status 410)", stop: true},
		{name: "EmptyReason", status: http.StatusUnprocessableEntity, headers: []string{"Delayq-No-Retry", ""},
			want: "receiver stopped retries (status 422)", stop: true},
		{name: "LongReasonCut", status: http.StatusBadRequest, headers: []string{"Delayq-No-Retry", strings.Repeat("x", 500)},
			want: "receiver stopped retries: " + strings.Repeat("x", 200) + " (status 400)", stop: true},
		{name: "IgnoredOnSuccess", status: http.StatusOK, headers: []string{"Delayq-No-Retry", "whatever"}},
		{name: "WithoutHeaderRetried", status: http.StatusGone, want: "status 410"},
		{name: "ConditionFalse", success: "status == 201", status: http.StatusOK, headers: []string{"Delayq-No-Retry", "bad input"},
			want: "receiver stopped retries: bad input (status 200)", stop: true},
		{name: "ConditionTrue", success: "status == 200", status: http.StatusOK, headers: []string{"Delayq-No-Retry", "bad input"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, answerWith(tc.status, "secret answer", tc.headers...))
			topic := b.topic()
			topic.Delivery.Success = tc.success
			err := b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: testJob()})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
			require.Equal(t, tc.stop, errors.Is(err, core.ErrNoRetry))
			var nr *core.NoRetryError
			require.Equal(t, tc.stop, errors.As(err, &nr))
			if tc.stop {
				var se *StopError
				require.ErrorAs(t, err, &se)
				require.Equal(t, tc.status, se.StatusCode(), "the breaker counts the answer by its status")
			}
		})
	}
}

func TestPreviousStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lastError string
		want      int // 0 for none
	}{
		{(&StatusError{Status: 503}).Error(), 503},
		{(&StatusError{Status: 500, Answer: "boom (status 200)"}).Error(), 500},
		{(&StatusError{Status: 302, Location: "/x"}).Error(), 302},
		{(&ConditionError{Status: 200, Condition: "body.ok"}).Error(), 200},
		{(&ConditionError{Status: 418, Condition: "x", Reason: reasonWithheld}).Error(), 418},
		{(&StopError{Status: 410, Reason: "gone"}).Error(), 410},
		{"reading answer (status 502): unexpected EOF", 502},
		{"timeout after 10s", 0},
		{"request failed: dial tcp 127.0.0.1:1: connect: connection refused", 0},
		{core.LeaseExpired, 0},
		{"delivery interrupted by shutdown", 0},
		{"", 0},
		{"status 5030", 0},
		{"status 099", 0},
		{"(status )", 0},
	} {
		job := testJob()
		job.Attempt, job.LastError = 2, tc.lastError
		code, ok := PreviousStatus(job)
		require.Equal(t, tc.want != 0, ok, "%q", tc.lastError)
		require.Equal(t, tc.want, code, "%q", tc.lastError)
	}
	first := testJob()
	first.Attempt, first.LastError = 1, "status 503" // a first attempt after a requeue
	_, ok := PreviousStatus(first)
	require.False(t, ok)
}

func TestDeliverPreviousStatusHeader(t *testing.T) {
	t.Parallel()
	b := setup(t, answerWith(http.StatusOK, ""))
	job := testJob()
	job.LastError = "status 503"
	require.NoError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: b.topic(), Job: job}))
	require.Equal(t, []string{"503"}, (<-b.reqs).Header.Values("Delayq-Previous-Status"))
	job.LastError = "timeout after 10s"
	require.NoError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: b.topic(), Job: job}))
	require.Empty(t, (<-b.reqs).Header.Values("Delayq-Previous-Status"))
}

func TestJobURL(t *testing.T) {
	t.Parallel()

	t.Run("SentToTheJobsURL", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusNoContent, ""))
		topic := b.topic()
		topic.Delivery.URL = "http://127.0.0.1:1/never"
		topic.Delivery.AllowJobURL = true
		job := testJob()
		job.URL = b.srv.URL + "/own?order=42"
		require.NoError(t, b.d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: job}))
		require.Equal(t, "/own", (<-b.reqs).Path)
	})

	t.Run("TopicNoLongerAllows", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusNoContent, ""))
		job := testJob()
		job.URL = b.srv.URL + "/own"
		err := b.d.Deliver(context.Background(), &core.DeliverParams{Topic: b.topic(), Job: job})
		require.EqualError(t, err, `not sent: the job has its own url, which topic "orders.close" no longer allows (delivery.allow_job_url is off)`)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "not counted by endpoint breakers")
		require.False(t, errors.Is(err, core.ErrNoRetry), "retried: allowing job urls again lets it through")
		require.Empty(t, b.reqs, "sent neither to the job's url nor to the topic's")
	})

	t.Run("DialGuardStillApplies", func(t *testing.T) {
		t.Parallel()
		b := setup(t, answerWith(http.StatusNoContent, ""))
		dests, err := ParseDestinations(nil, []string{"127.0.0.0/8"})
		require.NoError(t, err)
		d := New(Config{Destinations: dests})
		t.Cleanup(d.CloseIdleConnections)
		topic := b.topic()
		topic.Delivery.URL = "https://svc.example/hook"
		topic.Delivery.AllowJobURL = true
		job := testJob()
		job.URL = b.srv.URL + "/own" // stored before the deny list had 127/8
		err = d.Deliver(context.Background(), &core.DeliverParams{Topic: topic, Job: job})
		require.ErrorContains(t, err, "webhook destination denied: 127.0.0.1 resolves to 127.0.0.1, which is on the deny list")
		require.Empty(t, b.reqs)
	})

	t.Run("ValidateJobURL", func(t *testing.T) {
		t.Parallel()
		dests, err := ParseDestinations(nil, []string{"*.internal", "10.0.0.0/8"})
		require.NoError(t, err)
		d := New(Config{Destinations: dests})
		t.Cleanup(d.CloseIdleConnections)
		require.NoError(t, d.ValidateJobURL("https://hooks.example.com/a?b=c"))
		for _, bad := range []string{
			"", "ftp://x/", "/relative", "https://user:pw@svc/", "https://svc/" + strings.Repeat("a", MaxURLLen),
			"https://db.internal/hook", "http://10.1.2.3/hook", "http://169.254.169.254/latest/meta-data",
		} {
			err := d.ValidateJobURL(bad)
			var fe *core.FieldError
			require.ErrorAs(t, err, &fe, bad)
			require.Equal(t, "url", fe.Field, bad)
			require.True(t, strings.HasPrefix(fe.Message, "url"), fe.Message)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
		}
	})
}
