package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
	"github.com/delayq/delayq/internal/logproc"
	"github.com/delayq/delayq/transports/webhook"
)

// serveArgs are the serve flags of a server of backend (local or
// jetstream) with its data in dir, on free ports.
func serveArgs(backend, dir string) []string {
	return []string{"--backend", backend, "--data", dir, "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1"}
}

// defaultArgs are the serve flags of the default backend with its data in
// dir, on free ports.
func defaultArgs(dir string) []string { return serveArgs(backendLocal, dir) }

// webhookCall is one request a test webhook receiver got.
type webhookCall struct {
	at      time.Time
	id      string
	attempt string
	body    []byte
}

func TestE2EServe(t *testing.T) {
	t.Parallel()
	srv := startServer(t, defaultArgs(t.TempDir())...)
	require.NotEmpty(t, srv.NATSURL, "the embedded NATS address is logged")
	api := newCaller(t, srv.HTTPURL)

	t.Run("WebhookJobPushedByCLI", func(t *testing.T) {
		t.Parallel()
		calls := make(chan webhookCall, 16)
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			calls <- webhookCall{at: time.Now(), id: r.Header.Get("Delayq-Id"), attempt: r.Header.Get("Delayq-Attempt"), body: body}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(hook.Close)
		api := newCaller(t, srv.HTTPURL)
		status, answer := api.call(http.MethodPut, "/v1/topics/e2e.hooks",
			map[string]any{"delivery": map[string]any{"type": "webhook", "url": hook.URL}})
		require.True(t, status >= 200 && status < 300, "PUT topic: %d %s", status, answer)

		code, stdout, stderr := runCLI(t, "push", "e2e.hooks", `{"n": 1}`, "--delay", "1s", "--server", srv.HTTPURL)
		require.Equal(t, 0, code, stderr)
		var pushed struct {
			ID    string    `json:"id"`
			Topic string    `json:"topic"`
			RunAt time.Time `json:"run_at"`
			State string    `json:"state"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &pushed), stdout)
		require.NotEmpty(t, pushed.ID)
		require.Equal(t, "e2e.hooks", pushed.Topic)
		require.Equal(t, "scheduled", pushed.State)

		select {
		case c := <-calls:
			lateness := c.at.Sub(pushed.RunAt)
			t.Logf("webhook lateness %s", lateness)
			require.Equal(t, pushed.ID, c.id)
			require.Equal(t, "1", c.attempt)
			require.False(t, c.at.Before(pushed.RunAt), "delivered %s before its run_at", -lateness)
			require.Less(t, lateness, 1500*time.Millisecond, "delivered too late")
			var got struct {
				ID    string          `json:"id"`
				Topic string          `json:"topic"`
				Body  json.RawMessage `json:"body"`
			}
			require.NoError(t, json.Unmarshal(c.body, &got))
			require.Equal(t, pushed.ID, got.ID)
			require.JSONEq(t, `{"n": 1}`, string(got.Body))
		case <-time.After(15 * time.Second):
			t.Fatal("the webhook got no delivery within 15s")
		}

		// The delivery was acknowledged: the job is done.
		var job struct {
			State   string `json:"state"`
			Attempt int    `json:"attempt"`
		}
		require.Eventually(t, func() bool {
			api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
			return job.State == "done"
		}, 10*time.Second, 20*time.Millisecond, "job state %q", job.State)
	})

	t.Run("WebhookSignaturesJobURLAndRetryHeaders", func(t *testing.T) {
		t.Parallel()
		const current = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		const previous = "old-plain-secret"
		// Receivers verify with the official Standard Webhooks library,
		// one holding the new secret, one still the old (a plain secret is
		// its own key: "whsec_" + base64 of it for the library).
		verifiers := map[string]*standardwebhooks.Webhook{}
		for name, secret := range map[string]string{"current": current, "previous": "whsec_" + base64.StdEncoding.EncodeToString([]byte(previous))} {
			wh, err := standardwebhooks.NewWebhook(secret)
			require.NoError(t, err)
			verifiers[name] = wh
		}
		type signedCall struct {
			server, path, id, attempt, previousStatus, webhookID string
			verified                                             map[string]error
			delayqSigs                                           []string
			delayqTS                                             string
			body                                                 []byte
		}
		calls := make(chan signedCall, 32)
		var attempts sync.Map // job id -> *atomic.Int64
		receiver := func(server string) *httptest.Server {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				c := signedCall{server: server, path: r.URL.Path, id: r.Header.Get("Delayq-Id"), attempt: r.Header.Get("Delayq-Attempt"),
					previousStatus: r.Header.Get("Delayq-Previous-Status"), webhookID: r.Header.Get("webhook-id"),
					verified: map[string]error{}, body: body}
				for name, wh := range verifiers {
					c.verified[name] = wh.Verify(body, r.Header)
				}
				for part := range strings.SplitSeq(r.Header.Get("Delayq-Signature"), ",") {
					if v, ok := strings.CutPrefix(part, "v1="); ok {
						c.delayqSigs = append(c.delayqSigs, v)
					} else if v, ok := strings.CutPrefix(part, "t="); ok {
						c.delayqTS = v
					}
				}
				n, _ := attempts.LoadOrStore(c.id, new(atomic.Int64))
				switch k := n.(*atomic.Int64).Add(1); {
				case c.id == "e2e-prev" && k == 1:
					w.WriteHeader(http.StatusServiceUnavailable)
				case c.id == "e2e-stop":
					w.Header().Set("Delayq-No-Retry", "order 42 is gone")
					w.WriteHeader(http.StatusUnprocessableEntity)
				default:
					w.WriteHeader(http.StatusNoContent)
				}
				calls <- c
			}))
			t.Cleanup(hs.Close)
			return hs
		}
		topicHook, ownHook := receiver("topic"), receiver("own")
		api := newCaller(t, srv.HTTPURL)

		// A whsec_ secret that is not base64 of a key is refused, and
		// changes nothing.
		status, answer := api.call(http.MethodPut, "/v1/topics/e2e.signed",
			map[string]any{"delivery": map[string]any{"type": "webhook", "url": topicHook.URL + "/hook", "secret": "whsec_short"}})
		require.Equal(t, http.StatusBadRequest, status, "%s", answer)
		require.Contains(t, string(answer), `"field":"delivery.secret"`)
		status, _ = api.call(http.MethodGet, "/v1/topics/e2e.signed", nil)
		require.Equal(t, http.StatusNotFound, status)

		var topic struct {
			Delivery map[string]any `json:"delivery"`
		}
		api.callJSON(http.MethodPut, "/v1/topics/e2e.signed", map[string]any{
			"delivery": map[string]any{"type": "webhook", "url": topicHook.URL + "/hook", "secret": current,
				"previous_secret": previous, "allow_job_url": true},
			"max_attempts": 5, "backoff": map[string]any{"delays": []any{"50ms"}},
		}, http.StatusOK, &topic)
		require.Equal(t, true, topic.Delivery["secret_set"])
		require.Equal(t, true, topic.Delivery["previous_secret_set"])
		require.Equal(t, true, topic.Delivery["allow_job_url"])
		_, answer = api.call(http.MethodGet, "/v1/topics/e2e.signed", nil)
		require.NotContains(t, string(answer), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		require.NotContains(t, string(answer), previous)

		// A url on a topic that does not allow one: 400 on url, nothing stored.
		status, answer = api.call(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.pull.nourl", "id": "e2e-nourl", "url": ownHook.URL})
		require.Equal(t, http.StatusBadRequest, status, "%s", answer)
		require.Contains(t, string(answer), `"field":"url"`)
		status, _ = api.call(http.MethodGet, "/v1/jobs/e2e-nourl", nil)
		require.Equal(t, http.StatusNotFound, status)

		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.signed", "id": "e2e-prev", "body": map[string]any{"n": 1}}, http.StatusCreated, nil)
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.signed", "id": "e2e-stop", "body": 2}, http.StatusCreated, nil)
		code, stdout, stderr := runCLI(t, "push", "e2e.signed", `{"n": 3}`, "--id", "e2e-own", "--url", ownHook.URL+"/own?tenant=7", "--server", srv.HTTPURL)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, `"e2e-own"`)
		var own struct {
			URL string `json:"url"`
		}
		api.callJSON(http.MethodGet, "/v1/jobs/e2e-own", nil, http.StatusOK, &own)
		require.Equal(t, ownHook.URL+"/own?tenant=7", own.URL)

		got := map[string][]signedCall{}
		deadline := time.After(20 * time.Second)
		for len(got["e2e-prev"]) < 2 || len(got["e2e-stop"]) < 1 || len(got["e2e-own"]) < 1 {
			select {
			case c := <-calls:
				got[c.id] = append(got[c.id], c)
			case <-deadline:
				t.Fatalf("calls so far: %v", got)
			}
		}
		for id, cs := range got {
			for _, c := range cs {
				require.Equal(t, id, c.webhookID, "webhook-id is the job id on every attempt")
				for name, err := range c.verified {
					require.NoError(t, err, "%s attempt %s: Standard Webhooks signature with the %s secret", id, c.attempt, name)
				}
				// Delayq-Signature, checked by hand: one v1 per secret.
				require.Len(t, c.delayqSigs, 2)
				for _, secret := range []string{current, previous} {
					m := hmac.New(sha256.New, []byte(secret))
					m.Write([]byte(c.delayqTS + "." + string(c.body)))
					require.Contains(t, c.delayqSigs, hex.EncodeToString(m.Sum(nil)), "Delayq-Signature of %s", id)
				}
			}
		}
		prev := got["e2e-prev"]
		require.Equal(t, []string{"1", "2"}, []string{prev[0].attempt, prev[1].attempt})
		require.Empty(t, prev[0].previousStatus, "no previous status on the first attempt")
		require.Equal(t, "503", prev[1].previousStatus)
		require.Equal(t, "topic", prev[0].server)
		require.Equal(t, "own", got["e2e-own"][0].server, "sent to the job's url")
		require.Equal(t, "/own", got["e2e-own"][0].path)

		var job struct {
			State     string `json:"state"`
			Attempt   int    `json:"attempt"`
			LastError string `json:"last_error"`
		}
		require.Eventually(t, func() bool {
			api.callJSON(http.MethodGet, "/v1/jobs/e2e-stop", nil, http.StatusOK, &job)
			return job.State == "dead"
		}, 10*time.Second, 20*time.Millisecond, "job state %q", job.State)
		require.Equal(t, 1, job.Attempt, "dead after one attempt, with 4 left")
		require.Equal(t, "receiver stopped retries: order 42 is gone (status 422)", job.LastError)
		for _, id := range []string{"e2e-prev", "e2e-own"} {
			require.Eventually(t, func() bool {
				api.callJSON(http.MethodGet, "/v1/jobs/"+id, nil, http.StatusOK, &job)
				return job.State == "done"
			}, 10*time.Second, 20*time.Millisecond, "%s state %q", id, job.State)
		}
		require.Empty(t, calls, "no call after the stop or the successes")

		// The topic stops allowing job urls: a job that has one fails with
		// a last_error saying so, and goes to neither url.
		api.callJSON(http.MethodPut, "/v1/topics/e2e.signed", map[string]any{
			"delivery":     map[string]any{"type": "webhook", "url": topicHook.URL + "/hook", "secret": current, "allow_job_url": true},
			"max_attempts": 1,
		}, http.StatusOK, nil)
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.signed", "id": "e2e-orphan", "url": ownHook.URL + "/own", "delay": "1s"}, http.StatusCreated, nil)
		api.callJSON(http.MethodPut, "/v1/topics/e2e.signed", map[string]any{
			"delivery":     map[string]any{"type": "webhook", "url": topicHook.URL + "/hook", "secret": current},
			"max_attempts": 1,
		}, http.StatusOK, nil)
		require.Eventually(t, func() bool {
			api.callJSON(http.MethodGet, "/v1/jobs/e2e-orphan", nil, http.StatusOK, &job)
			return job.State == "dead"
		}, 10*time.Second, 20*time.Millisecond, "job state %q", job.State)
		require.Contains(t, job.LastError, "no longer allows (delivery.allow_job_url is off)")
		require.Empty(t, calls, "sent to no url")
	})

	t.Run("PullConsumerOverHTTP", func(t *testing.T) {
		t.Parallel()
		api := newCaller(t, srv.HTTPURL)
		var pushed struct {
			ID    string    `json:"id"`
			RunAt time.Time `json:"run_at"`
		}
		api.callJSON(http.MethodPost, "/v1/jobs",
			map[string]any{"topic": "e2e.pull", "body": []int{1, 2}, "delay": 300, "ttr": "10s"}, http.StatusCreated, &pushed)

		// One claim waits for the job to come due.
		jobs := api.claim("e2e.pull", 10, 10*time.Second)
		require.Len(t, jobs, 1)
		d := jobs[0]
		require.Equal(t, pushed.ID, d.ID)
		require.Equal(t, 1, d.Attempt)
		require.NotEmpty(t, d.Lease)
		require.JSONEq(t, `[1,2]`, string(d.Body))
		require.False(t, time.Now().Before(pushed.RunAt), "claimed before run_at")

		api.callJSON(http.MethodPost, "/v1/jobs/"+d.ID+"/ack", map[string]any{"lease": d.Lease}, http.StatusNoContent, nil)
		// A second ack of the same delivery: the lease is gone.
		status, answer := api.call(http.MethodPost, "/v1/jobs/"+d.ID+"/ack", map[string]any{"lease": d.Lease})
		require.Equal(t, http.StatusConflict, status, "%s", answer)
		require.Contains(t, string(answer), `"conflict"`)

		var job struct {
			State string `json:"state"`
		}
		api.callJSON(http.MethodGet, "/v1/jobs/"+d.ID, nil, http.StatusOK, &job)
		require.Equal(t, "done", job.State)
		require.Empty(t, api.claim("e2e.pull", 10, 0), "nothing is left to claim")
	})

	t.Run("PriorityOverHTTP", func(t *testing.T) {
		t.Parallel()
		api := newCaller(t, srv.HTTPURL)
		// Jobs due together, pushed least urgent first: claims take the most
		// urgent first, then by run_at.
		var want [3][]string
		runAt := time.Now().Add(-time.Minute).UTC()
		for i := range 12 {
			priority := []int{5, 0, -5}[i%3]
			var job struct {
				ID string `json:"id"`
			}
			api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.prio", "body": i, "priority": priority,
				"run_at": runAt.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)}, http.StatusCreated, &job)
			want[2-i%3] = append(want[2-i%3], job.ID)
		}
		var got []string
		for len(got) < 12 {
			jobs := api.claim("e2e.prio", 5, 5*time.Second)
			require.NotEmpty(t, jobs)
			for _, d := range jobs {
				got = append(got, d.ID)
			}
			api.ackAll(jobs)
		}
		require.Equal(t, slices.Concat(want[0], want[1], want[2]), got)
	})

	t.Run("BusinessKeysOverHTTP", func(t *testing.T) {
		t.Parallel()
		api := newCaller(t, srv.HTTPURL)
		type job struct {
			ID       string `json:"id"`
			Key      string `json:"key"`
			State    string `json:"state"`
			Replaced bool   `json:"replaced"`
		}
		type page struct {
			Jobs      []job  `json:"jobs"`
			NextAfter string `json:"next_after"`
		}
		// Jobs found by key, a page at a time; cancelled by key but the
		// one being delivered.
		var ids []string
		for i := range 4 {
			var j job
			api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.keys", "key": "order 42", "body": i,
				"delay": []string{"0s", "1h", "1h", "1h"}[i]}, http.StatusCreated, &j)
			ids = append(ids, j.ID)
		}
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.keys", "key": "order 43"}, http.StatusCreated, nil)
		claimed := api.claim("e2e.keys", 1, 5*time.Second)
		require.Len(t, claimed, 1)
		require.Equal(t, ids[0], claimed[0].ID)
		var p page
		api.callJSON(http.MethodGet, "/v1/topics/e2e.keys/jobs?key=order+42&limit=3", nil, http.StatusOK, &p)
		require.Len(t, p.Jobs, 3)
		require.Equal(t, "reserved", p.Jobs[0].State)
		require.Equal(t, ids[2], p.NextAfter)
		code, stdout, stderr := runCLI(t, "find", "e2e.keys", "order 42", "--after", p.NextAfter, "--server", srv.HTTPURL)
		require.Equal(t, 0, code, stderr)
		require.NoError(t, json.Unmarshal([]byte(stdout), &p))
		require.Equal(t, []job{{ID: ids[3], Key: "order 42", State: "scheduled"}}, p.Jobs)
		code, stdout, stderr = runCLI(t, "cancel", "--key", "order 42", "e2e.keys", "--server", srv.HTTPURL)
		require.Equal(t, 0, code, stderr)
		require.JSONEq(t, `{"cancelled": ["`+strings.Join(ids[1:], `","`)+`"], "reserved": ["`+ids[0]+`"]}`, stdout)
		api.callJSON(http.MethodGet, "/v1/topics/e2e.keys/jobs?key=order+43", nil, http.StatusOK, &p)
		require.Len(t, p.Jobs, 1)
		require.Equal(t, "ready", p.Jobs[0].State, "another key's job stays")
		code, _, stderr = runCLI(t, "find", "e2e.keys", "order 42", "--limit", "0", "--server", srv.HTTPURL)
		require.NotEqual(t, 0, code)
		require.Contains(t, stderr, "limit")

		// Unique keys: the second push of a key conflicts, or replaces.
		api.callJSON(http.MethodPut, "/v1/topics/e2e.unique", map[string]any{"unique_keys": "reject"}, http.StatusOK, nil)
		var first, second job
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.unique", "key": "order 42", "delay": "1h"}, http.StatusCreated, &first)
		status, answer := api.call(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.unique", "key": "order 42"})
		require.Equal(t, http.StatusConflict, status, "%s", answer)
		require.Contains(t, string(answer), first.ID)
		api.callJSON(http.MethodPut, "/v1/topics/e2e.unique", map[string]any{"unique_keys": "replace"}, http.StatusOK, nil)
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.unique", "key": "order 42", "body": "new"}, http.StatusOK, &second)
		require.Equal(t, job{ID: first.ID, State: "ready", Replaced: true}, second)
		api.callJSON(http.MethodGet, "/v1/topics/e2e.unique/jobs?key=order+42", nil, http.StatusOK, &p)
		require.Len(t, p.Jobs, 1, "one job for the key")
	})

	t.Run("DeadLetterNoticeOverHTTP", func(t *testing.T) {
		t.Parallel()
		const secret = "notice-secret"
		notices := make(chan []byte, 4)
		// The job's endpoint fails; the notices' endpoint checks the
		// signature a webhook topic with a secret gives every request.
		failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}))
		t.Cleanup(failing.Close)
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := webhook.Verify(secret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), time.Minute); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			notices <- body
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(receiver.Close)
		api := newCaller(t, srv.HTTPURL)
		api.callJSON(http.MethodPut, "/v1/topics/e2e.dl.notices", map[string]any{
			"delivery": map[string]any{"type": "webhook", "url": receiver.URL, "secret": secret}}, http.StatusOK, nil)
		var topic struct {
			OnDead string `json:"on_dead"`
		}
		api.callJSON(http.MethodPut, "/v1/topics/e2e.dl", map[string]any{"max_attempts": 1, "on_dead": "e2e.dl.notices",
			"delivery": map[string]any{"type": "webhook", "url": failing.URL}}, http.StatusOK, &topic)
		require.Equal(t, "e2e.dl.notices", topic.OnDead)
		var pushed struct {
			ID string `json:"id"`
		}
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.dl", "key": "order 42", "body": map[string]any{"n": 1}},
			http.StatusCreated, &pushed)

		select {
		case body := <-notices:
			var n struct {
				Type string `json:"type"`
				Job  struct {
					ID          string          `json:"id"`
					Topic       string          `json:"topic"`
					Key         string          `json:"key"`
					Body        json.RawMessage `json:"body"`
					Attempt     int             `json:"attempt"`
					MaxAttempts int             `json:"max_attempts"`
					LastError   string          `json:"last_error"`
					DiedAt      time.Time       `json:"died_at"`
				} `json:"job"`
			}
			// The notice is the body of a job of the notice topic, which
			// its webhook posts as it posts every job.
			var envelope struct {
				ID    string          `json:"id"`
				Topic string          `json:"topic"`
				Body  json.RawMessage `json:"body"`
			}
			require.NoError(t, json.Unmarshal(body, &envelope), "%s", body)
			require.Equal(t, "e2e.dl.notices", envelope.Topic)
			require.NoError(t, json.Unmarshal(envelope.Body, &n), "%s", body)
			require.Equal(t, "job.dead", n.Type)
			require.Equal(t, pushed.ID, n.Job.ID)
			require.Equal(t, "e2e.dl", n.Job.Topic)
			require.Equal(t, "order 42", n.Job.Key)
			require.JSONEq(t, `{"n": 1}`, string(n.Job.Body))
			require.Equal(t, 1, n.Job.Attempt)
			require.Equal(t, 1, n.Job.MaxAttempts)
			require.Equal(t, "status 500", n.Job.LastError)
			var job struct {
				State     string    `json:"state"`
				UpdatedAt time.Time `json:"updated_at"`
			}
			api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
			require.Equal(t, "dead", job.State)
			require.True(t, job.UpdatedAt.Equal(n.Job.DiedAt), "died_at %s, the job's updated_at %s", n.Job.DiedAt, job.UpdatedAt)
		case <-time.After(20 * time.Second):
			t.Fatal("no dead-letter notice within 20s")
		}
		select {
		case body := <-notices:
			t.Fatalf("a second notice: %s", body)
		case <-time.After(3 * time.Second): // more than a round of the engine's refresh (2s)
		}
	})

	t.Run("RateLimitOverHTTP", func(t *testing.T) {
		t.Parallel()
		api := newCaller(t, srv.HTTPURL)
		var topic struct {
			Rate struct {
				Limit  int    `json:"limit"`
				Period string `json:"period"`
				Burst  int    `json:"burst"`
			} `json:"rate"`
		}
		api.callJSON(http.MethodPut, "/v1/topics/e2e.rate.pull", map[string]any{"rate": map[string]any{"limit": 5, "burst": 2}},
			http.StatusOK, &topic)
		require.Equal(t, 5, topic.Rate.Limit)
		require.Equal(t, "1s", topic.Rate.Period)
		require.Equal(t, 2, topic.Rate.Burst)
		status, answer := api.call(http.MethodPut, "/v1/topics/e2e.rate.bad", map[string]any{"rate": map[string]any{"limit": 5, "period": "0.5ms"}})
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, string(answer), `"field":"rate.period"`)

		// Pull: the burst at once, then five a second, whatever a claim asks.
		for i := range 6 {
			api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.rate.pull", "body": i}, http.StatusCreated, nil)
		}
		first := api.claim("e2e.rate.pull", 10, 0)
		require.Len(t, first, 2, "the burst")
		start := time.Now()
		got := len(first)
		for got < 6 {
			jobs := api.claim("e2e.rate.pull", 10, 5*time.Second)
			require.NotEmpty(t, jobs)
			got += len(jobs)
		}
		took := time.Since(start)
		require.GreaterOrEqual(t, took, 600*time.Millisecond, "four more at five a second take 0.8 s")

		// Webhook: deliveries spaced by the limit too.
		var mu sync.Mutex
		var at []time.Time
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(hook.Close)
		api.callJSON(http.MethodPut, "/v1/topics/e2e.rate.hook", map[string]any{"rate": map[string]any{"limit": 4, "burst": 1},
			"delivery": map[string]any{"type": "webhook", "url": hook.URL}}, http.StatusOK, nil)
		for i := range 5 {
			api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.rate.hook", "body": i}, http.StatusCreated, nil)
		}
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(at) == 5
		}, 20*time.Second, 20*time.Millisecond)
		mu.Lock()
		span := at[4].Sub(at[0])
		mu.Unlock()
		require.GreaterOrEqual(t, span, 800*time.Millisecond, "five at four a second, one at a time, take 1 s")
		t.Logf("pull: 4 jobs past the burst in %s; webhook: 5 deliveries over %s", took, span)
	})

	t.Run("MaxInFlightOverHTTP", func(t *testing.T) {
		t.Parallel()
		api := newCaller(t, srv.HTTPURL)
		// The receiver is slow; the topic allows 16 deliveries at once per
		// instance but 2 in flight in all.
		var mu sync.Mutex
		inFlight, most, served := 0, 0, 0
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the receiver's work
			mu.Lock()
			inFlight--
			served++
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(hook.Close)
		var topic struct {
			MaxInFlight int `json:"max_in_flight"`
		}
		api.callJSON(http.MethodPut, "/v1/topics/e2e.inflight", map[string]any{"max_in_flight": 2, "concurrency": 16,
			"delivery": map[string]any{"type": "webhook", "url": hook.URL}}, http.StatusOK, &topic)
		require.Equal(t, 2, topic.MaxInFlight)
		for i := range 10 {
			api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.inflight", "body": i}, http.StatusCreated, nil)
		}
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return served == 10
		}, 20*time.Second, 20*time.Millisecond)
		mu.Lock()
		require.Equal(t, 2, most, "never more than max_in_flight at once, and that many")
		mu.Unlock()
		status, answer := api.call(http.MethodPut, "/v1/topics/e2e.inflight.bad", map[string]any{"max_in_flight": -2})
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, string(answer), `"field":"max_in_flight"`)
	})

	t.Run("PauseResumeOverHTTP", func(t *testing.T) {
		t.Parallel()
		calls := make(chan webhookCall, 16)
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls <- webhookCall{at: time.Now(), id: r.Header.Get("Delayq-Id")}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(hook.Close)
		api := newCaller(t, srv.HTTPURL)
		api.callJSON(http.MethodPut, "/v1/topics/e2e.paused.hook",
			map[string]any{"delivery": map[string]any{"type": "webhook", "url": hook.URL}}, http.StatusOK, nil)

		type topicAnswer struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
			Counts struct {
				Ready int `json:"ready"`
			} `json:"counts"`
		}
		var topic topicAnswer
		api.callJSON(http.MethodPost, "/v1/topics/e2e.paused.hook/pause", nil, http.StatusOK, &topic)
		require.True(t, topic.Paused)
		code, stdout, stderr := runCLI(t, "pause", "e2e.paused.pull", "--server", srv.HTTPURL)
		require.Equal(t, 0, code, stderr)
		require.NoError(t, json.Unmarshal([]byte(stdout), &topic), stdout)
		require.Equal(t, "e2e.paused.pull", topic.Name)
		require.True(t, topic.Paused, "a topic paused before its first job")

		pushed := map[string]bool{}
		for range 3 {
			var job struct {
				ID string `json:"id"`
			}
			api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.paused.hook", "body": 1}, http.StatusCreated, &job)
			pushed[job.ID] = true
		}
		var pull struct {
			ID string `json:"id"`
		}
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.paused.pull", "body": 2}, http.StatusCreated, &pull)

		// A claim waits out its wait on the paused topic; meanwhile the
		// webhook topic delivers nothing either.
		require.Empty(t, api.claim("e2e.paused.pull", 10, time.Second), "claim of a paused topic")
		require.Empty(t, calls, "webhook deliveries of a paused topic")
		api.callJSON(http.MethodGet, "/v1/topics/e2e.paused.hook", nil, http.StatusOK, &topic)
		require.True(t, topic.Paused)
		require.Equal(t, 3, topic.Counts.Ready, "intake goes on while paused")

		api.callJSON(http.MethodPost, "/v1/topics/e2e.paused.hook/resume", nil, http.StatusOK, &topic)
		require.False(t, topic.Paused)
		for range 3 {
			select {
			case c := <-calls:
				require.True(t, pushed[c.id], "delivery of %s", c.id)
				delete(pushed, c.id)
			case <-time.After(15 * time.Second):
				t.Fatal("the webhook got no delivery within 15s of the resume")
			}
		}
		code, _, stderr = runCLI(t, "resume", "e2e.paused.pull", "--server", srv.HTTPURL)
		require.Equal(t, 0, code, stderr)
		jobs := api.claim("e2e.paused.pull", 10, 5*time.Second)
		require.Len(t, jobs, 1)
		require.Equal(t, pull.ID, jobs[0].ID)

		status, answer := api.call(http.MethodPost, "/v1/topics/bad%20name/pause", nil)
		require.Equal(t, http.StatusBadRequest, status, "%s", answer)
		code, _, stderr = runCLI(t, "pause", "--server", srv.HTTPURL)
		require.Equal(t, 2, code, "pause without a topic")
		require.Contains(t, stderr, "accepts 1 arg(s)")
	})

	t.Run("RetryScheduleOverHTTP", func(t *testing.T) {
		t.Parallel()
		api := newCaller(t, srv.HTTPURL)
		var topic struct {
			Backoff struct {
				Delays []string `json:"delays"`
			} `json:"backoff"`
		}
		api.callJSON(http.MethodPut, "/v1/topics/e2e.retry",
			map[string]any{"max_attempts": 5, "backoff": map[string]any{"delays": []any{"0s", 7_200_000, "1h"}}}, http.StatusOK, &topic)
		require.Equal(t, []string{"0s", "2h0m0s", "1h0m0s"}, topic.Backoff.Delays)
		status, answer := api.call(http.MethodPut, "/v1/topics/e2e.retry", map[string]any{"backoff": map[string]any{"delays": []any{"1m", "-1s"}}})
		require.Equal(t, http.StatusBadRequest, status, "%s", answer)
		require.Contains(t, string(answer), `"field":"backoff.delays[1]"`)

		var pushed struct{ ID string }
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.retry", "body": 1}, http.StatusCreated, &pushed)
		var job struct {
			State   string    `json:"state"`
			Attempt int       `json:"attempt"`
			RunAt   time.Time `json:"run_at"`
		}
		// Failed attempt 1 waits the schedule's first delay (none: due at
		// once), attempt 2 its second, two hours.
		for attempt, wait := range []time.Duration{0, 2 * time.Hour} {
			jobs := api.claim("e2e.retry", 1, 10*time.Second)
			require.Len(t, jobs, 1)
			require.Equal(t, attempt+1, jobs[0].Attempt)
			nacked := time.Now()
			api.callJSON(http.MethodPost, "/v1/jobs/"+pushed.ID+"/nack", map[string]any{"lease": jobs[0].Lease}, http.StatusNoContent, nil)
			api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
			require.Equal(t, attempt+1, job.Attempt)
			require.WithinDuration(t, nacked.Add(wait), job.RunAt, 2*time.Second, "run_at after attempt %d", attempt+1)
		}
		require.Equal(t, "scheduled", job.State)

		// A job's own schedule overrides its topic's.
		var own struct {
			ID      string `json:"id"`
			Backoff struct {
				Delays []string `json:"delays"`
			} `json:"backoff"`
		}
		api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.retry", "body": 2, "id": "own-schedule",
			"backoff": map[string]any{"delays": []any{"30m"}}}, http.StatusCreated, &own)
		api.callJSON(http.MethodGet, "/v1/jobs/own-schedule", nil, http.StatusOK, &own)
		require.Equal(t, []string{"30m0s"}, own.Backoff.Delays)
		jobs := api.claim("e2e.retry", 1, 10*time.Second)
		require.Len(t, jobs, 1)
		require.Equal(t, "own-schedule", jobs[0].ID)
		nacked := time.Now()
		api.callJSON(http.MethodPost, "/v1/jobs/own-schedule/nack", map[string]any{"lease": jobs[0].Lease}, http.StatusNoContent, nil)
		api.callJSON(http.MethodGet, "/v1/jobs/own-schedule", nil, http.StatusOK, &job)
		require.WithinDuration(t, nacked.Add(30*time.Minute), job.RunAt, 2*time.Second, "run_at by the job's schedule")

		for body, field := range map[string]map[string]any{
			"backoff.delays[0]": {"delays": []any{"1y"}},
			"backoff.factor":    {"delays": []any{"1m"}, "factor": 2},
			"backoff.delays":    {"delays": slices.Repeat([]any{"1s"}, 101)},
		} {
			status, answer := api.call(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.retry", "backoff": field})
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", body, answer)
			require.Contains(t, string(answer), `"field":"`+body+`"`)
		}
	})

	t.Run("ClientCommands", func(t *testing.T) {
		t.Parallel()
		server := "--server=" + srv.HTTPURL
		code, stdout, stderr := runCLI(t, "push", "e2e.cli", "--delay", "1h", "--id", "cli-1", "--ttr", "45s", "--max-attempts", "3", "--key", "k-1",
			"--backoff-delays", "1m,90000ms", "--priority", "-3", "--expires-in", "2h",
			"--then", `{"topic": "e2e.cli.next", "delay": "30m", "then": {"topic": "e2e.cli.last", "body": [1]}}`, server)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, `"cli-1"`)

		code, stdout, stderr = runCLI(t, "get", "cli-1", server)
		require.Equal(t, 0, code, stderr)
		var job map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &job), stdout)
		require.Equal(t, "cli-1", job["id"])
		require.Equal(t, "scheduled", job["state"])
		require.Equal(t, "k-1", job["key"])
		require.EqualValues(t, 3, job["max_attempts"])
		require.Equal(t, map[string]any{"delays": []any{"1m0s", "1m30s"}}, job["backoff"])
		require.EqualValues(t, -3, job["priority"])
		require.Equal(t, map[string]any{"topic": "e2e.cli.next", "delay": "30m0s", "then": map[string]any{"topic": "e2e.cli.last", "body": []any{float64(1)}}}, job["then"])
		runAt, err := time.Parse(time.RFC3339Nano, job["run_at"].(string))
		require.NoError(t, err)
		require.Equal(t, runAt.Add(2*time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"), job["expires_at"], "--expires-in counts from run_at")
		at := time.Now().Add(time.Hour).Truncate(time.Second)
		code, stdout, stderr = runCLI(t, "push", "e2e.cli", "--run-at", strconv.FormatInt(at.Unix(), 10)+".25", server)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, at.Add(250*time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z"), "--run-at in Unix seconds")
		code, _, stderr = runCLI(t, "push", "e2e.cli", "--priority", "11", server)
		require.Equal(t, 1, code, "a priority out of range is the service's 400")
		require.Contains(t, stderr, "priority")
		code, _, stderr = runCLI(t, "push", "e2e.cli", "--backoff-delays", "1m,soon", server)
		require.Equal(t, exitUsage, code)
		require.Contains(t, stderr, `invalid --backoff-delays "soon"`)
		code, _, stderr = runCLI(t, "push", "e2e.cli", "--then", `{"topic": "e2e.cli.next", "dealy": "1s"}`, server)
		require.Equal(t, exitUsage, code)
		require.Contains(t, stderr, `invalid --then`)

		code, stdout, stderr = runCLI(t, "topics", server)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "e2e.cli")
		code, stdout, stderr = runCLI(t, "topics", "e2e.cli", server)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "e2e.cli")

		// The same id again while the job is pending: 409, exit 1.
		code, _, stderr = runCLI(t, "push", "e2e.cli", "--id", "cli-1", server)
		require.Equal(t, 1, code)
		require.True(t, strings.HasPrefix(stderr, "delayq: conflict: "), stderr)

		code, stdout, stderr = runCLI(t, "cancel", "cli-1", server)
		require.Equal(t, 0, code, stderr)
		require.Empty(t, stdout)
		code, _, stderr = runCLI(t, "cancel", "cli-1", server)
		require.Equal(t, 1, code)
		require.True(t, strings.HasPrefix(stderr, "delayq: not_found: "), stderr)

		// The body from standard input, with DELAYQ_SERVER.
		code, stdout, stderr = runCLIWith(t, []string{"DELAYQ_SERVER=" + srv.HTTPURL}, `{"from": "stdin"}`, "push", "e2e.cli", "-")
		require.Equal(t, 0, code, stderr)
		var pushed struct{ ID string }
		require.NoError(t, json.Unmarshal([]byte(stdout), &pushed))
		api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
		require.Equal(t, map[string]any{"from": "stdin"}, job["body"])
	})

	t.Run("AdminCommands", func(t *testing.T) {
		t.Parallel()
		server := "--server=" + srv.HTTPURL
		code, stdout, stderr := runCLI(t, "topic", "put", "e2e.admin", `{"max_attempts": 1, "rate": {"limit": 50}}`, server)
		require.Equal(t, 0, code, stderr)
		var topic map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &topic), stdout)
		require.EqualValues(t, 1, topic["max_attempts"])
		require.Equal(t, map[string]any{"limit": 50.0, "period": "1s", "burst": 50.0}, topic["rate"])
		code, _, stderr = runCLIWith(t, nil, `{"max_attempts": -1}`, "topic", "put", "e2e.admin", "-", server)
		require.Equal(t, 1, code, "the service's 400")
		require.Contains(t, stderr, "max_attempts")
		code, _, stderr = runCLI(t, "topic", "put", "e2e.admin", `{"max_attempts":`, server)
		require.Equal(t, exitUsage, code)
		require.Contains(t, stderr, "JSON")

		// A job that fails its one attempt is dead, listed, and requeued.
		code, _, stderr = runCLI(t, "push", "e2e.admin", "--id", "admin-1", server)
		require.Equal(t, 0, code, stderr)
		code, stdout, stderr = runCLI(t, "claim", "e2e.admin", "--wait", "5s", server)
		require.Equal(t, 0, code, stderr)
		var d delivery
		require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
		code, _, stderr = runCLI(t, "nack", "admin-1", d.Lease, "--error", "no such order", server)
		require.Equal(t, 0, code, stderr)
		code, stdout, stderr = runCLI(t, "dead", "e2e.admin", "--limit", "10", server)
		require.Equal(t, 0, code, stderr)
		var dead struct {
			Jobs []map[string]any `json:"jobs"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &dead), stdout)
		require.Len(t, dead.Jobs, 1)
		require.Equal(t, "no such order", dead.Jobs[0]["last_error"])
		code, stdout, stderr = runCLI(t, "requeue", "admin-1", server)
		require.Equal(t, 0, code, stderr)
		require.Empty(t, stdout)
		code, _, stderr = runCLI(t, "requeue", "admin-1", server)
		require.Equal(t, 1, code, "not dead any more: 409")
		require.True(t, strings.HasPrefix(stderr, "delayq: conflict: "), stderr)

		code, stdout, stderr = runCLI(t, "topic", "delete", "e2e.admin", server)
		require.Equal(t, 0, code, stderr)
		require.Empty(t, stdout)
		code, _, _ = runCLI(t, "topic", "delete", "e2e.admin", server)
		require.Equal(t, 1, code, "no configuration left: 404")

		code, stdout, stderr = runCLI(t, "completion", "bash")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "__start_delayq")
	})

	t.Run("ClientErrorsFromServer", func(t *testing.T) {
		t.Parallel()
		server := "--server=" + srv.HTTPURL
		tests := []struct {
			args []string
			want string
		}{
			{[]string{"push", "e2e.cli", "--delay", "-5s"}, "delayq: invalid_argument: "},
			{[]string{"push", "e2e.cli", "--delay", "8800h"}, "delayq: invalid_argument: "},
			{[]string{"push", "bad*topic"}, "delayq: invalid_argument: "},
			{[]string{"push", "e2e.cli", "--max-attempts", "100000"}, "delayq: invalid_argument: "},
			{[]string{"get", "no-such-job"}, "delayq: not_found: "},
			{[]string{"topics", "no.such.topic"}, "delayq: not_found: "},
		}
		for _, tt := range tests {
			code, stdout, stderr := runCLI(t, append(tt.args, server)...)
			require.Equal(t, 1, code, "%v: %s", tt.args, stderr)
			require.True(t, strings.HasPrefix(stderr, tt.want), "%v: %s", tt.args, stderr)
			require.Empty(t, stdout)
		}
		// A bad --delay never reaches the server: exit 2.
		code, _, stderr := runCLI(t, "push", "e2e.cli", "--delay", "soon", server)
		require.Equal(t, 2, code, stderr)
	})
}

