package httptransport_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// listPage is the answer to GET /v1/topics/{topic}/jobs?state=.
type listPage struct {
	Jobs      []map[string]any `json:"jobs"`
	NextAfter string           `json:"next_after"`
	Scanned   *int             `json:"scanned"`
}

func (b *testBundle) list(t *testing.T, query string) listPage {
	t.Helper()
	res := b.do(t, http.MethodGet, "/v1/topics/orders/jobs?"+query, nil)
	requireStatus(t, res, http.StatusOK)
	var v listPage
	require.NoError(t, json.Unmarshal(res.body, &v))
	require.NotNil(t, v.Jobs, "an empty list, not null: %s", res.body)
	for _, j := range v.Jobs {
		require.NotContains(t, j, "lease", "listings do not show leases")
	}
	return v
}

func pageIDs(p listPage) []string {
	ids := make([]string, len(p.Jobs))
	for i, j := range p.Jobs {
		ids[i] = j["id"].(string)
	}
	return ids
}

// TestListJobsByState: GET /v1/topics/{topic}/jobs?state= lists a topic's
// jobs in a state as GET /v1/jobs/{id} shows them now, by pages in run_at
// order, and with contains only those whose body holds the text, reading
// at most scan jobs.
func TestListJobsByState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	later := b.push(t, `{"topic": "orders", "delay": "3h", "body": {"item": "needle"}}`)
	first := b.push(t, `{"topic": "orders", "delay": "1h", "body": {"item": "hay"}}`)
	second := b.push(t, `{"topic": "orders", "delay": "2h", "body": {"item": "needle"}}`)
	b.push(t, `{"topic": "other", "delay": "1h"}`)
	claimed := b.push(t, `{"topic": "orders", "body": "x"}`)
	require.Len(t, b.claim(t, "orders", 1), 1)

	p := b.list(t, "state=scheduled&limit=2")
	require.Equal(t, []string{first, second}, pageIDs(p), "by run_at")
	require.NotEmpty(t, p.NextAfter, "there may be more")
	require.Nil(t, p.Scanned, "scanned only with contains")
	want := b.getJob(t, first)
	require.Contains(t, want, "trail")
	delete(want, "trail")
	require.Equal(t, want, p.Jobs[0], "each job as GET shows it, without its trail")
	rest := b.list(t, "state=scheduled&limit=2&after="+url.QueryEscape(p.NextAfter))
	require.Equal(t, []string{later}, pageIDs(rest))
	require.Empty(t, rest.NextAfter, "the last page")
	require.Equal(t, []string{claimed}, pageIDs(b.list(t, "state=reserved")))
	require.Empty(t, b.list(t, "state=done").Jobs)

	// As of now: once its run_at passed, a scheduled job is listed ready,
	// and so is a reserved job once its lease expired (first by run_at).
	b.clock.Advance(90 * time.Minute)
	ready := b.list(t, "state=ready")
	require.Equal(t, []string{claimed, first}, pageIDs(ready))
	require.Equal(t, "ready", ready.Jobs[1]["state"])
	require.Empty(t, b.list(t, "state=reserved").Jobs)
	require.Equal(t, []string{second, later}, pageIDs(b.list(t, "state=scheduled")))

	found := b.list(t, "state=scheduled&contains=needle")
	require.Equal(t, []string{second, later}, pageIDs(found))
	require.Equal(t, 2, *found.Scanned)
	require.Empty(t, found.NextAfter)
	// A scan that stops early says where to go on.
	found = b.list(t, "state=scheduled&contains=needle&scan=1")
	require.Equal(t, []string{second}, pageIDs(found))
	require.Equal(t, 1, *found.Scanned)
	require.NotEmpty(t, found.NextAfter)
	found = b.list(t, "state=scheduled&contains=needle&scan=1&after="+url.QueryEscape(found.NextAfter))
	require.Equal(t, []string{later}, pageIDs(found))
	found = b.list(t, "state=scheduled&contains=nothing")
	require.Empty(t, found.Jobs)
	require.Equal(t, 2, *found.Scanned)

	for query, field := range map[string]string{
		"":                                   "key",
		"contains=needle":                    "key",
		"key=a&state=ready":                  "state",
		"state=waiting":                      "state",
		"state=":                             "state",
		"state=ready&limit=0":                "limit",
		"state=ready&limit=1001":             "limit",
		"state=ready&limit=x":                "limit",
		"state=ready&after=not-a-cursor!":    "after",
		"state=ready&contains=":              "contains",
		"state=ready&contains=a&scan=0":      "scan",
		"state=ready&contains=a&scan=100001": "scan",
		"state=ready&contains=a&scan=x":      "scan",
		"state=ready&scan=10":                "scan",
	} {
		requireError(t, b.do(t, http.MethodGet, "/v1/topics/orders/jobs?"+query, nil), http.StatusBadRequest, "invalid_argument", field)
	}
	requireError(t, b.do(t, http.MethodGet, "/v1/topics/or..ders/jobs?state=ready", nil), http.StatusBadRequest, "invalid_argument", "topic")
}

// TestLargeAnswersStreamed: listings, dead listings and claims of large
// jobs are written as they are encoded (no Content-Length: the answer is
// never whole in memory), and a listing's page holds at most
// core.ListPageBytes of bodies, with next_after to go on; a small answer
// keeps its Content-Length.
func TestLargeAnswersStreamed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const size = 900 << 10
	body := json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)
	hour := time.Hour
	for range 12 {
		_, err := b.engine.Push(t.Context(), &core.PushParams{Topic: "orders", Body: body, Delay: &hour})
		require.NoError(t, err)
		_, err = b.engine.Push(t.Context(), &core.PushParams{Topic: "due", Body: body})
		require.NoError(t, err)
	}
	res := b.do(t, http.MethodGet, "/v1/topics/orders/jobs?state=scheduled&limit=100", nil)
	requireStatus(t, res, http.StatusOK)
	require.Empty(t, res.header.Get("Content-Length"), "streamed")
	var p listPage
	require.NoError(t, json.Unmarshal(res.body, &p))
	require.Len(t, p.Jobs, core.ListPageBytes/size, "as many as fit in a page's bytes")
	require.NotEmpty(t, p.NextAfter)
	rest := b.list(t, "state=scheduled&limit=100&after="+url.QueryEscape(p.NextAfter))
	require.Len(t, rest.Jobs, 12-len(p.Jobs))
	require.Empty(t, rest.NextAfter)

	res = b.do(t, http.MethodPost, "/v1/topics/due/claim", `{"max": 12}`)
	requireStatus(t, res, http.StatusOK)
	require.Empty(t, res.header.Get("Content-Length"), "streamed")
	var claimed struct{ Jobs []map[string]any }
	require.NoError(t, json.Unmarshal(res.body, &claimed))
	require.Len(t, claimed.Jobs, 12, "a claim is bounded by its max, not by bytes: its jobs are leased")

	res = b.do(t, http.MethodGet, "/v1/topics/other/jobs?state=scheduled", nil)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, strconv.Itoa(len(res.body)), res.header.Get("Content-Length"))
}
