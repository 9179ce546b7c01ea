package httptransport

import (
	"errors"
	"net/http"

	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// codeMethodNotAllowed is the code of docs/api.md for a route that exists
// with other methods; the other codes are wire's.
const codeMethodNotAllowed = "method_not_allowed"

// errMethodNotAllowed is returned for a path that has routes, none of them
// for the request's method.
var errMethodNotAllowed = errors.New("method not allowed")

// toAPIError maps err with wire.ToError, and errMethodNotAllowed, which no
// core sentinel covers, to 405 method_not_allowed with its own message.
func toAPIError(err error) wire.Error {
	e := wire.ToError(err)
	if e.Code == wire.CodeInternal && errors.Is(err, errMethodNotAllowed) {
		e.Status, e.Code, e.Message = http.StatusMethodNotAllowed, codeMethodNotAllowed, err.Error()
	}
	return e
}

// apiError maps err with toAPIError as the request's token may see it
// (service.Visible).
func (s *Server) apiError(r *http.Request, err error) wire.Error {
	return service.Visible(r.Context(), toAPIError(err))
}

// writeError answers err as the JSON error body with the status of
// apiError, and logs server-side errors.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := s.apiError(r, err)
	s.logError(r, e, err)
	if h := e.RetryAfterHeader(); h != "" {
		w.Header().Set("Retry-After", h)
	}
	b := make([]byte, 0, 256)
	b = append(b, '{')
	b = appendErrorFields(b, e)
	b = append(b, '}')
	writeRaw(w, e.Status, b)
}

// logError logs errors that are the server's fault; a client that went away
// is not one.
func (s *Server) logError(r *http.Request, e wire.Error, err error) {
	switch {
	case e.Status < http.StatusInternalServerError, e.Status == http.StatusNotImplemented:
	case r.Context().Err() != nil:
		s.log.Debug("httptransport: request ended by the client", "method", r.Method, "path", r.URL.Path, "err", err)
	case e.Status == http.StatusServiceUnavailable:
		s.log.Warn("httptransport: unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	default:
		s.log.Error("httptransport: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}

// appendErrorFields appends `"error":{...}` and, for a conflict with a known
// job, `,"job":{...}`, without the surrounding braces.
func appendErrorFields(b []byte, e wire.Error) []byte {
	b = append(b, `"error":{"code":`...)
	b = appendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = appendString(b, e.Message)
	b = append(b, `,"field":`...)
	b = appendString(b, e.Field)
	b = append(b, '}')
	if e.Job != nil {
		b = append(b, `,"job":`...)
		b = appendJob(b, e.Job)
	}
	return b
}
