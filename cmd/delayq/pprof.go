package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/delayq/delayq/transports/httptransport"
)

// startPprof serves Go's profiling endpoints on addr, on a listener of
// their own: profiles reveal internals and cost CPU, so they are opt-in
// and never share the API's port or tokens. They get the API's Host check
// (allowedHosts as --allowed-hosts), so that a page of a DNS rebinding name
// cannot read them: /debug/pprof/cmdline holds the command line, secrets
// given as flags included. It returns the function that stops the server.
func startPprof(addr string, allowedHosts []string, log *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	h, err := httptransport.RequireHost(allowedHosts, mux)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof server stopped", "err", err)
		}
	}()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
