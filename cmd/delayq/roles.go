package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/delayq/delayq/core"
)

// The roles of --roles.
const (
	// roleAPI serves the HTTP, gRPC, WebSocket and NATS APIs: intake,
	// reads, pull claims and subscribers.
	roleAPI = "api"
	// roleDeliver runs the push deliveries (webhook, NATS), the dead-letter
	// notices and the expiry sweep.
	roleDeliver = "deliver"
	// roleSchedules fires the recurring schedules.
	roleSchedules = "schedules"
)

// allRoles are the roles in the order --roles lists them, all by default.
var allRoles = []string{roleAPI, roleDeliver, roleSchedules}

// roles is the set of --roles.
type roles []string

func (r roles) has(role string) bool { return slices.Contains(r, role) }

// engineRoles returns the engine's services of r.
func (r roles) engineRoles() core.Roles {
	return core.Roles{SkipDeliveries: !r.has(roleDeliver), SkipSchedules: !r.has(roleSchedules)}
}

// rolesValue is the --roles flag: a comma-separated subset of allRoles,
// none twice, at least one.
type rolesValue struct{ p *roles }

func (v *rolesValue) String() string { return strings.Join(*v.p, ",") }
func (v *rolesValue) Type() string   { return "roles" }
func (v *rolesValue) Set(s string) error {
	var out roles
	for r := range strings.SplitSeq(s, ",") {
		r = strings.TrimSpace(r)
		switch {
		case !slices.Contains(allRoles, r):
			return fmt.Errorf("want roles among %s, comma-separated, not %q", strings.Join(allRoles, ", "), r)
		case out.has(r):
			return fmt.Errorf("role %q given twice", r)
		}
		out = append(out, r)
	}
	*v.p = out
	return nil
}

// checkRoles refuses a partial --roles on a backend whose store one
// process keeps to itself (local, jetstream, memory): the other roles
// would need another process on the same store.
func (c *serveConfig) checkRoles() error {
	if len(c.Roles) == len(allRoles) {
		return nil
	}
	switch c.Backend {
	case backendRedis, backendNATS:
		return nil
	}
	return fmt.Errorf("--roles %s leaves %s to other instances, which --backend %s cannot have: its store is this process's alone; split roles over instances of --backend redis or nats (docs/deploying.md, Roles)",
		strings.Join(c.Roles, ","), strings.Join(slices.DeleteFunc(slices.Clone(allRoles), c.Roles.has), ","), c.Backend)
}

// errNoAPI is the answer of an instance without the api role to any
// request but its health, readiness and metrics.
var errNoAPI = errors.New("this instance serves no API (--roles without api): it answers /healthz, /readyz and /metrics only; send API requests to an instance with the api role")

// healthOnly serves, of api, only what an instance without the api role
// keeps: /healthz, /readyz, /metrics and /v1/version; anything else is
// answered 404 not_found saying why.
func healthOnly(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics", "/v1/version":
			api.ServeHTTP(w, r)
			return
		}
		body, _ := json.Marshal(map[string]map[string]string{"error": {"code": "not_found", "message": errNoAPI.Error(), "field": ""}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(body)
	})
}
