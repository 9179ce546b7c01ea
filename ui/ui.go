package ui

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
)

// Prefix is the path the UI is served under.
const Prefix = "/ui/"

//go:embed static
var static embed.FS

// contentSecurityPolicy lets the pages load only their own scripts, styles
// and images and call only their own origin's API, so that a job body
// shown on a page cannot run as script, and no other site may frame them.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// Config configures Handler.
type Config struct {
	// Auth is true when the API has tokens: the pages then ask for one
	// before they call it.
	Auth bool
}

// Handler serves the UI's files for requests under Prefix: index.html,
// which routes between the pages in the browser from the URL's fragment,
// for Prefix itself, the embedded file otherwise.
func Handler(cfg Config) http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory is there at build time
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	index = bytes.Replace(index, []byte("{{AUTH}}"), []byte(strconv.FormatBool(cfg.Auth)), 1)
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change with the binary: revalidate rather than cache.
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" || name == "index.html" {
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(index)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		files.ServeHTTP(w, r2)
	})
}
