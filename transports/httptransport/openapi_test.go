package httptransport_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/content"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/transports/httptransport"
	"github.com/delayq/delayq/transports/wstransport"
)

// spec is the OpenAPI description, parsed once for every test: the
// validator is safe for concurrent use, and building it compiles every
// schema.
type spec struct {
	model     *v3.Document
	validator validator.Validator
	schemas   schema_validation.SchemaValidator
	// schemasMu serializes schemas: libopenapi renders a schema for
	// validation by writing into the shared model, which the race
	// detector caught between parallel tests.
	schemasMu sync.Mutex
}

var loadSpec = sync.OnceValues(func() (*spec, error) {
	doc, err := libopenapi.NewDocument(httptransport.OpenAPI())
	if err != nil {
		return nil, err
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	// Security is not checked: most tests run without tokens, where the
	// API is open; auth_test.go covers scopes.
	v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation(),
		config.WithBodyDecoder("application/x-ndjson", content.DecoderFunc(decodeNDJSON)))
	if len(errs) > 0 {
		return nil, fmt.Errorf("building the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapi.json is not a valid OpenAPI 3.1 document:\n%s", describeErrors(verrs))
	}
	return &spec{model: &m.Model, validator: v, schemas: schema_validation.NewSchemaValidator()}, nil
})

// decodeNDJSON decodes an NDJSON body (export, import) into the array of
// its lines, blank ones left out, which is how openapi.json's ExportLines
// describes the stream.
func decodeNDJSON(in *content.DecodeInput) (any, error) {
	lines := []any{}
	sc := bufio.NewScanner(in.Body)
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		lines = append(lines, v)
	}
	return lines, sc.Err()
}

func mustSpec(t testing.TB) *spec {
	t.Helper()
	s, err := loadSpec()
	require.NoError(t, err)
	return s
}

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	s := mustSpec(t) // valid against the OpenAPI 3.1 schema, or it fails
	require.Equal(t, "3.1.0", s.model.Version)

	// The file kept in the repository is the one embedded and served.
	file, err := os.ReadFile("openapi.json")
	require.NoError(t, err)
	require.Equal(t, file, httptransport.OpenAPI())
	require.True(t, json.Valid(file))
}

// mountLikeServe mounts on server the routes delayq serve adds with Handle:
// the WebSocket subscribe route of wstransport and /metrics.
func mountLikeServe(t *testing.T, b *testBundle) {
	t.Helper()
	ws, err := wstransport.New(wstransport.Config{Engine: b.engine})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ws.Stop(context.WithoutCancel(t.Context()))) })
	ws.Register(b.server)
	b.server.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = io.WriteString(w, "# TYPE up gauge\nup 1\n")
	}))
	// The web UI's pages (package ui), as serve mounts them.
	b.server.Handle("GET /ui/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><title>delayq</title>")
	}))
	b.server.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	b.server.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
}

// routeMismatches compares the patterns a server mounted with the
// operations of the description: it returns the routes that are not
// described, and the operations that no route serves.
func routeMismatches(s *spec, routes []string) (undescribed, unserved []string) {
	described := map[string]bool{}
	for path, item := range s.model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			described[strings.ToUpper(method)+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, pattern := range routes {
		// A pattern without a method serves every method, which an
		// operation cannot describe: it is undescribed as it stands.
		// "/{$}" is the mux's way of saying "/" alone.
		pattern = strings.TrimSuffix(pattern, "{$}")
		if !described[pattern] {
			undescribed = append(undescribed, pattern)
		}
		served[pattern] = true
	}
	for op := range described {
		if !served[op] {
			unserved = append(unserved, op)
		}
	}
	slices.Sort(unserved)
	return undescribed, unserved
}

func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	s := mustSpec(t)
	b := setup(t)
	mountLikeServe(t, b)

	routes := b.server.Routes()
	require.Contains(t, routes, "GET /v1/topics/{topic}/subscribe")
	require.Contains(t, routes, "GET /metrics")
	undescribed, unserved := routeMismatches(s, routes)
	require.Empty(t, undescribed, "routes missing from openapi.json: describe each under paths")
	require.Empty(t, unserved, "operations of openapi.json that no route serves")

	// A route added without its description is caught, as is one without
	// a method.
	b.server.Handle("GET /v1/undescribed", http.NotFoundHandler())
	b.server.Handle("/v1/any-method", http.NotFoundHandler())
	undescribed, _ = routeMismatches(s, b.server.Routes())
	require.Equal(t, []string{"GET /v1/undescribed", "/v1/any-method"}, undescribed)
	// And an operation nothing serves.
	_, unserved = routeMismatches(s, slices.DeleteFunc(b.server.Routes(), func(p string) bool { return p == "GET /metrics" }))
	require.Equal(t, []string{"GET /metrics"}, unserved)
}

