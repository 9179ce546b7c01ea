package httptransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/service"
)

// bulkAnswer is the answer of a bulk route.
type bulkAnswer struct {
	Count     int              `json:"count"`
	DryRun    bool             `json:"dry_run"`
	Sample    []map[string]any `json:"sample"`
	NextAfter string           `json:"next_after"`
}

// bulk posts filter to a bulk route and decodes its 200 answer.
func (b *testBundle) bulk(t *testing.T, path string, filter any, header ...string) bulkAnswer {
	t.Helper()
	res := b.do(t, http.MethodPost, path, filter, header...)
	requireStatus(t, res, http.StatusOK)
	var a bulkAnswer
	require.NoError(t, json.Unmarshal(res.body, &a))
	require.NotNil(t, a.Sample, "sample is a list, empty for none: %s", res.body)
	return a
}

// kill pushes a job of topic with max_attempts 1 and nacks its delivery
// with text as its error, so that it is dead; it returns its id.
func (b *testBundle) kill(t *testing.T, topic, key, text string) string {
	t.Helper()
	id := b.push(t, fmt.Sprintf(`{"topic":%q,"key":%q,"max_attempts":1}`, topic, key))
	d := b.claim(t, topic, 1)
	require.Len(t, d, 1)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/nack", map[string]any{"lease": d[0]["lease"], "error": text}), http.StatusNoContent)
	require.Equal(t, "dead", b.getJob(t, id)["state"])
	return id
}

// TestRequeueDeadByFilter checks POST /v1/topics/{topic}/dead/requeue: a
// dry run counts and changes nothing, a run requeues exactly the jobs the
// filter matches, and the time filter is the time of death.
func TestRequeueDeadByFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const path = "/v1/topics/t/dead/requeue"
	early := b.kill(t, "t", "a", "HTTP 503 from upstream")
	b.clock.Advance(time.Minute)
	cut := b.clock.Now()
	late503 := b.kill(t, "t", "b", "HTTP 503 again")
	other := b.kill(t, "t", "a", "HTTP 400 bad input")
	b.kill(t, "u", "a", "HTTP 503 in another topic")

	a := b.bulk(t, path, map[string]any{"error_contains": "503", "dry_run": true})
	require.Equal(t, bulkAnswer{Count: 2, DryRun: true, Sample: a.Sample}, a)
	require.Equal(t, []any{early, late503}, []any{a.Sample[0]["id"], a.Sample[1]["id"]}, "oldest death first")
	require.Equal(t, "dead", a.Sample[0]["state"])
	for _, id := range []string{early, late503, other} {
		require.Equal(t, "dead", b.getJob(t, id)["state"], "a dry run changes nothing")
	}

	a = b.bulk(t, path, map[string]any{"error_contains": "503", "since": rfc3339ms(cut)})
	require.Equal(t, 1, a.Count)
	require.False(t, a.DryRun)
	require.Equal(t, late503, a.Sample[0]["id"])
	require.Equal(t, "ready", b.getJob(t, late503)["state"])
	require.EqualValues(t, 0, b.getJob(t, late503)["attempt"], "a fresh attempt count")
	require.Equal(t, "dead", b.getJob(t, early)["state"], "died before since")

	a = b.bulk(t, path, map[string]any{"until": rfc3339ms(cut), "key": "a"})
	require.Equal(t, 1, a.Count)
	require.Equal(t, "ready", b.getJob(t, early)["state"])
	require.Equal(t, "dead", b.getJob(t, other)["state"], "died after until")

	// No body: every dead job of the topic, and then none is left.
	a = b.bulk(t, path, nil)
	require.Equal(t, 1, a.Count)
	require.Equal(t, other, a.Sample[0]["id"])
	require.Equal(t, 0, b.bulk(t, path, nil).Count)
	require.Equal(t, 0, b.bulk(t, "/v1/topics/t/jobs/cancel", map[string]any{"state": "scheduled"}).Count)
}

