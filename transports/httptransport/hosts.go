package httptransport

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/delayq/delayq/transports/wire"
)

// checkHost refuses a request whose Host header names a host the server
// does not serve (see Config.AllowedHosts), so that a page of a DNS
// rebinding name cannot read the API: an error wrapping
// wire.ErrMisdirectedRequest. The health probes are served whatever their
// Host, since load balancers and kubelets probe by address.
func (s *Server) checkHost(r *http.Request, pattern string) error {
	if pattern == "GET /healthz" || pattern == "GET /readyz" {
		return nil
	}
	return checkHost(s.allowedHosts, r)
}

// checkHost refuses a request whose Host is not among allowed (normalized
// by normalizeHostPatterns) or, when allowed is empty, that came in on a
// loopback address but names another host: an error wrapping
// wire.ErrMisdirectedRequest.
func checkHost(allowed []string, r *http.Request) error {
	host := hostName(r.Host)
	if len(allowed) > 0 {
		for _, p := range allowed {
			if matchHost(p, host) {
				return nil
			}
		}
		return wire.WithMessage(fmt.Sprintf("host %q is not served here: it is not one of the allowed hosts (--allowed-hosts)", r.Host), wire.ErrMisdirectedRequest)
	}
	if !loopbackConn(r) || loopbackHost(host) {
		return nil
	}
	return wire.WithMessage(fmt.Sprintf(
		"host %q is not served here: on a loopback address only localhost and loopback addresses are, unless --allowed-hosts names more", r.Host),
		wire.ErrMisdirectedRequest)
}

// RequireHost returns h behind the API's Host check, for a listener of its
// own such as the profiling endpoints': a request whose Host header names
// a host not in allowedHosts (patterns as Config.AllowedHosts takes them)
// or, when allowedHosts is empty, that came in on a loopback address but
// names neither localhost nor a loopback address, is answered 421
// misdirected_request with the JSON error body and never reaches h. So a
// page of a DNS rebinding name cannot read what h serves. Errors: a
// pattern that Config.Validate refuses.
func RequireHost(allowedHosts []string, h http.Handler) (http.Handler, error) {
	for _, p := range allowedHosts {
		if err := validateHostPattern(p); err != nil {
			return nil, fmt.Errorf("httptransport: RequireHost: %w", err)
		}
	}
	allowed := normalizeHostPatterns(allowedHosts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkHost(allowed, r); err != nil {
			e := toAPIError(err)
			b := append([]byte{'{'}, appendErrorFields(nil, e)...)
			writeRaw(w, e.Status, append(b, '}'))
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// hostName returns the host of a Host header: without port, brackets or a
// final dot, in lower case.
func hostName(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// loopbackConn reports whether the request came in on a loopback address.
func loopbackConn(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// validateHostPattern checks an allowed-host pattern: *, *.name, a name or
// an address, without port.
func validateHostPattern(p string) error {
	if p == "*" || isAddr(p) {
		return nil
	}
	if name := strings.TrimPrefix(p, "*."); name == "" || strings.ContainsAny(name, "*/:[] \t") {
		return fmt.Errorf("host pattern %q: want a host name, *.name, * or an address, without port", p)
	}
	return nil
}

// isAddr reports whether s is an IP address, with or without brackets.
func isAddr(s string) bool {
	_, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return err == nil
}

// normalizeHostPatterns writes patterns as hostName writes hosts.
func normalizeHostPatterns(patterns []string) []string {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		out[i] = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(p, "["), "]"), "."))
		if a, err := netip.ParseAddr(out[i]); err == nil {
			out[i] = a.String()
		}
	}
	return out
}

// matchHost reports whether host matches pattern as wire.MatchHost does,
// with an address in its canonical form, as normalizeHostPatterns writes
// addresses.
func matchHost(pattern, host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	}
	return wire.MatchHost(pattern, host)
}
