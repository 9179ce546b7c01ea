package httptransport_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

func TestClaim(t *testing.T) {
	t.Parallel()

	t.Run("Deliveries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		now := b.clock.Now()
		first := b.push(t, `{"topic":"t","body":{"n": 1},"ttr":"20s","run_at":"2000-01-01T00:00:00Z"}`)
		second := b.push(t, `{"topic":"t","body":[2]}`)
		b.push(t, `{"topic":"t","delay":"1h"}`)
		b.push(t, `{"topic":"other"}`)

		res := b.do(t, http.MethodPost, "/v1/topics/t/claim", `{"max": 10}`)
		requireStatus(t, res, http.StatusOK)
		require.Contains(t, string(res.body), `"body":{"n": 1}`)
		var v struct {
			Jobs []map[string]any `json:"jobs"`
		}
		require.NoError(t, json.Unmarshal(res.body, &v))
		require.Len(t, v.Jobs, 2)
		lease := v.Jobs[0]["lease"].(string)
		require.NotEmpty(t, lease)
		require.Equal(t, map[string]any{
			"id": first, "topic": "t", "body": map[string]any{"n": float64(1)}, "attempt": float64(1),
			"run_at": "2000-01-01T00:00:00.000Z", "lease": lease,
			"lease_expires_at": rfc3339ms(now.Add(20 * time.Second)),
		}, v.Jobs[0])
		require.Equal(t, second, v.Jobs[1]["id"])
		require.Equal(t, rfc3339ms(now.Add(30*time.Second)), v.Jobs[1]["lease_expires_at"])
	})

	t.Run("DefaultsAndEmptyList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPost, "/v1/topics/t/claim", nil)
		requireStatus(t, res, http.StatusOK)
		require.JSONEq(t, `{"jobs":[]}`, string(res.body))

		b.push(t, `{"topic":"t"}`)
		b.push(t, `{"topic":"t"}`)
		res = b.do(t, http.MethodPost, "/v1/topics/t/claim", "")
		requireStatus(t, res, http.StatusOK)
		var v struct{ Jobs []any }
		require.NoError(t, json.Unmarshal(res.body, &v))
		require.Len(t, v.Jobs, 1, "max defaults to 1")
	})

	t.Run("LongWaitReturnsWhenAJobIsDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.push(t, `{"topic":"t","delay":"10s"}`)

		done := make(chan *response, 1)
		go func() {
			res, err := b.send(t.Context(), http.MethodPost, "/v1/topics/t/claim", `{"max":5,"wait":"20s"}`)
			if err != nil {
				res = &response{status: -1, body: []byte(err.Error())}
			}
			done <- res
		}()
		// The claim's timer and the store's timer for the job's due time.
		require.NoError(t, b.clock.BlockUntilContext(t.Context(), 2))
		b.clock.Advance(10 * time.Second)

		res := <-done
		requireStatus(t, res, http.StatusOK)
		var v struct{ Jobs []map[string]any }
		require.NoError(t, json.Unmarshal(res.body, &v))
		require.Len(t, v.Jobs, 1)
		require.Equal(t, id, v.Jobs[0]["id"])
	})

	t.Run("LongWaitReturnsWhenAJobArrives", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		done := make(chan *response, 1)
		go func() {
			res, err := b.send(t.Context(), http.MethodPost, "/v1/topics/t/claim", `{"wait":20000}`)
			if err != nil {
				res = &response{status: -1, body: []byte(err.Error())}
			}
			done <- res
		}()
		require.NoError(t, b.clock.BlockUntilContext(t.Context(), 1))
		id := b.push(t, `{"topic":"t"}`)

		res := <-done
		requireStatus(t, res, http.StatusOK)
		var v struct{ Jobs []map[string]any }
		require.NoError(t, json.Unmarshal(res.body, &v))
		require.Len(t, v.Jobs, 1)
		require.Equal(t, id, v.Jobs[0]["id"])
	})

	t.Run("LongWaitRunsOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		done := make(chan *response, 1)
		go func() {
			res, err := b.send(t.Context(), http.MethodPost, "/v1/topics/t/claim", `{"wait":"20s"}`)
			if err != nil {
				res = &response{status: -1, body: []byte(err.Error())}
			}
			done <- res
		}()
		require.NoError(t, b.clock.BlockUntilContext(t.Context(), 1))
		b.clock.Advance(20 * time.Second)
		res := <-done
		requireStatus(t, res, http.StatusOK)
		require.JSONEq(t, `{"jobs":[]}`, string(res.body))
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, `{"topic":"t"}`)
		for _, tc := range []struct {
			path, body, field string
		}{
			{"/v1/topics/t/claim", `{"max":0}`, "max"},
			{"/v1/topics/t/claim", `{"max":1001}`, "max"},
			{"/v1/topics/t/claim", `{"max":"1"}`, "max"},
			{"/v1/topics/t/claim", `{"wait":"61s"}`, "wait"},
			{"/v1/topics/t/claim", `{"wait":"-1s"}`, "wait"},
			{"/v1/topics/t/claim", `{"wait":"forever"}`, "wait"},
			{"/v1/topics/t/claim", `{"wait":1.5}`, "wait"},
			{"/v1/topics/t/claim", `{"until":"1s"}`, "until"},
			{"/v1/topics/t/claim", `{} {}`, ""},
			{"/v1/topics/t/claim", `[]`, ""},
			{"/v1/topics/a..b/claim", `{}`, "topic"},
		} {
			res := b.do(t, http.MethodPost, tc.path, tc.body)
			requireError(t, res, http.StatusBadRequest, "invalid_argument", tc.field)
		}
		// Bad claims claimed nothing.
		require.Len(t, b.claim(t, "t", 1), 1)
	})
}

