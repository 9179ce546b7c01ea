package apicompat_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/transports/httptransport"
)

// httpStep is one request of the HTTP scenario. Its path, body and header
// values may name values of earlier answers by their placeholders
// (<lease-1>).
type httpStep struct {
	title  string
	method string
	path   string
	token  string
	body   string
	// contentType defaults to application/json when there is a body.
	contentType string
	// header holds other request headers, name then value.
	header []string
}

// skippedHeaders are the answer headers a transcript leaves out: they
// differ from run to run (Date) or only repeat the body (Content-Length).
var skippedHeaders = []string{"Date", "Content-Length"}

// httpRun runs HTTP steps against a bundle and records them.
type httpRun struct {
	t  *testing.T
	b  *testBundle
	tr *transcript
	// seen holds the statuses each route (an operation of openapi.json)
	// answered.
	seen map[string]map[int]bool
	ops  *operations
}

// do sends one step and records it; it returns the answer's status and
// body.
func (h *httpRun) do(s httpStep) (int, []byte) {
	h.t.Helper()
	path, body := h.tr.resolve(s.path), h.tr.resolve(s.body)
	req, err := http.NewRequestWithContext(h.t.Context(), s.method, h.b.srv.URL+path, strings.NewReader(body))
	require.NoError(h.t, err)
	if body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	shown := []string{}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
		shown = append(shown, "Authorization: Bearer "+s.token)
	}
	if body != "" {
		ct := s.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
		shown = append(shown, "Content-Type: "+ct)
	}
	for i := 0; i+1 < len(s.header); i += 2 {
		if strings.EqualFold(s.header[i], "Host") {
			req.Host = s.header[i+1]
		} else {
			req.Header.Set(s.header[i], h.tr.resolve(s.header[i+1]))
		}
		shown = append(shown, s.header[i]+": "+s.header[i+1])
	}
	res, err := h.b.client.Do(req)
	require.NoError(h.t, err, "%s %s", s.method, path)
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)

	route := h.ops.route(req)
	h.saw(route, res.StatusCode)

	label := cmpOr(route, "no route")
	if route == "" && strings.HasPrefix(path, "/delayq.v1.") {
		label = "Connect " + strings.TrimPrefix(path, "/")
	}
	h.tr.section(fmt.Sprintf("%s: %s", label, s.title))
	h.tr.lines(">", s.method+" "+path)
	for _, l := range shown {
		h.tr.lines(">", l)
	}
	if body != "" {
		h.tr.lines(">", "")
		h.tr.lines(">", clip(h.tr.normalize(body)))
	}
	h.tr.lines("<", fmt.Sprintf("%d %s", res.StatusCode, http.StatusText(res.StatusCode)))
	for _, name := range slices.Sorted(maps.Keys(res.Header)) {
		if slices.Contains(skippedHeaders, name) {
			continue
		}
		for _, v := range res.Header[name] {
			h.tr.lines("<", name+": "+v)
		}
	}
	if len(answer) > 0 {
		h.tr.lines("<", "")
		h.tr.collect(answer)
		h.tr.lines("<", h.showBody(res, answer))
	}
	return res.StatusCode, answer
}

// saw counts an answer of route for requireCoverage.
func (h *httpRun) saw(route string, status int) {
	if h.seen[route] == nil {
		h.seen[route] = map[int]bool{}
	}
	h.seen[route][status] = true
}

