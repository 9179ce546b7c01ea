package httptransport

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPISpec is the OpenAPI 3.1 description of the HTTP API, kept beside
// the handlers so that a change of a route and of its description go in one
// commit; openapi_test.go checks that every route is described and that the
// handler tests' requests and answers match it.
//
//go:embed openapi.json
var openAPISpec []byte

// OpenAPI returns the OpenAPI 3.1 description of the HTTP API in JSON, as
// GET /v1/openapi.json serves it: every route of New, and those delayq serve
// mounts with Handle (WebSocket subscribe, /metrics). The caller must not
// modify it.
func OpenAPI() []byte { return openAPISpec }

// serveOpenAPI answers the description as it is kept. It is open, like the
// health probes: it is documentation and tells nothing the repository does
// not.
func (s *Server) serveOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openAPISpec)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPISpec)
	return nil
}