// TestCancelJobsByFilter checks POST /v1/topics/{topic}/jobs/cancel: the
// state, key and run_at filters, the limit, and that reserved and other
// topics' jobs stay.
func TestCancelJobsByFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const path = "/v1/topics/t/jobs/cancel"
	now := b.clock.Now()
	reserved := b.push(t, `{"topic":"t","key":"k"}`)
	require.Equal(t, reserved, b.claim(t, "t", 1)[0]["id"])
	ready := b.push(t, `{"topic":"t","key":"k"}`)
	soon := b.push(t, `{"topic":"t","key":"k","delay":"1h"}`)
	later := b.push(t, `{"topic":"t","key":"other","delay":"2h"}`)
	elsewhere := b.push(t, `{"topic":"u","key":"k","delay":"1h"}`)

	a := b.bulk(t, path, map[string]any{"state": "scheduled", "key": "k", "dry_run": true})
	require.Equal(t, 1, a.Count)
	require.Equal(t, soon, a.Sample[0]["id"])

	a = b.bulk(t, path, map[string]any{"since": rfc3339ms(now.Add(90 * time.Minute))})
	require.Equal(t, 1, a.Count)
	require.Equal(t, "cancelled", b.getJob(t, later)["state"])
	require.Equal(t, "scheduled", b.getJob(t, soon)["state"], "run_at before since")

	a = b.bulk(t, path, map[string]any{"key": "k", "limit": 1})
	require.Equal(t, 1, a.Count, "the limit bounds the jobs cancelled")
	require.Equal(t, ready, a.Sample[0]["id"], "a key's jobs in id order")
	require.Empty(t, a.NextAfter, "a limit reached ends the operation")
	require.Equal(t, "scheduled", b.getJob(t, soon)["state"])

	a = b.bulk(t, path, map[string]any{"key": "k"})
	require.Equal(t, 1, a.Count, "the rest: the scheduled job")
	require.Equal(t, "reserved", b.getJob(t, reserved)["state"], "a reserved job is never cancelled")
	require.Equal(t, "cancelled", b.getJob(t, ready)["state"])
	require.Equal(t, "cancelled", b.getJob(t, soon)["state"])
	require.Equal(t, "scheduled", b.getJob(t, elsewhere)["state"])
	require.Equal(t, 0, b.bulk(t, path, nil).Count)
}

// TestBulkBadInput checks that a bad filter is answered 400 naming the
// field, an unknown topic 404, and that neither changes anything.
func TestBulkBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.kill(t, "t", "", "boom")
	for _, c := range []struct {
		path, body, field string
	}{
		{"/v1/topics/t/dead/requeue", `{"state": "scheduled"}`, "state"},
		{"/v1/topics/t/jobs/cancel", `{"state": "dead"}`, "state"},
		{"/v1/topics/t/dead/requeue", `{"limit": -1}`, "limit"},
		{"/v1/topics/t/dead/requeue", `{"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}`, "until"},
		{"/v1/topics/t/dead/requeue", `{"since": "yesterday"}`, "since"},
		{"/v1/topics/t/dead/requeue", `{"after": "scheduled:abc"}`, "after"},
		{"/v1/topics/t/dead/requeue", `{"after": "dead:not-a-cursor"}`, "after"},
		{"/v1/topics/t/dead/requeue", `{"after": "dead:1700000000000:not-a-cursor"}`, "after"},
		{"/v1/topics/t/dead/requeue", `{"error": "boom"}`, "error"},
		{"/v1/topics/t/dead/requeue", `[]`, ""},
	} {
		requireError(t, b.do(t, http.MethodPost, c.path, c.body), http.StatusBadRequest, "invalid_argument", c.field)
	}
	requireError(t, b.do(t, http.MethodPost, "/v1/topics/nope/dead/requeue", nil), http.StatusNotFound, "not_found", "")
	require.Equal(t, "dead", b.getJob(t, id)["state"])
}

// TestBulkRestrictedToken checks that a token restricted to some topics
// acts only on those.
func TestBulkRestrictedToken(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.tokens = adminTokens(t) })
	admin := bearer(adminSecret)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"mail","delay":"1h"}`, admin...), http.StatusCreated)
	requireError(t, b.do(t, http.MethodPost, "/v1/topics/mail/jobs/cancel", nil, bearer(ordersAdmin)...), http.StatusForbidden, "permission_denied", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/topics/mail/dead/requeue", nil, bearer(ordersAdmin)...), http.StatusForbidden, "permission_denied", "")
	require.Equal(t, 1, b.bulk(t, "/v1/topics/mail/jobs/cancel", map[string]any{"dry_run": true}, admin...).Count)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"orders.a","delay":"1h"}`, admin...), http.StatusCreated)
	require.Equal(t, 1, b.bulk(t, "/v1/topics/orders.a/jobs/cancel", nil, bearer(ordersAdmin)...).Count)
}

// slowList is a store whose listings take service.BulkTimeMax of the fake
// clock once armed, so that a bulk request runs out of time after a page.
type slowList struct {
	core.Store
	clock *coretest.FakeClock
	armed atomic.Bool
	lists atomic.Int64 // ListJobs calls
}

func (s *slowList) ListJobs(ctx context.Context, p *core.ListJobsParams) (core.JobPage, error) {
	s.lists.Add(1)
	if s.armed.Load() {
		s.clock.Advance(service.BulkTimeMax)
	}
	return s.Store.ListJobs(ctx, p)
}

