package httptransport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/internal/buildinfo"
	"github.com/delayq/delayq/transports/wire"
)

// readyTimeout bounds the backend check of /readyz.
const readyTimeout = 2 * time.Second

// healthz serves GET /healthz: 200 while the process serves.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	s.writeJSON(w, r, http.StatusOK, statusView{Status: "ok"})
	return nil
}

// readyz serves GET /readyz: 200 when the engine's store answers within
// readyTimeout, else 503 unavailable with Retry-After.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	// The check runs on its own so that a store that ignores ctx cannot
	// hold the probe past readyTimeout.
	done := make(chan error, 1)
	go func() { done <- s.engine.Ready(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if errors.Is(err, core.ErrDraining) {
		return err // shutting down: a load balancer should send no more work
	}
	if errors.Is(err, core.ErrStorageFull) {
		return wire.WithMessage("not ready: the server's storage is full (no space left on device): new jobs are refused until space is freed; claims, acks and reads still work", err)
	}
	if err != nil {
		return wire.WithMessage(
			"not ready: the backend does not answer",
			fmt.Errorf("%w: ready check: %w", core.ErrUnavailable, err),
		)
	}
	s.writeJSON(w, r, http.StatusOK, statusView{Status: "ready"})
	return nil
}

// version serves GET /v1/version: the server's version, commit and Go
// version (buildinfo.Info), for an operator checking what a deployment
// runs. Any valid token may ask.
func (s *Server) version(w http.ResponseWriter, r *http.Request) error {
	s.writeJSON(w, r, http.StatusOK, buildinfo.Read())
	return nil
}