// TestOpenAPISubscribe runs the WebSocket route of wstransport through
// the checks: a refused request's error answer, and an upgrade, whose
// request (query and upgrade headers) is checked.
func TestOpenAPISubscribe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mountLikeServe(t, b)

	requireError(t, b.do(t, http.MethodGet, "/v1/topics/q/subscribe", nil), http.StatusBadRequest, "invalid_argument", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/topics/q/subscribe?prefetch=0", nil, "Connection", "Upgrade", "Upgrade", "websocket",
		"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), http.StatusBadRequest, "invalid_argument", "prefetch")

	conn, res, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(b.srv.URL, "http")+"/v1/topics/q/subscribe?prefetch=4",
		&websocket.DialOptions{HTTPClient: b.srv.Client()})
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
	b.push(t, `{"topic": "q", "body": 1}`)
	_, frame, err := conn.Read(t.Context())
	require.NoError(t, err)
	require.Contains(t, string(frame), `"type":"job"`)
	require.NoError(t, conn.Close(websocket.StatusNormalClosure, ""))

	// GET /metrics, as mounted.
	res2 := b.do(t, http.MethodGet, "/metrics", nil)
	requireStatus(t, res2, http.StatusOK)
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	b, _ := setupAuth(t)

	// Open without a token, as documentation.
	res := b.do(t, http.MethodGet, "/v1/openapi.json", nil)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	require.Equal(t, httptransport.OpenAPI(), res.body)
	// But only on a host the server serves.
	requireError(t, b.do(t, http.MethodGet, "/v1/openapi.json", nil, "Host", "evil.example"), http.StatusMisdirectedRequest, "misdirected_request", "")
	requireError(t, b.do(t, http.MethodPut, "/v1/openapi.json", nil, bearer(pushSecret)...), http.StatusMethodNotAllowed, "method_not_allowed", "")
}

// TestOpenAPIValidationFails shows that answers and requests that do not
// match the description are caught: the checks the handler tests run
// through validatingHandler.
func TestOpenAPIValidationFails(t *testing.T) {
	t.Parallel()
	s := mustSpec(t)
	req := func(method, target, body string) *http.Request {
		r, err := http.NewRequest(method, target, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		return r
	}
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	job := `{"id":"a","topic":"t","key":"","body":null,"run_at":"2026-11-21T10:00:15.250Z","ttr":"30s","max_attempts":10,"priority":0,"attempt":0,"state":"scheduled","created_at":"2026-11-21T10:00:00.000Z","last_error":""}`

	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   string
		want   string // in the errors; "" for none
		// unrouted is a request the server had no route for.
		unrouted bool
	}{
		{"Valid", req("GET", "/v1/jobs/a", ""), 200, jsonHeader, job, "", false},
		{"MissingField", req("GET", "/v1/jobs/a", ""), 200, jsonHeader, strings.Replace(job, `"last_error":""`, `"x":1`, 1), "last_error", false},
		{"BadState", req("GET", "/v1/jobs/a", ""), 200, jsonHeader, strings.Replace(job, `"scheduled"`, `"sleeping"`, 1), "$.state", false},
		{"UndescribedStatus", req("GET", "/v1/jobs/a", ""), 418, jsonHeader, `{"error":{"code":"internal","message":"x","field":""}}`, "418", false},
		{"ErrorCodeOfAnotherStatus", req("GET", "/v1/jobs/a", ""), 404, jsonHeader, `{"error":{"code":"conflict","message":"x","field":""}}`, "not_found", false},
		{"ErrorWithoutField", req("GET", "/v1/jobs/a", ""), 404, jsonHeader, `{"error":{"code":"not_found","message":"x"}}`, "field", false},
		{"CreatedWithoutLocation", req("POST", "/v1/jobs", `{"topic":"t"}`), 201, jsonHeader, `{"id":"a","topic":"t","run_at":"2026-11-21T10:00:15.250Z","state":"ready"}`, "Location", false},
		{"AcceptedBadRequest", req("POST", "/v1/jobs", `{"topic":"t","dealy":"1s"}`), 201, http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/jobs/a"}},
			`{"id":"a","topic":"t","run_at":"2026-11-21T10:00:15.250Z","state":"ready"}`, "dealy", false},
		{"RefusedBadRequest", req("POST", "/v1/jobs", `{"topic":"t","dealy":"1s"}`), 400, jsonHeader, `{"error":{"code":"invalid_argument","message":"unknown field","field":"dealy"}}`, "", false},
		{"UnroutedNotFound", req("GET", "/v1/nothing", ""), 404, jsonHeader, `{"error":{"code":"not_found","message":"no route","field":""}}`, "", true},
		{"UnroutedBadBody", req("GET", "/v1/nothing", ""), 404, jsonHeader, `{"error":"no route"}`, "error", true},
		{"UnroutedSuccess", req("GET", "/v1/nothing", ""), 200, jsonHeader, `{}`, "had no route", true},
		{"RoutedUndescribed", req("GET", "/v1/nothing", ""), 200, jsonHeader, `{}`, "/v1/nothing", false},
		{"MethodNotAllowed", req("POST", "/v1/topics", ""), 405, http.Header{"Content-Type": {"application/json"}, "Allow": {"GET, HEAD"}},
			`{"error":{"code":"method_not_allowed","message":"no","field":""}}`, "", true},
		{"MethodNotAllowedWithoutAllow", req("POST", "/v1/topics", ""), 405, jsonHeader, `{"error":{"code":"method_not_allowed","message":"no","field":""}}`, "Allow", true},
		{"MethodNotAllowedWrongCode", req("POST", "/v1/topics", ""), 405, http.Header{"Content-Type": {"application/json"}, "Allow": {"GET, HEAD"}},
			`{"error":{"code":"not_found","message":"no","field":""}}`, "method_not_allowed", true},
		{"NDJSON", req("GET", "/v1/export", ""), 200, http.Header{"Content-Type": {"application/x-ndjson"}, "Cache-Control": {"no-store"}}, job + "\n" + job + "\n", "", false},
		{"NDJSONBadLine", req("GET", "/v1/export", ""), 200, http.Header{"Content-Type": {"application/x-ndjson"}, "Cache-Control": {"no-store"}},
			job + "\n" + strings.Replace(job, `"ttr":"30s"`, `"ttr":30`, 1) + "\n", "ttr", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := s.check(tc.req, !tc.unrouted, bodyOf(t, tc.req), &http.Response{StatusCode: tc.status, Header: tc.header}, []byte(tc.body))
			if tc.want == "" {
				require.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			require.Contains(t, strings.Join(errs, "\n"), tc.want)
		})
	}
}