func TestAck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, `{"topic":"t"}`)
	d := b.claim(t, "t", 1)[0]
	lease := d["lease"].(string)

	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/ack", `{}`), http.StatusBadRequest, "invalid_argument", "lease")
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/ack", `{"lease":"wrong"}`), http.StatusConflict, "conflict", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/unknown/ack", `{"lease":"x"}`), http.StatusNotFound, "not_found", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/bad%20id/ack", `{"lease":"x"}`), http.StatusNotFound, "not_found", "")
	require.Equal(t, "reserved", b.getJob(t, id)["state"])

	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/ack", map[string]string{"lease": lease}), http.StatusNoContent)
	require.Equal(t, "done", b.getJob(t, id)["state"])
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/ack", map[string]string{"lease": lease}), http.StatusConflict, "conflict", "")
}

func TestLeaseLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, `{"topic":"t","ttr":"5s"}`)
	old := b.claim(t, "t", 1)[0]["lease"].(string)

	b.clock.Advance(6 * time.Second)
	for _, op := range []string{"ack", "touch", "nack"} {
		res := b.do(t, http.MethodPost, "/v1/jobs/"+id+"/"+op, map[string]string{"lease": old})
		requireError(t, res, http.StatusConflict, "conflict", "")
	}

	// The job is handed out again; the old lease stays lost.
	d := b.claim(t, "t", 1)
	require.Len(t, d, 1)
	require.Equal(t, float64(2), d[0]["attempt"])
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/ack", map[string]string{"lease": old}), http.StatusConflict, "conflict", "")
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/ack", map[string]any{"lease": d[0]["lease"]}), http.StatusNoContent)
}

func TestTouch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, `{"topic":"t","ttr":"10s"}`)
	lease := b.claim(t, "t", 1)[0]["lease"].(string)

	b.clock.Advance(8 * time.Second)
	res := b.do(t, http.MethodPost, "/v1/jobs/"+id+"/touch", map[string]string{"lease": lease})
	requireStatus(t, res, http.StatusOK)
	want := rfc3339ms(b.clock.Now().Add(10 * time.Second))
	require.Equal(t, map[string]any{"lease_expires_at": want}, res.object(t))
	require.Equal(t, want, b.getJob(t, id)["lease_expires_at"])

	// Past the first expiry, the touched lease holds.
	b.clock.Advance(8 * time.Second)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/ack", map[string]string{"lease": lease}), http.StatusNoContent)

	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/unknown/touch", `{"lease":"x"}`), http.StatusNotFound, "not_found", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/touch", `{"lease":""}`), http.StatusBadRequest, "invalid_argument", "lease")
}

