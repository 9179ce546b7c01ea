package httptransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// ExportJobs forwards to the store under downStore, failing as the other
// calls do.
func (d *downStore) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	if err := d.fail(); err != nil {
		return err
	}
	return d.Store.(core.JobExporter).ExportJobs(ctx, fn)
}

// ImportJobs forwards to the store under downStore, failing as the other
// calls do.
func (d *downStore) ImportJobs(ctx context.Context, jobs []*core.Job) ([]bool, error) {
	if err := d.fail(); err != nil {
		return nil, err
	}
	return d.Store.(core.JobImporter).ImportJobs(ctx, jobs)
}

// withoutCapabilities hides the store's optional capabilities.
func withoutCapabilities(c *setupConfig) {
	c.wrap = func(s core.Store) core.Store { return struct{ core.Store }{s} }
}

// exportLines answers GET /v1/export, which must succeed, as its lines
// keyed by id.
func (b *testBundle) exportLines(t *testing.T, header ...string) (raw []byte, byID map[string]map[string]any) {
	t.Helper()
	res := b.do(t, http.MethodGet, "/v1/export", nil, header...)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "application/x-ndjson", res.header.Get("Content-Type"))
	byID = map[string]map[string]any{}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(res.body), "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		id, _ := m["id"].(string)
		require.NotContains(t, byID, id, "exported twice")
		byID[id] = m
	}
	return res.body, byID
}