// TestE2EKill9 kills the service with SIGKILL while jobs are pending and
// some are reserved, restarts it on the same data directory, and checks
// that every job answered 2xx is delivered: on the local default and on
// the jetstream backend.
func TestE2EKill9(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{backendLocal, backendJetStream} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testKill9(t, backend)
		})
	}
}

func testKill9(t *testing.T, backend string) {
	const (
		total    = 2000
		batch    = 500
		reserved = 100
		spread   = 3 * time.Second
		// past puts the first jobs' run_at in the past: about 280 are due
		// at once, so that the kill finds due jobs waiting unclaimed as well
		// as reserved and scheduled ones.
		past  = 500 * time.Millisecond
		topic = "e2e.kill"
	)
	args := serveArgs(backend, t.TempDir())
	srv := startServer(t, args...)
	// The whole run, from the first push, is bounded; building the binary
	// is not counted.
	deadline := time.Now().Add(55 * time.Second)
	api := newCaller(t, srv.HTTPURL)

	ids := make(map[string]bool, total)
	start := time.Now()
	for b := 0; b < total/batch; b++ {
		jobs := make([]map[string]any, batch)
		for i := range jobs {
			n := b*batch + i
			jobs[i] = map[string]any{
				"topic":  topic,
				"body":   map[string]int{"n": n},
				"run_at": start.Add(-past + (past+spread)*time.Duration(n)/total).UTC().Format(time.RFC3339Nano),
				"ttr":    "2s",
			}
		}
		var out struct {
			Results []struct {
				ID    string          `json:"id"`
				Error json.RawMessage `json:"error"`
			} `json:"results"`
		}
		api.callJSON(http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": jobs}, http.StatusOK, &out)
		require.Len(t, out.Results, batch)
		for _, r := range out.Results {
			require.Empty(t, r.Error)
			require.NotEmpty(t, r.ID)
			ids[r.ID] = true
		}
	}
	require.Len(t, ids, total)
	t.Logf("pushed %d jobs in %s", total, time.Since(start))

	// Claim some and keep them reserved: no ack.
	held := map[string]bool{}
	for len(held) < reserved {
		require.True(t, time.Now().Before(deadline), "claimed only %d before the deadline", len(held))
		for _, d := range api.claim(topic, reserved-len(held), 5*time.Second) {
			require.True(t, ids[d.ID], "claimed an unknown id %s", d.ID)
			held[d.ID] = true
		}
	}
	api.http.CloseIdleConnections()
	code := srv.signal(syscall.SIGKILL, 10*time.Second)
	require.Equal(t, -1, code, "killed by a signal")
	t.Logf("killed at %s with %d reserved", time.Since(start), len(held))

	srv = startServer(t, args...)
	api = newCaller(t, srv.HTTPURL)
	t.Logf("restarted at %s", time.Since(start))
	acked := make(map[string]bool, total)
	redelivered, duplicates, lost := map[string]bool{}, 0, 0
	for len(acked) < total && time.Now().Before(deadline) {
		wait := min(5*time.Second, time.Until(deadline))
		got := api.claim(topic, 100, wait.Truncate(time.Millisecond))
		for _, d := range got {
			require.True(t, ids[d.ID], "claimed an unknown id %s", d.ID)
			if held[d.ID] {
				require.GreaterOrEqual(t, d.Attempt, 2, "a job reserved before the kill is redelivered with a new attempt")
				redelivered[d.ID] = true
			}
			if acked[d.ID] {
				duplicates++ // at least once allows it; counted for the log
			}
		}
		for i, status := range api.ackAll(got) {
			switch status {
			case http.StatusNoContent:
				acked[got[i].ID] = true
			case http.StatusConflict:
				// The lease ran out before the ack (a slow run): the job is
				// delivered again, and acked then.
				lost++
			default:
				t.Fatalf("ack %s: status %d", got[i].ID, status)
			}
		}
	}
	if lost > 0 {
		t.Logf("%d acks came after their lease expired; those jobs were claimed again", lost)
	}
	t.Logf("acked %d distinct jobs (%d reserved before the kill, %d duplicates) at %s",
		len(acked), len(redelivered), duplicates, time.Since(start))
	var missing []string
	for id := range ids {
		if !acked[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		// Say what became of them, for whoever debugs the backend.
		_, counts := api.call(http.MethodGet, "/v1/topics/"+topic, nil)
		t.Logf("topic after the run: %s", counts)
		for _, id := range missing[:min(len(missing), 10)] {
			status, answer := api.call(http.MethodGet, "/v1/jobs/"+id, nil)
			t.Logf("missing job %s: %d %s (held before the kill: %v)", id, status, answer, held[id])
		}
	}
	require.Empty(t, missing, "jobs not delivered after kill -9: %d of %d", len(missing), total)
	require.Len(t, redelivered, reserved)
}

// TestE2ESIGTERM checks that SIGTERM shuts the service down promptly and
// cleanly, even with a claim waiting, and that its jobs survive a restart.
func TestE2ESIGTERM(t *testing.T) {
	t.Parallel()
	args := defaultArgs(t.TempDir())
	srv := startServer(t, args...)
	api := newCaller(t, srv.HTTPURL)
	var pushed struct{ ID string }
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.term", "delay": "1h"}, http.StatusCreated, &pushed)

	// A long-polling claim is in flight when the signal comes.
	claimed := make(chan error, 1)
	sent := make(chan struct{})
	go func() {
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(sent) }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace),
			http.MethodPost, srv.HTTPURL+"/v1/topics/e2e.idle/claim", strings.NewReader(`{"max": 1, "wait": "50s"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := api.http.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		claimed <- err
	}()
	select {
	case <-sent:
	case <-time.After(5 * time.Second):
		t.Fatal("the claim was not sent")
	}

	begin := time.Now()
	code := srv.signal(syscall.SIGTERM, 10*time.Second)
	took := time.Since(begin)
	require.Equal(t, 0, code)
	require.Less(t, took, 5*time.Second, "shutdown took %s", took)
	t.Logf("shutdown took %s", took)
	select {
	case <-claimed:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting claim did not end with the server")
	}
	log := srv.log()
	for _, want := range []string{"shutting down", "intake and deliveries stopped", "store closed", `msg="nats stopped"`} {
		require.Contains(t, log, want)
	}
	require.Less(t, strings.Index(log, "intake and deliveries stopped"), strings.Index(log, "store closed"))
	require.Less(t, strings.Index(log, "store closed"), strings.Index(log, `msg="nats stopped"`))

	srv = startServer(t, args...)
	api = newCaller(t, srv.HTTPURL)
	var job struct{ State string }
	api.callJSON(http.MethodGet, "/v1/jobs/"+pushed.ID, nil, http.StatusOK, &job)
	require.Equal(t, "scheduled", job.State)
	require.Equal(t, 0, srv.signal(syscall.SIGINT, 10*time.Second), "SIGINT exits 0 too")
}

// TestE2EMemoryBackend runs the service on the memory backend, without
// NATS (nats_backends_test.go runs it with).
func TestE2EMemoryBackend(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--log-format", "text", "--nats-listen", "off",
		"--drain-timeout", "1s")
	api := newCaller(t, srv.HTTPURL)
	require.Empty(t, srv.NATSURL, "no NATS server with --nats-listen off")
	var pushed struct{ ID string }
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.mem", "body": "x"}, http.StatusCreated, &pushed)
	jobs := api.claim("e2e.mem", 1, 5*time.Second)
	require.Len(t, jobs, 1)
	require.Equal(t, pushed.ID, jobs[0].ID)
	// Held at the SIGTERM: the drain waits for it until --drain-timeout.
	begin := time.Now()
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 10*time.Second))
	require.GreaterOrEqual(t, time.Since(begin), time.Second, "the drain waited for the held delivery")
}

// TestE2EPprof serves the profiling endpoints on their own listener, and
// not on the API's, behind the API's Host check.
func TestE2EPprof(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off", "--pprof", "127.0.0.1:0")
	m := regexp.MustCompile(`msg="pprof listening" addr=(\S+)`).FindStringSubmatch(srv.log())
	require.NotNil(t, m, "the log names the pprof address")
	resp, err := http.Get("http://" + m[1] + "/debug/pprof/cmdline")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "--pprof")

	// A DNS rebinding page names its own host: 421, as the API answers it,
	// so it cannot read the command line (which may hold a password).
	req, err := http.NewRequest(http.MethodGet, "http://"+m[1]+"/debug/pprof/cmdline", nil)
	require.NoError(t, err)
	req.Host = "attacker-rebind.example"
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
	require.Contains(t, string(body), `"code":"misdirected_request"`)
	require.NotContains(t, string(body), "--pprof")

	resp, err = http.Get(srv.HTTPURL + "/debug/pprof/cmdline")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the API does not serve profiles")
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 10*time.Second))
}

// TestE2ERedisBackend runs the service on a real redis-server.
func TestE2ERedisBackend(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
	require.NoError(t, err)
	t.Cleanup(rs.Kill)
	srv := startServer(t, "--backend", "redis", "--redis-url", rs.URL(), "--http", "127.0.0.1:0", "--nats-listen", "off")
	api := newCaller(t, srv.HTTPURL)
	var pushed struct{ ID string }
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"topic": "e2e.redis", "body": map[string]int{"n": 1}, "delay": "300ms"},
		http.StatusCreated, &pushed)
	jobs := api.claim("e2e.redis", 1, 5*time.Second)
	require.Len(t, jobs, 1)
	require.Equal(t, pushed.ID, jobs[0].ID)
	status, answer := api.call(http.MethodPost, "/v1/jobs/"+jobs[0].ID+"/ack", map[string]any{"lease": jobs[0].Lease})
	require.Equal(t, http.StatusNoContent, status, "%s", answer)
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 10*time.Second))
}

// TestE2ERedisWarnings: serve warns at start of a Redis without an
// append-only file, and of its in-process NATS server, which instances
// sharing the Redis would split; with AOF on and NATS off, of neither.
func TestE2ERedisWarnings(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	const noAOF, ownNATS = "redis keeps no append-only file (appendonly no)", "several instances sharing this Redis must all name one NATS with --nats-url"
	bare, err := redistest.StartServer(redistest.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(bare.Kill)
	srv := startServer(t, "--backend", "redis", "--redis-url", bare.URL(), "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1")
	log := srv.log()
	require.Equal(t, 1, strings.Count(log, noAOF), log)
	require.Equal(t, 1, strings.Count(log, ownNATS), log)
	require.Equal(t, 0, srv.signal(syscall.SIGTERM, 10*time.Second))

	durable, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: "everysec"})
	require.NoError(t, err)
	t.Cleanup(durable.Kill)
	srv = startServer(t, "--backend", "redis", "--redis-url", durable.URL(), "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-listen", "off")
	log = srv.log()
	require.Contains(t, log, "redis connected")
	require.NotContains(t, log, noAOF)
	require.NotContains(t, log, ownNATS)
}

// TestE2EServeWaitsForBackend: a start whose Redis does not answer yet
// waits for it (--backend-wait), saying so, and serves once it answers.
func TestE2EServeWaitsForBackend(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	rs, err := redistest.StartServer(redistest.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(rs.Kill)
	rs.Kill()
	addr := freeLoopbackAddr(t)
	cmd := exec.Command(binary(t), "serve", "--backend", "redis", "--redis-url", rs.URL(), "--http", addr,
		"--nats-listen", "off", "--data", t.TempDir(), "--backend-wait", "1m")
	cmd.Env = childEnv()
	proc, _, err := logproc.Start(t.Context(), cmd, 30*time.Second, regexp.MustCompile(`backend unavailable at start: trying again`))
	require.NoError(t, err)
	t.Cleanup(proc.Kill)
	require.NoError(t, rs.Start())
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, proc.Log())
	require.Contains(t, proc.Log(), "redis connected")
}

// TestE2EServeFailures checks that serve exits 1 with a clear message when
// it cannot start, and 2 on a usage error.
func TestE2EServeFailures(t *testing.T) {
	t.Parallel()
	busy := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(busy.Close)
	addr := strings.TrimPrefix(busy.URL, "http://")
	code, _, stderr := runCLI(t, "serve", "--backend", "memory", "--http", addr, "--nats-listen", "off")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "address already in use")

	code, _, stderr = runCLI(t, "serve", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-listen", addr)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "delayq: --nats-listen: ")
	require.Contains(t, stderr, "address already in use")

	code, _, stderr = runCLI(t, "serve", "--backend", "redis", "--redis-url", "redis://"+addr, "--nats-listen", "off", "--backend-wait", "1s")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "backend unavailable at start: trying again")
	require.Contains(t, stderr, "delayq: redis store: ")

	code, _, stderr = runCLIWith(t, []string{"DELAYQ_MAX_BATCH=lots"}, "", "serve")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "DELAYQ_MAX_BATCH")
}