// TestBulkByKeyReadsTheKeyIndex: a bulk operation with a key reads the
// key's jobs from the topic's index of keys, not the listings of a topic
// whose other jobs may be millions.
func TestBulkByKeyReadsTheKeyIndex(t *testing.T) {
	t.Parallel()
	var store *slowList
	b := setup(t, func(c *setupConfig) {
		c.wrap = func(s core.Store) core.Store { store = &slowList{Store: s}; return store }
	})
	for range 20 {
		b.push(t, `{"topic":"t","delay":"1h"}`)
	}
	keyed := []string{b.push(t, `{"topic":"t","key":"k","delay":"1h"}`), b.push(t, `{"topic":"t","key":"k"}`)}
	before := store.lists.Load()
	a := b.bulk(t, "/v1/topics/t/jobs/cancel", map[string]any{"key": "k"})
	require.Equal(t, 2, a.Count)
	require.Equal(t, before, store.lists.Load(), "no listing read")
	for _, id := range keyed {
		require.Equal(t, "cancelled", b.getJob(t, id)["state"])
	}
	require.Equal(t, 20, b.bulk(t, "/v1/topics/t/jobs/cancel", map[string]any{"dry_run": true}).Count, "the others left")
}

// TestBulkPages checks that a request that runs out of time answers what
// it did and next_after, from which the same request goes on to the end.
func TestBulkPages(t *testing.T) {
	t.Parallel()
	var slow *slowList
	b := setup(t, func(c *setupConfig) {
		c.wrap = func(s core.Store) core.Store { slow = &slowList{Store: s}; return slow }
	})
	slow.clock = b.clock
	const n = core.ListLimitMax + 5
	jobs := make([]string, n)
	for i := range jobs {
		jobs[i] = `{"topic":"t","delay":"1h"}`
	}
	for i := 0; i < n; i += 1000 {
		batch := `{"jobs":[` + strings.Join(jobs[i:min(n, i+1000)], ",") + `]}`
		requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/batch", batch), http.StatusOK)
	}
	slow.armed.Store(true)
	const path = "/v1/topics/t/jobs/cancel"
	total, requests := 0, 0
	for after := ""; ; requests++ {
		a := b.bulk(t, path, map[string]any{"after": after})
		require.Positive(t, a.Count, "each request does a page before its time runs out")
		total += a.Count
		if a.NextAfter == "" {
			break
		}
		after = a.NextAfter
	}
	require.Equal(t, n, total, "every job once")
	require.Positive(t, requests, "the time ran out at least once: next_after")
	slow.armed.Store(false)
	require.Equal(t, 0, b.bulk(t, path, map[string]any{"dry_run": true}).Count)
}

// TestBulkRequeueWalkKeepsItsStart: a requeue that goes on over several
// requests leaves a job it requeued that died again meanwhile, since the
// walk's start goes with next_after.
func TestBulkRequeueWalkKeepsItsStart(t *testing.T) {
	t.Parallel()
	var slow *slowList
	b := setup(t, func(c *setupConfig) {
		c.wrap = func(s core.Store) core.Store { slow = &slowList{Store: s}; return slow }
	})
	slow.clock = b.clock
	ctx := t.Context()
	const n = core.ListLimitMax + 5
	jobs := make([]*core.PushParams, n)
	for i := range jobs {
		jobs[i] = &core.PushParams{Topic: "t", MaxAttempts: 1}
	}
	_, err := b.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: jobs[:1000]})
	require.NoError(t, err)
	_, err = b.engine.PushBatch(ctx, &core.PushBatchParams{Jobs: jobs[1000:]})
	require.NoError(t, err)
	for dead := 0; dead < n; {
		claimed, err := b.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1000})
		require.NoError(t, err)
		for _, j := range claimed {
			require.NoError(t, b.engine.Nack(ctx, &core.NackParams{ID: j.ID, Lease: j.Lease, Error: "boom"}))
		}
		dead += len(claimed)
	}
	b.clock.Advance(time.Second)
	slow.armed.Store(true)
	a := b.bulk(t, "/v1/topics/t/dead/requeue", nil)
	require.NotEmpty(t, a.NextAfter)
	slow.armed.Store(false)
	// One it requeued dies again, after the walk began.
	again := b.claim(t, "t", 1)[0]
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+again["id"].(string)+"/nack", map[string]any{"lease": again["lease"], "error": "boom"}), http.StatusNoContent)
	rest := b.bulk(t, "/v1/topics/t/dead/requeue", map[string]any{"after": a.NextAfter})
	require.Empty(t, rest.NextAfter)
	require.Equal(t, n, a.Count+rest.Count, "each job once")
	require.Equal(t, "dead", b.getJob(t, again["id"].(string))["state"], "not requeued twice by one walk")
	require.Equal(t, 1, b.bulk(t, "/v1/topics/t/dead/requeue", nil).Count, "a new walk takes it")
}