// importAnswer is the answer to POST /v1/import.
type importAnswer struct {
	Imported int `json:"imported"`
	Skipped  int `json:"skipped"`
	Failed   int `json:"failed"`
	Errors   []struct {
		Line  int `json:"line"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	} `json:"errors"`
}

func (b *testBundle) importBody(t *testing.T, body any, header ...string) importAnswer {
	t.Helper()
	res := b.do(t, http.MethodPost, "/v1/import", body, header...)
	requireStatus(t, res, http.StatusOK)
	var a importAnswer
	require.NoError(t, json.Unmarshal(res.body, &a), "%s", res.body)
	require.NotNil(t, a.Errors)
	return a
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	src, dst := setup(t), setup(t)

	// A body in an odd but valid form, kept byte for byte.
	const oddBody = `{"b" : [1,2 ,3],"a":"<&>\u00e9"}`
	scheduled := src.push(t, `{"topic":"exp.a","id":"s-1","key":"k-1","delay":"1h","ttr":"45s","max_attempts":7,"priority":-3,"backoff":{"delays":["1m",90000]},"body":`+oddBody+`}`)
	ready := src.push(t, `{"topic":"exp.a","id":"r-1"}`)
	reservedID := src.push(t, `{"topic":"exp.b","id":"v-1","body":[1]}`)
	deadID := src.push(t, `{"topic":"exp.c","id":"d-1","max_attempts":1}`)
	done := src.push(t, `{"topic":"exp.c","id":"x-1"}`)

	var deadLease, doneLease string
	for _, d := range src.claim(t, "exp.c", 10) {
		switch d["id"] {
		case deadID:
			deadLease = d["lease"].(string)
		case done:
			doneLease = d["lease"].(string)
		}
	}
	requireStatus(t, src.do(t, http.MethodPost, "/v1/jobs/"+deadID+"/nack", map[string]any{"lease": deadLease, "error": "boom"}), http.StatusNoContent)
	requireStatus(t, src.do(t, http.MethodPost, "/v1/jobs/"+done+"/ack", map[string]any{"lease": doneLease}), http.StatusNoContent)
	claimed := src.claim(t, "exp.b", 1)
	require.Len(t, claimed, 1)
	lease := claimed[0]["lease"].(string)

	raw, jobs := src.exportLines(t)
	require.NotContains(t, string(raw), lease, "the lease is never exported")
	require.NotContains(t, string(raw), "lease")
	require.Contains(t, string(raw), `"body":`+oddBody+`,`, "the body byte for byte")
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	require.Equal(t, []string{deadID, ready, scheduled, reservedID}, ids, "every unfinished job, the done one left out")

	s := jobs[scheduled]
	require.Equal(t, "exp.a", s["topic"])
	require.Equal(t, "k-1", s["key"])
	require.Equal(t, "45s", s["ttr"])
	require.EqualValues(t, 7, s["max_attempts"])
	require.EqualValues(t, -3, s["priority"])
	require.EqualValues(t, 0, s["attempt"])
	require.Equal(t, "scheduled", s["state"])
	require.Equal(t, rfc3339ms(src.clock.Now().Add(time.Hour)), s["run_at"])
	require.Equal(t, rfc3339ms(src.clock.Now()), s["created_at"])
	require.Equal(t, "ready", jobs[ready]["state"])
	require.Equal(t, "reserved", jobs[reservedID]["state"])
	require.EqualValues(t, 1, jobs[reservedID]["attempt"])
	require.Equal(t, "dead", jobs[deadID]["state"])
	require.Equal(t, "boom", jobs[deadID]["last_error"])
	require.Equal(t, map[string]any{"delays": []any{"1m0s", "1m30s"}}, s["backoff"])
	for id, j := range jobs {
		want := 13 // exactly the fields of an export, changes included, and the job's own backoff and history if it has them
		if id == scheduled {
			want++
		}
		if _, ok := j["history"]; ok {
			want++
		}
		require.Len(t, j, want, "the fields of an export: %v", j)
	}

	a := dst.importBody(t, raw, "Content-Type", "application/x-ndjson")
	require.Equal(t, importAnswer{Imported: 4, Errors: a.Errors}, a)
	require.Empty(t, a.Errors)
	again := dst.importBody(t, raw)
	require.Equal(t, 0, again.Imported)
	require.Equal(t, 4, again.Skipped, "importing twice changes nothing")

	got := dst.getJob(t, scheduled)
	for _, f := range []string{"topic", "key", "body", "run_at", "ttr", "max_attempts", "priority", "attempt", "state", "created_at", "last_error", "backoff"} {
		require.Equal(t, s[f], got[f], f)
	}
	res := dst.do(t, http.MethodGet, "/v1/jobs/"+scheduled, nil)
	require.Contains(t, string(res.body), `"body":`+oddBody+`,`, "the body byte for byte after import")
	require.Equal(t, "ready", dst.getJob(t, reservedID)["state"], "a reserved job is imported ready")
	require.EqualValues(t, 1, dst.getJob(t, reservedID)["attempt"])
	d := dst.getJob(t, deadID)
	require.Equal(t, "dead", d["state"])
	require.Equal(t, "boom", d["last_error"])
	require.NotEmpty(t, jobs[deadID]["history"])
	require.Equal(t, jobs[deadID]["history"], d["history"], "the history is imported as it was")
	h := dst.getJob(t, reservedID)["history"].([]any)
	require.Len(t, h, 1)
	require.Equal(t, "lease_expired", h[0].(map[string]any)["outcome"], "the attempt in progress ends with the old store's lease")
	require.Equal(t, rfc3339ms(dst.clock.Now()), h[0].(map[string]any)["ended_at"])
	require.ElementsMatch(t, []any{ready, reservedID}, []any{dst.claim(t, "exp.a", 10)[0]["id"], dst.claim(t, "exp.b", 10)[0]["id"]})
}

// TestJobURLOverHTTP: a job's own url is taken by create, replace, batch
// and import for a webhook topic that allows it, refused otherwise with
// nothing stored, shown by GET and kept by export and import.
func TestJobURLOverHTTP(t *testing.T) {
	t.Parallel()
	src, dst := setup(t), setup(t)
	const allowing = `{"delivery": {"type": "webhook", "url": "https://svc/hook", "allow_job_url": true}}`
	for _, b := range []*testBundle{src, dst} {
		res := b.do(t, http.MethodPut, "/v1/topics/hooks", allowing)
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, true, res.object(t)["delivery"].(map[string]any)["allow_job_url"])
	}
	requireStatus(t, src.do(t, http.MethodPut, "/v1/topics/closed", `{"delivery": {"type": "webhook", "url": "https://svc/hook"}}`), http.StatusOK)
	require.NotContains(t, src.do(t, http.MethodGet, "/v1/topics/closed", nil).object(t)["delivery"], "allow_job_url")

	id := src.push(t, `{"topic":"hooks","id":"own-1","delay":"1h","url":"https://tenant.example/cb?o=42"}`)
	require.Equal(t, "https://tenant.example/cb?o=42", src.getJob(t, id)["url"])
	plain := src.push(t, `{"topic":"hooks","id":"plain-1","delay":"1h"}`)
	require.NotContains(t, src.getJob(t, plain), "url", "shown only when set")

	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/jobs", `{"topic":"closed","id":"c-1","url":"https://tenant.example/cb"}`},
		{http.MethodPost, "/v1/jobs", `{"topic":"pull","id":"c-2","url":"https://tenant.example/cb"}`},
		{http.MethodPost, "/v1/jobs", `{"topic":"hooks","id":"c-3","url":"https://denied.example/cb"}`},
		{http.MethodPost, "/v1/jobs", `{"topic":"hooks","id":"c-4","url":7}`},
		{http.MethodPut, "/v1/jobs/c-5", `{"topic":"closed","url":"https://tenant.example/cb"}`},
	} {
		requireError(t, src.do(t, c.method, c.path, c.body), http.StatusBadRequest, "invalid_argument", "url")
	}
	for _, id := range []string{"c-1", "c-2", "c-3", "c-4", "c-5"} {
		requireStatus(t, src.do(t, http.MethodGet, "/v1/jobs/"+id, nil), http.StatusNotFound)
	}
	// Replace: a new url, and a batch where each job stands alone.
	res := src.do(t, http.MethodPut, "/v1/jobs/own-1", `{"topic":"hooks","delay":"1h","url":"https://tenant.example/cb2"}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "https://tenant.example/cb2", src.getJob(t, "own-1")["url"])
	res = src.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"topic":"hooks","id":"b-1","delay":"1h","url":"https://tenant.example/b"},{"topic":"closed","id":"b-2","url":"https://tenant.example/b"}]}`)
	requireStatus(t, res, http.StatusOK)
	results := res.object(t)["results"].([]any)
	require.Equal(t, "b-1", results[0].(map[string]any)["id"])
	require.Equal(t, "url", results[1].(map[string]any)["error"].(map[string]any)["field"])
	requireStatus(t, src.do(t, http.MethodGet, "/v1/jobs/b-2", nil), http.StatusNotFound)

	raw, lines := src.exportLines(t)
	require.Equal(t, "https://tenant.example/cb2", lines["own-1"]["url"])
	require.Equal(t, "https://tenant.example/b", lines["b-1"]["url"])
	require.NotContains(t, lines["plain-1"], "url")
	a := dst.importBody(t, raw, "Content-Type", "application/x-ndjson")
	require.Equal(t, 3, a.Imported)
	require.Equal(t, "https://tenant.example/cb2", dst.getJob(t, "own-1")["url"])

	// A destination whose topic does not allow job urls refuses those lines.
	other := setup(t)
	a = other.importBody(t, raw, "Content-Type", "application/x-ndjson")
	require.Equal(t, 1, a.Imported)
	require.Equal(t, 2, a.Failed)
	for _, e := range a.Errors {
		require.Equal(t, "url", e.Error.Field)
	}
}

func TestImportBadLines(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) { c.limits.MaxBodyBytes = 1024 })
	now := rfc3339ms(b.clock.Now())
	good := func(id string) string {
		return fmt.Sprintf(`{"id":%q,"topic":"imp","key":"","body":{"n":1},"run_at":%q,"ttr":"30s","max_attempts":3,"attempt":0,"state":"scheduled","created_at":%q,"last_error":""}`, id, now, now)
	}
	huge := `{"id":"big","topic":"imp","run_at":"` + now + `","state":"ready","body":"` + strings.Repeat("x", 200<<10) + `"}`
	lines := []string{
		good("g-1"),
		`{"id":"bad-json"`,
		"",
		`{"id":"u-1","topic":"imp","run_at":"` + now + `","state":"ready","lease":"l"}`,
		`{"id":"st-1","topic":"imp","run_at":"` + now + `","state":"done","ttr":"1s","max_attempts":1}`,
		huge,
		`{"id":"t-1","topic":"imp","run_at":"soon","state":"ready"}`,
		`{"id":"b-1","topic":"imp","run_at":"` + now + `","state":"ready","max_attempts":1,"body":"` + strings.Repeat("x", 2000) + `"}`,
		good("g-2") + "\r",
		"   ",
		good("g-1"),
	}
	a := b.importBody(t, strings.Join(lines, "\n"))
	require.Equal(t, 2, a.Imported)
	require.Equal(t, 1, a.Skipped, "g-1 twice")
	require.Equal(t, 6, a.Failed)
	type lineErr struct {
		line        int
		code, field string
	}
	var got []lineErr
	for _, e := range a.Errors {
		require.NotEmpty(t, e.Error.Message)
		got = append(got, lineErr{e.Line, e.Error.Code, e.Error.Field})
	}
	require.Equal(t, []lineErr{
		{2, "invalid_argument", ""},
		{4, "invalid_argument", "lease"},
		{5, "invalid_argument", "state"},
		{6, "too_large", ""},
		{7, "invalid_argument", "run_at"},
		{8, "too_large", "body"},
	}, got, "each bad line alone, in order")
	require.Equal(t, "ready", b.getJob(t, "g-2")["state"], "stored by its run_at, which is due")
	res := b.do(t, http.MethodGet, "/v1/jobs/st-1", nil)
	requireStatus(t, res, http.StatusNotFound)

	empty := b.importBody(t, "")
	require.Equal(t, importAnswer{Errors: empty.Errors}, empty)
}

// TestImportBoundsTimes: an import line whose created_at or history time
// is outside run_at's range (a year 9999 created_at came back from the
// local store as 1816) fails alone, naming its field, and stores nothing.
func TestImportBoundsTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := rfc3339ms(b.clock.Now())
	line := func(id, createdAt, startedAt string) string {
		return fmt.Sprintf(`{"id":%q,"topic":"imp","run_at":%q,"state":"dead","attempt":1,"max_attempts":1,"ttr":"30s","created_at":%q,`+
			`"history":[{"attempt":1,"started_at":%q,"ended_at":%q,"via":"pull","outcome":"buried"}]}`, id, now, createdAt, startedAt, now)
	}
	a := b.importBody(t, strings.Join([]string{
		line("c-far", "9999-12-31T00:00:00Z", now),
		line("c-ancient", "1969-12-31T23:59:59Z", now),
		line("h-far", now, "9999-12-31T00:00:00Z"),
		line("ok", now, now),
	}, "\n"))
	require.Equal(t, 1, a.Imported, "%+v", a.Errors)
	require.Equal(t, 3, a.Failed)
	var fields []string
	for _, e := range a.Errors {
		require.Equal(t, "invalid_argument", e.Error.Code)
		fields = append(fields, e.Error.Field)
	}
	require.Equal(t, []string{"created_at", "created_at", "history"}, fields)
	require.Contains(t, a.Errors[0].Error.Message, "created_at must be from 1970-01-01T00:00:00Z")
	for _, id := range []string{"c-far", "c-ancient", "h-far"} {
		requireStatus(t, b.do(t, http.MethodGet, "/v1/jobs/"+id, nil), http.StatusNotFound)
	}
	require.Equal(t, now, b.getJob(t, "ok")["created_at"])
}

func TestImportManyBatches(t *testing.T) {
	t.Parallel()
	src, dst := setup(t), setup(t)
	const n = 2500
	for i := 0; i < n; i += 500 {
		jobs := make([]map[string]any, 500)
		for k := range jobs {
			jobs[k] = map[string]any{"topic": "many", "id": fmt.Sprintf("m-%05d", i+k), "delay": "1h", "body": i + k}
		}
		requireStatus(t, src.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": jobs}), http.StatusOK)
	}
	raw, jobs := src.exportLines(t)
	require.Len(t, jobs, n)
	require.Equal(t, importAnswer{Imported: n, Errors: []struct {
		Line  int `json:"line"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}{}}, dst.importBody(t, raw))
	_, again := dst.exportLines(t)
	require.Len(t, again, n)
	require.Equal(t, float64(1234), again["m-01234"]["body"])
}