// showBody renders an answer's body for the transcript: JSON re-indented,
// NDJSON a line each, the OpenAPI description and the web UI's page by
// name (their content is kept in files of their own).
func (h *httpRun) showBody(res *http.Response, body []byte) string {
	ct := res.Header.Get("Content-Type")
	switch {
	case bytes.Equal(body, httptransport.OpenAPI()):
		return "(httptransport.OpenAPI(), the embedded openapi.json)"
	case strings.HasPrefix(ct, "text/html"):
		return "(an HTML page)"
	case strings.HasPrefix(ct, "application/x-ndjson"):
		return strings.TrimRight(string(body), "\n")
	case strings.HasPrefix(ct, "application/json"):
		return indentJSON(body)
	}
	return string(body)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// operations are the routes openapi.json describes, matched as a
// net/http ServeMux matches them: the gate finds which operation a request
// reached without asking the transports.
type operations struct {
	mux  *http.ServeMux
	list []string
	// documented holds the statuses each operation documents.
	documented map[string][]int
}

// route returns the operation req reaches, "" when none.
func (o *operations) route(req *http.Request) string {
	_, pattern := o.mux.Handler(req)
	return strings.TrimSuffix(pattern, "{$}")
}

// TestHTTPTranscript replays the HTTP scenario, with the WebSocket
// subscription's frames, and compares it with testdata/http.txt and
// testdata/ws.txt. It fails when an operation of openapi.json has no step,
// no success, or a documented client error no step reaches (but those
// notCovered lists with a reason).
func TestHTTPTranscript(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &httpRun{t: t, b: b, tr: newTranscript(t, "http.txt"), seen: map[string]map[int]bool{}, ops: loadOperations(t)}
	runHTTPScenario(h)
	ws := newTranscript(t, "ws.txt")
	runWebSocketScenario(t, b, ws, h)
	h.tr.complete, ws.complete = true, true
	h.requireCoverage()
}

// requireCoverage fails the test for every operation without a step, a
// success or one of its documented client errors.
func (h *httpRun) requireCoverage() {
	h.t.Helper()
	var missing []string
	for _, op := range h.ops.list {
		seen := h.seen[op]
		if len(seen) == 0 {
			missing = append(missing, op+": no step")
			continue
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(seen)), func(s int) bool { return s < 400 }) && notCovered[op][http.StatusOK] == "" {
			missing = append(missing, op+": no success")
		}
		for _, status := range h.ops.documented[op] {
			if status < 400 || status >= 500 || seen[status] || notCovered[op][status] != "" || notCovered["*"][status] != "" {
				continue
			}
			missing = append(missing, fmt.Sprintf("%s: no %d", op, status))
		}
	}
	require.Empty(h.t, missing, "operations of openapi.json the scenario does not cover: add steps (or a reason to notCovered)")
	// Cross-cutting answers are covered once, on some route.
	all := map[int]bool{}
	for _, seen := range h.seen {
		maps.Copy(all, seen)
	}
	for status := range notCovered["*"] {
		require.True(h.t, all[status], "no step answered %d on any route", status)
	}
}

// notCovered are documented client errors of an operation that the
// scenario does not reach, with the reason; "*" holds those covered once
// on some route rather than on each.
var notCovered = map[string]map[int]string{
	"*": {
		http.StatusMisdirectedRequest: "the Host check is the same for every route: one step",
	},
	"POST /v1/rekey": {
		http.StatusOK: "the gate's stack runs without encryption at rest, whose sealed bodies (random nonces) no transcript could hold: keyring's and httptransport's tests rekey",
	},
	"GET /v1/backup": {
		http.StatusOK:       "memstore has no checkpoint (501); a backup is pebblestore's, which the gate does not run",
		http.StatusConflict: "a backup while another runs: none runs on memstore",
	},
	"GET /v1/jobs/{id}": {
		http.StatusForbidden: "every scope reads jobs, and a job of a topic the token may not use is answered 404",
	},
	"GET /v1/topics": {
		http.StatusForbidden: "every scope reads topics; a restricted token sees only its own",
	},
	"GET /v1/whoami": {
		http.StatusForbidden: "every scope reads it",
	},
	"GET /v1/stats": {
		http.StatusForbidden: "every scope reads it",
	},
	"GET /v1/version": {
		http.StatusForbidden: "every scope reads it",
	},
	"POST /v1/schedules/{name}/run": {
		http.StatusConflict:        "a unique key's conflict is POST /v1/jobs's, whose push the run is: covered there",
		http.StatusTooManyRequests: "the intake quota is POST /v1/jobs's, whose push the run is: covered there",
	},
	"POST /v1/import": {
		http.StatusBadRequest: "only a body that fails to arrive is refused whole; bad lines are answered in the 200",
	},
}

// loadOperations reads the operations of openapi.json.
func loadOperations(t *testing.T) *operations {
	t.Helper()
	doc := struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}{}
	require.NoError(t, json.Unmarshal(httptransport.OpenAPI(), &doc))
	o := &operations{mux: http.NewServeMux(), documented: map[string][]int{}}
	for path, item := range doc.Paths {
		for method, raw := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
			default:
				continue
			}
			var op struct {
				Responses map[string]any `json:"responses"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			pattern := strings.ToUpper(method) + " " + path
			muxPattern := pattern
			if path == "/" {
				// The mux's "/" matches every path; "/{$}" is the root alone.
				muxPattern += "{$}"
			}
			o.mux.Handle(muxPattern, http.NotFoundHandler())
			o.list = append(o.list, pattern)
			for code := range op.Responses {
				if n, err := strconv.Atoi(code); err == nil {
					o.documented[pattern] = append(o.documented[pattern], n)
				}
			}
			slices.Sort(o.documented[pattern])
		}
	}
	slices.Sort(o.list)
	require.NotEmpty(t, o.list)
	return o
}
