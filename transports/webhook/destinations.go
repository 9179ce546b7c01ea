package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/idna"

	"github.com/delayq/delayq/transports/wire"
)

// ErrDestinationDenied is wrapped by the errors of destinations the
// Destinations policy refuses, at topic configuration and at delivery.
var ErrDestinationDenied = errors.New("webhook destination denied")

// Built-in denials, lifted only by an explicit allow entry: link-local
// addresses, which include the metadata address 169.254.169.254 of AWS,
// GCP, Azure, Oracle and most clouds (and Tencent's 169.254.0.23), the
// metadata addresses of clouds that serve it elsewhere, and the GCP
// metadata host name.
var (
	defaultDenyNets = []netip.Prefix{
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("fe80::/10"),
		netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS, IPv6
		netip.MustParsePrefix("fd20:ce::254/128"),   // GCP, IPv6
		netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud
		netip.MustParsePrefix("192.0.0.192/32"),     // Oracle Cloud (legacy)
		netip.MustParsePrefix("168.63.129.16/32"),   // Azure WireServer (agent and extension configuration)
	}
	defaultDenyHosts = []string{"metadata.google.internal"}
)

// resolveTimeout bounds the name resolution of ValidateTopic.
const resolveTimeout = 3 * time.Second

// Destinations decides which hosts and addresses webhooks may be sent to.
// Entries are CIDR ranges ("10.0.0.0/8"), single addresses ("10.1.2.3") or
// host patterns ("hooks.example.com", "*.example.com" for any name under
// example.com, "*" for every name). A destination, its URL's host name and
// each address it resolves to, is refused when
//
//   - its host matches a deny pattern or its address a deny range;
//   - there are allow entries and neither its host nor its address matches
//     one;
//   - its address is link-local (169.254.0.0/16, fe80::/10, which hold the
//     cloud metadata address 169.254.169.254) or another cloud's metadata
//     address (fd00:ec2::254 AWS, fd20:ce::254 GCP, 100.100.100.200
//     Alibaba, 192.0.0.192 Oracle, 168.63.129.16 Azure WireServer), unless
//     an allow range holds that address, or its host is
//     metadata.google.internal, unless an allow pattern names it.
//
// Loopback and private ranges are allowed unless denied. An address is
// checked as each address it reaches (see reaches): IPv4-mapped,
// IPv4-compatible and NAT64 (64:ff9b::/96) addresses also as their IPv4
// address, unspecified ones (0.0.0.0/8, ::) also as 127.0.0.1 and ::1.
// localhost and names under it resolve to the loopback addresses, and a
// host whose last label is a number (127.1, 0x7f000001) is refused. The
// zero value and nil apply only the built-in denials.
type Destinations struct {
	allowHosts, denyHosts []string
	allowNets, denyNets   []netip.Prefix
}

// ParseDestinations parses allow and deny entries. It returns an error
// naming the first malformed entry.
func ParseDestinations(allow, deny []string) (*Destinations, error) {
	d := &Destinations{}
	var err error
	if d.allowHosts, d.allowNets, err = parseEntries(allow); err != nil {
		return nil, fmt.Errorf("webhook: allow: %w", err)
	}
	if d.denyHosts, d.denyNets, err = parseEntries(deny); err != nil {
		return nil, fmt.Errorf("webhook: deny: %w", err)
	}
	return d, nil
}

func parseEntries(list []string) (hosts []string, nets []netip.Prefix, err error) {
	for _, e := range list {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
			continue
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, nil, fmt.Errorf("%q is not a CIDR range", e)
			}
			nets = append(nets, p.Masked())
		default:
			if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				a = a.Unmap()
				nets = append(nets, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			rest := strings.TrimPrefix(e, "*.")
			if e != "*" && (rest == "" || strings.ContainsAny(rest, "*/:[] ")) {
				return nil, nil, fmt.Errorf("%q is not a host pattern such as hooks.example.com or *.example.com", e)
			}
			hosts = append(hosts, strings.TrimSuffix(e, "."))
		}
	}
	return hosts, nets, nil
}

// matchHost reports whether host matches one of patterns.
func matchHost(patterns []string, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, p := range patterns {
		if wire.MatchHost(p, host) {
			return true
		}
	}
	return false
}