func TestExportImportUnsupported(t *testing.T) {
	t.Parallel()
	b := setup(t, withoutCapabilities)
	requireError(t, b.do(t, http.MethodGet, "/v1/export", nil), http.StatusNotImplemented, "unimplemented", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/import", ""), http.StatusNotImplemented, "unimplemented", "")
	m := requireError(t, b.do(t, http.MethodPost, "/v1/import", `{"id":"x"}`), http.StatusNotImplemented, "unimplemented", "")
	require.Contains(t, m["error"].(map[string]any)["message"], "import is not supported")
}

func TestExportImportStoreDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, `{"topic":"down","id":"d-1"}`)
	raw, _ := b.exportLines(t)
	b.down.mode.Store(modeUnavailable)
	requireError(t, b.do(t, http.MethodGet, "/v1/export", nil), http.StatusServiceUnavailable, "unavailable", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/import", raw), http.StatusServiceUnavailable, "unavailable", "")
	b.down.mode.Store(modeBroken)
	res := b.do(t, http.MethodGet, "/v1/export", nil)
	m := requireError(t, res, http.StatusInternalServerError, "internal", "")
	require.NotContains(t, string(res.body), "10.0.0.7")
	require.Equal(t, "internal error", m["error"].(map[string]any)["message"])
}

