package ui_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/ui"
)

// TestHandler checks what the UI's handler serves: the page with the
// server's auth setting, the modules as JavaScript, the security headers,
// and 404 for a file it does not have.
func TestHandler(t *testing.T) {
	t.Parallel()
	get := func(h http.Handler, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	for _, auth := range []bool{false, true} {
		h := ui.Handler(ui.Config{Auth: auth})
		rec := get(h, ui.Prefix)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
		want := `<meta name="delayq-auth" content="false">`
		if auth {
			want = `<meta name="delayq-auth" content="true">`
		}
		require.Contains(t, rec.Body.String(), want)
		require.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'self'")
		require.Contains(t, rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'")
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
	}
	h := ui.Handler(ui.Config{})
	for _, name := range []string{"js/app.js", "js/api.js", "js/overview.js", "js/chart.js"} {
		rec := get(h, ui.Prefix+name)
		require.Equal(t, http.StatusOK, rec.Code, name)
		require.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), "text/javascript"), "%s: %s", name, rec.Header().Get("Content-Type"))
	}
	rec := get(h, ui.Prefix+"style.css")
	require.Equal(t, http.StatusOK, rec.Code)
	require.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), "text/css"))
	require.Equal(t, http.StatusNotFound, get(h, ui.Prefix+"nope.js").Code)
}
