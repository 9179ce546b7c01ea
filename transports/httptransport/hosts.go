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
	host := hostName(r.Host)
	if len(s.allowedHosts) > 0 {
		for _, p := range s.allowedHosts {
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