func bodyOf(t *testing.T, r *http.Request) []byte {
	t.Helper()
	if r.Body == nil {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return b
}

// errorResponses names, for the statuses a request the server had no route
// for can get (404, 405, or a refusal of the checks before routing: Host,
// cross-origin, token), the response of the description its answer must
// match.
var errorResponses = map[int]string{
	http.StatusUnauthorized:        "Unauthenticated",
	http.StatusForbidden:           "PermissionDenied",
	http.StatusNotFound:            "NotFound",
	http.StatusMethodNotAllowed:    "MethodNotAllowed",
	http.StatusMisdirectedRequest:  "MisdirectedRequest",
	http.StatusInternalServerError: "Internal",
}

// check validates a request and its answer against the description and
// returns what does not match. The answer to a routed request must match
// its operation's response for its status (body, Content-Type, required
// headers), so a route must be described; the answer to a request the
// server had no route for must be an error the description's components
// give for its status. A request is checked only when it was accepted whole
// (an answer below 400 without per-item errors): the handler tests send bad
// requests on purpose, and a refused one need not match.
func (s *spec) check(r *http.Request, routed bool, reqBody []byte, res *http.Response, resBody []byte) []string {
	var errs []string
	vr := r.Clone(context.Background())
	vr.Body = io.NopCloser(bytes.NewReader(reqBody))
	vr.ContentLength = int64(len(reqBody))
	res.Request = vr
	res.Body = io.NopCloser(bytes.NewReader(resBody))
	if res.Header.Get("Content-Type") == "" && len(resBody) > 0 {
		res.Header = res.Header.Clone()
		res.Header.Set("Content-Type", http.DetectContentType(resBody)) // as net/http sends it
	}

	if !routed {
		return s.checkUnrouted(res.StatusCode, res.Header, resBody)
	}
	if _, verrs := s.validator.ValidateHttpResponse(vr, res); len(verrs) > 0 {
		errs = append(errs, "answer: "+describeErrors(verrs))
	}
	if res.StatusCode < 400 && !hasItemErrors(resBody) {
		vr.Body = io.NopCloser(bytes.NewReader(reqBody))
		if _, verrs := s.validator.ValidateHttpRequestSync(vr); len(verrs) > 0 {
			errs = append(errs, "request: "+describeErrors(verrs))
		}
	}
	return errs
}

// checkUnrouted checks the answer to a request the server had no route for
// against the error response of the description's components
// for its status.
func (s *spec) checkUnrouted(status int, header http.Header, body []byte) []string {
	name, ok := errorResponses[status]
	if !ok {
		return []string{fmt.Sprintf("answer %d to a request the server had no route for: only errors (%v) may answer it", status, slices.Sorted(maps.Keys(errorResponses)))}
	}
	resp := s.model.Components.Responses.GetOrZero(name)
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return []string{fmt.Sprintf("answer %d has Content-Type %q, not application/json", status, ct)}
	}
	var errs []string
	for h, def := range resp.Headers.FromOldest() {
		if def.Required && header.Get(h) == "" {
			errs = append(errs, fmt.Sprintf("answer %d lacks the header %s that response %s requires", status, h, name))
		}
	}
	schema := resp.Content.GetOrZero("application/json").Schema.Schema()
	s.schemasMu.Lock()
	ok, verrs := s.schemas.ValidateSchemaBytes(schema, body)
	s.schemasMu.Unlock()
	if !ok {
		errs = append(errs, fmt.Sprintf("answer %d does not match response %s: %s", status, name, describeErrors(verrs)))
	}
	return errs
}