func TestNackAndDead(t *testing.T) {
	t.Parallel()

	t.Run("RetryAfterDelay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.push(t, `{"topic":"t"}`)
		lease := b.claim(t, "t", 1)[0]["lease"].(string)

		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/nack", map[string]any{"lease": lease, "delay": "-1s"}), http.StatusBadRequest, "invalid_argument", "delay")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/nack", map[string]any{"lease": lease, "delay": "1 minute"}), http.StatusBadRequest, "invalid_argument", "delay")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/nack", map[string]any{"lease": lease, "error": 5}), http.StatusBadRequest, "invalid_argument", "error")
		require.Equal(t, "reserved", b.getJob(t, id)["state"])

		res := b.do(t, http.MethodPost, "/v1/jobs/"+id+"/nack", map[string]any{"lease": lease, "delay": 10000, "error": "boom"})
		requireStatus(t, res, http.StatusNoContent)
		got := b.getJob(t, id)
		require.Equal(t, "scheduled", got["state"])
		require.Equal(t, "boom", got["last_error"])
		require.Equal(t, rfc3339ms(b.clock.Now().Add(10*time.Second)), got["run_at"])
		require.Empty(t, b.claim(t, "t", 1))
		b.clock.Advance(10 * time.Second)
		d := b.claim(t, "t", 1)
		require.Len(t, d, 1)
		require.Equal(t, float64(2), d[0]["attempt"])
	})

	t.Run("DeadRequeue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.push(t, `{"topic":"t","max_attempts":1,"body":{"k": "v"}}`)
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/requeue", nil), http.StatusConflict, "conflict", "")
		lease := b.claim(t, "t", 1)[0]["lease"].(string)
		requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/nack", map[string]any{"lease": lease, "error": "gave up"}), http.StatusNoContent)
		got := b.getJob(t, id)
		require.Equal(t, "dead", got["state"])
		require.Equal(t, "gave up", got["last_error"])

		res := b.do(t, http.MethodGet, "/v1/topics/t/dead", nil)
		requireStatus(t, res, http.StatusOK)
		require.Contains(t, string(res.body), `"body":{"k": "v"}`)
		var v struct{ Jobs []map[string]any }
		require.NoError(t, json.Unmarshal(res.body, &v))
		require.Len(t, v.Jobs, 1)
		require.Equal(t, id, v.Jobs[0]["id"])
		require.Equal(t, "dead", v.Jobs[0]["state"])

		res = b.do(t, http.MethodGet, "/v1/topics/t/dead?limit=1", nil)
		requireStatus(t, res, http.StatusOK)
		for _, q := range []string{"?limit=0", "?limit=1001", "?limit=ten", "?limit="} {
			requireError(t, b.do(t, http.MethodGet, "/v1/topics/t/dead"+q, nil), http.StatusBadRequest, "invalid_argument", "limit")
		}
		requireError(t, b.do(t, http.MethodGet, "/v1/topics/a..b/dead", nil), http.StatusBadRequest, "invalid_argument", "topic")
		// A topic with neither jobs nor configuration is not found, as
		// GET /v1/topics/{topic} answers; one configured, without dead
		// jobs, lists none.
		e := requireError(t, b.do(t, http.MethodGet, "/v1/topics/nosuch/dead", nil), http.StatusNotFound, "not_found", "")
		require.Equal(t, `topic "nosuch" not found`, e["error"].(map[string]any)["message"])
		requireStatus(t, b.do(t, http.MethodPut, "/v1/topics/empty", map[string]any{"max_attempts": 2}), http.StatusOK)
		res = b.do(t, http.MethodGet, "/v1/topics/empty/dead", nil)
		requireStatus(t, res, http.StatusOK)
		require.JSONEq(t, `{"jobs":[]}`, string(res.body))

		requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/requeue", nil), http.StatusNoContent)
		got = b.getJob(t, id)
		require.Equal(t, "ready", got["state"])
		require.Equal(t, float64(0), got["attempt"])
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/requeue", nil), http.StatusConflict, "conflict", "")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/unknown/requeue", nil), http.StatusNotFound, "not_found", "")
	})
}

// abandonStore claims only once the claim's ctx is done, as when a client
// leaves at the moment jobs become due, and reports retries.
type abandonStore struct {
	core.Store
	waiting chan struct{}
	retried chan string
}

func (s *abandonStore) ClaimJobs(ctx context.Context, p *core.ClaimJobsParams) ([]*core.Job, error) {
	close(s.waiting)
	<-ctx.Done()
	return s.Store.ClaimJobs(context.WithoutCancel(ctx), &core.ClaimJobsParams{Topic: p.Topic, Max: p.Max})
}

func (s *abandonStore) RetryJob(ctx context.Context, p *core.RetryJobParams) (core.SettleResult, error) {
	res, err := s.Store.RetryJob(ctx, p)
	s.retried <- p.ID
	return res, err
}

func TestClaimAbandoned(t *testing.T) {
	t.Parallel()
	store := &abandonStore{waiting: make(chan struct{}), retried: make(chan string, 1)}
	b := setup(t, func(c *setupConfig) {
		c.wrap = func(s core.Store) core.Store { store.Store = s; return store }
	})
	id := b.push(t, `{"topic":"t"}`)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := b.send(ctx, http.MethodPost, "/v1/topics/t/claim", `{"wait":"20s"}`)
		done <- err
	}()
	<-store.waiting
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	// The jobs claimed for the client that left are handed out again now,
	// with the attempt the claim counted given back: they never reached it.
	require.Equal(t, id, <-store.retried)
	got := b.getJob(t, id)
	require.Equal(t, "ready", got["state"])
	require.Equal(t, float64(0), got["attempt"])
	require.Contains(t, got["last_error"], "client went away")
}

// panicStore panics on GetJob.
type panicStore struct{ core.Store }

func (panicStore) GetJob(context.Context, string) (*core.Job, error) { panic("boom") }

func TestPanicIsInternal(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) {
		c.wrap = func(s core.Store) core.Store { return panicStore{s} }
	})
	m := requireError(t, b.do(t, http.MethodGet, "/v1/jobs/x", nil), http.StatusInternalServerError, "internal", "")
	require.Equal(t, "internal error", m["error"].(map[string]any)["message"])
	// The server still serves.
	requireStatus(t, b.do(t, http.MethodGet, "/healthz", nil), http.StatusOK)
}