func containsAddr(nets []netip.Prefix, a netip.Addr) bool {
	for _, p := range nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// checkHost applies the rules that need only the host name; hosts that are
// address literals are left to checkAddr.
func (d *Destinations) checkHost(host string) error {
	if d == nil {
		d = &Destinations{}
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return nil
	}
	switch {
	case numericHost(host):
		return fmt.Errorf("%w: host %s is an IPv4 address in a form other than dotted decimal (a.b.c.d), which resolvers read differently", ErrDestinationDenied, host)
	case matchHost(d.denyHosts, host):
		return fmt.Errorf("%w: host %s is on the deny list", ErrDestinationDenied, host)
	case matchHost(defaultDenyHosts, host) && !matchHost(d.allowHosts, host):
		return fmt.Errorf("%w: host %s is a cloud metadata service, denied unless allowed by name", ErrDestinationDenied, host)
	}
	return nil
}

// checkAddr applies every rule to host resolved to a, and to each address
// a connection to a may reach (see reaches): one of them denied denies a,
// and with an allow list every one must be allowed.
func (d *Destinations) checkAddr(host string, a netip.Addr) error {
	if d == nil {
		d = &Destinations{}
	}
	a = a.Unmap().WithZone("")
	if err := d.checkHost(host); err != nil {
		return err
	}
	allowList := len(d.allowHosts) > 0 || len(d.allowNets) > 0
	for _, r := range reaches(a) {
		what := a.String()
		if r != a {
			what += " (reaching " + r.String() + ")"
		}
		switch {
		case containsAddr(d.denyNets, r):
			return fmt.Errorf("%w: %s resolves to %s, which is on the deny list", ErrDestinationDenied, host, what)
		case allowList && !matchHost(d.allowHosts, host) && !containsAddr(d.allowNets, r):
			return fmt.Errorf("%w: %s (%s) is not on the allow list", ErrDestinationDenied, host, what)
		case (containsAddr(defaultDenyNets, r) || r.IsLinkLocalMulticast()) && !containsAddr(d.allowNets, r):
			return fmt.Errorf("%w: %s resolves to %s, a link-local or cloud metadata address, denied unless an allow range holds it", ErrDestinationDenied, host, what)
		}
	}
	return nil
}

// Address ranges that embed an IPv4 address in their last 32 bits.
var (
	// ipv4Compatible is ::/96, deprecated IPv4-compatible IPv6 (::a.b.c.d),
	// which some stacks still route to a.b.c.d; :: and ::1 are in it but
	// are not such addresses.
	ipv4Compatible = netip.MustParsePrefix("::/96")
	// nat64 is the well-known NAT64 prefix of RFC 6052, which a NAT64
	// gateway translates to the IPv4 address it embeds.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// thisNetwork is 0.0.0.0/8; a connection to one of its addresses, as
	// to ::, reaches the local host on Linux.
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
)

// Loopback addresses, which unspecified addresses reach.
var (
	loopback4 = netip.MustParseAddr("127.0.0.1")
	loopback6 = netip.IPv6Loopback()
)

// reaches returns a, unmapped and without zone, followed by what a
// connection to it may reach instead: the IPv4 address an IPv4-compatible
// (::a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) address embeds, and the loopback
// addresses 127.0.0.1 and ::1 for an unspecified address (0.0.0.0/8, ::),
// as the kernel connects those to the local host.
func reaches(a netip.Addr) []netip.Addr {
	a = a.Unmap().WithZone("")
	out := []netip.Addr{a}
	if a.Is6() && (nat64.Contains(a) || ipv4Compatible.Contains(a) && a != loopback6 && !a.IsUnspecified()) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		out = append(out, v4)
		a = v4
	}
	if a.IsUnspecified() || a.Is4() && thisNetwork.Contains(a) {
		out = append(out, loopback4, loopback6)
	}
	return out
}

// numericHost reports whether host, a name rather than an IP literal, ends
// in a label of digits or of 0x and hex digits: an IPv4 address in a form
// such as 127.1, 0x7f000001, 2130706433 or 0177.0.0.1 that browsers and
// the C library's resolver read as an address and Go's as a name. Such a
// host is refused rather than left to whichever resolver runs.
func numericHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if h, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(h, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// isLocalhost reports whether host is localhost or a name under it, which
// RFC 6761 reserves for the loopback addresses.
func isLocalhost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// lookup resolves host, an address literal to itself and localhost names
// to the loopback addresses, whatever the resolver says of them.
func (dl *Deliverer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a}, nil
	}
	if isLocalhost(host) {
		return []netip.Addr{loopback4, loopback6}, nil
	}
	return dl.lookupFunc(ctx, "ip", host)
}

// checkURLHost is the topic-configuration check of a URL's host: its name,
// then every address it resolves to now. A name that does not resolve yet
// passes; the check at delivery still applies.
func (dl *Deliverer) checkURLHost(host string) error {
	// net/http dials the ASCII form of an internationalized name, in which
	// full-width digits are digits.
	host, err := idnaASCII(host)
	if err != nil {
		return fmt.Errorf("%w: host is not a valid name: %s", ErrDestinationDenied, err)
	}
	if err := dl.dests.checkHost(host); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	addrs, err := dl.lookup(ctx, host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := dl.dests.checkAddr(host, a); err != nil {
			return err
		}
	}
	return nil
}

// dialContext is the DialContext of the Deliverer's transport: it resolves
// the host itself, refuses addresses the policy denies, and dials the
// allowed ones in turn by address, so that what was checked is what is
// dialled; a Control func checks the connected address once more.
func (dl *Deliverer) dialContext(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if err := dl.dests.checkHost(host); err != nil {
			return nil, err
		}
		addrs, err := dl.lookup(ctx, host)
		if err != nil {
			return nil, err
		}
		d := *base
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: unparsable address %s", ErrDestinationDenied, address)
			}
			return dl.dests.checkAddr(host, ap.Addr())
		}
		var first error
		for _, a := range addrs {
			if err := dl.dests.checkAddr(host, a); err != nil {
				first = cmpErr(first, err)
				continue
			}
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return conn, nil
			}
			first = cmpErr(first, err)
			if ctx.Err() != nil {
				break
			}
		}
		if first == nil {
			first = fmt.Errorf("no address for %s", host)
		}
		return nil, first
	}
}

// cmpErr returns a when it is not nil, else b.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// idnaASCII returns host as net/http dials it: unchanged when ASCII, else
// its IDNA lookup form.
func idnaASCII(host string) (string, error) {
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return idna.Lookup.ToASCII(host)
		}
	}
	return host, nil
}