// hasItemErrors reports whether an answer is of a batch some of whose
// items failed on their own: such a request was not accepted whole.
func hasItemErrors(body []byte) bool {
	type result struct {
		Error json.RawMessage `json:"error"`
	}
	var v struct {
		Results []result `json:"results"`
		Failed  int      `json:"failed"`
	}
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	return v.Failed > 0 || slices.ContainsFunc(v.Results, func(r result) bool { return r.Error != nil })
}

// describeErrors writes validation errors with their reasons and the
// schema failures under them.
func describeErrors(errs []*liberrors.ValidationError) string {
	var sb strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&sb, "\n  %s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&sb, "\n    %s (%s): %s", f.FieldPath, f.KeywordLocation, f.Reason)
		}
	}
	return sb.String()
}

// validatingHandler serves through server and checks each request and its
// answer against the description (spec.check), failing t on a mismatch:
// setup mounts every test server behind it, so the handler tests' requests
// and answers are all checked. It tees the bodies rather than buffering
// them, so that streamed answers and slow bodies behave as without it. An
// answer cut by a panic (an export or backup aborted) is not checked, nor
// the answer to a connection taken over (a WebSocket), whose request is.
func validatingHandler(t testing.TB, server *httptransport.Server) http.Handler {
	s := mustSpec(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		routed := hasRoute(server.Routes(), r) // before serving: a handler may change r
		var reqBody bytes.Buffer
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &teeBody{ReadCloser: r.Body, copy: &reqBody}
		}
		tw := &teeWriter{ResponseWriter: w}
		server.ServeHTTP(tw, r)
		if r.Method == http.MethodHead {
			return // net/http sends no body, which the GET operation describes
		}
		res := &http.Response{StatusCode: tw.status, Header: w.Header().Clone()}
		if tw.hijacked {
			res.StatusCode = http.StatusSwitchingProtocols
		}
		if res.StatusCode == 0 {
			res.StatusCode = http.StatusOK // nothing written: net/http answers 200
		}
		var errs []string
		if tw.hijacked {
			vr := r.Clone(context.Background())
			vr.Body = io.NopCloser(bytes.NewReader(reqBody.Bytes()))
			if _, verrs := s.validator.ValidateHttpRequestSync(vr); len(verrs) > 0 {
				errs = append(errs, "request: "+describeErrors(verrs))
			}
		} else {
			errs = s.check(r, routed, reqBody.Bytes(), res, tw.body.Bytes())
		}
		if len(errs) > 0 {
			t.Errorf("%s %s answered %d does not match openapi.json:\n%s\nrequest body: %.500s\nanswer body: %.500s",
				r.Method, r.URL, res.StatusCode, strings.Join(errs, "\n"), reqBody.Bytes(), tw.body.Bytes())
		}
	})
}

// hasRoute reports whether one of routes, net/http ServeMux patterns,
// serves r, as the server's mux decides it.
func hasRoute(routes []string, r *http.Request) bool {
	mux := http.NewServeMux()
	for _, p := range routes {
		mux.Handle(p, http.NotFoundHandler())
	}
	_, pattern := mux.Handler(r)
	return pattern != ""
}

// teeBody keeps a copy of what the handler reads of a request body.
type teeBody struct {
	io.ReadCloser
	copy *bytes.Buffer
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.copy.Write(p[:n])
	return n, err
}

// teeWriter keeps a copy of an answer as it is written. Unwrap lets
// http.ResponseController reach the connection (deadlines, flushes); Hijack
// marks a connection taken over.
type teeWriter struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	hijacked bool
}

func (w *teeWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *teeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body.Write(p)
	return w.ResponseWriter.Write(p)
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *teeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	w.hijacked = true
	return h.Hijack()
}