func TestExportImportNeedAdmin(t *testing.T) {
	t.Parallel()
	b, _ := setupAuth(t)
	admin := []string{"Authorization", "Bearer " + adminSecret}
	for _, secret := range []string{pushSecret, consumeSecret, ordersSecret} {
		h := []string{"Authorization", "Bearer " + secret}
		requireError(t, b.do(t, http.MethodGet, "/v1/export", nil, h...), http.StatusForbidden, "permission_denied", "")
		requireError(t, b.do(t, http.MethodPost, "/v1/import", "", h...), http.StatusForbidden, "permission_denied", "")
	}
	requireError(t, b.do(t, http.MethodGet, "/v1/export", nil), http.StatusUnauthorized, "unauthenticated", "")
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs", `{"topic":"adm","id":"a-1"}`, admin...), http.StatusCreated)
	raw, jobs := b.exportLines(t, admin...)
	require.Contains(t, jobs, "a-1")
	require.Equal(t, 1, b.importBody(t, raw, admin...).Skipped)
}

// TestExportAbortsOnLateError checks that an export failing after it began
// breaks the connection rather than ending as a short, well-formed answer.
func TestExportAbortsOnLateError(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *setupConfig) {
		c.wrap = func(s core.Store) core.Store { return &failingExporter{Store: s} }
	})
	for i := range 3000 {
		b.push(t, fmt.Sprintf(`{"topic":"late","id":"l-%05d","body":"%s"}`, i, strings.Repeat("x", 100)))
	}
	_, err := b.send(t.Context(), http.MethodGet, "/v1/export", nil)
	require.Error(t, err, "the body is cut off")
}

// failingExporter fails an export after 2000 jobs.
type failingExporter struct{ core.Store }

func (f *failingExporter) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	n := 0
	return f.Store.(core.JobExporter).ExportJobs(ctx, func(j *core.Job) error {
		if n++; n > 2000 {
			return core.ErrUnavailable
		}
		return fn(j)
	})
}
