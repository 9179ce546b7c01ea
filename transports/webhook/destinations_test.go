package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

func webhookTopic(url string) *core.Topic {
	t := core.Topic{Name: "hooks", Delivery: core.Delivery{Type: core.DeliveryWebhook, URL: url}}.WithDefaults()
	return &t
}

// requireDenied checks that err is the 400 delivery.url error of a denied
// destination, saying why.
func requireDenied(t *testing.T, err error, why string) {
	t.Helper()
	require.ErrorIs(t, err, ErrDestinationDenied)
	e := wire.ToError(err)
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.Equal(t, "delivery.url", e.Field)
	require.Contains(t, e.Message, why)
}

func TestParseDestinations(t *testing.T) {
	t.Parallel()
	_, err := ParseDestinations([]string{"10.0.0.0/8", "10.1.2.3", "hooks.example.com", "*.example.com", "*", "::1", " "}, []string{"fe80::/10"})
	require.NoError(t, err)
	for _, bad := range []string{"10.0.0.0/33", "a*b.com", "*.", "http://x"} {
		_, err := ParseDestinations([]string{bad}, nil)
		require.Error(t, err, bad)
	}
}

func TestDestinationRules(t *testing.T) {
	t.Parallel()
	addr := netip.MustParseAddr
	var none *Destinations
	// Defaults: private and loopback pass, link-local and metadata do not.
	require.NoError(t, none.checkAddr("svc", addr("127.0.0.1")))
	require.NoError(t, none.checkAddr("svc", addr("10.1.2.3")))
	require.NoError(t, none.checkAddr("svc", addr("::1")))
	require.ErrorIs(t, none.checkAddr("svc", addr("169.254.169.254")), ErrDestinationDenied)
	require.ErrorIs(t, none.checkAddr("svc", addr("::ffff:169.254.169.254")), ErrDestinationDenied)
	require.ErrorIs(t, none.checkAddr("svc", addr("fe80::1")), ErrDestinationDenied)
	for _, a := range []string{"fd00:ec2::254", "fd20:ce::254", "100.100.100.200", "::ffff:100.100.100.200", "192.0.0.192", "168.63.129.16"} {
		require.ErrorIs(t, none.checkAddr("svc", addr(a)), ErrDestinationDenied, a)
	}
	// Their neighbours are ordinary addresses.
	for _, a := range []string{"fd00:ec2::253", "100.100.100.201", "100.64.0.1", "192.0.0.193", "168.63.129.17"} {
		require.NoError(t, none.checkAddr("svc", addr(a)), a)
	}
	require.ErrorIs(t, none.checkHost("Metadata.Google.Internal."), ErrDestinationDenied)

	// A host pattern in allow does not lift the address denial.
	d, err := ParseDestinations([]string{"*.example.com"}, nil)
	require.NoError(t, err)
	require.NoError(t, d.checkAddr("a.example.com", addr("10.1.2.3")))
	require.ErrorIs(t, d.checkAddr("evil.example.com", addr("169.254.169.254")), ErrDestinationDenied)
	require.ErrorIs(t, d.checkAddr("other.org", addr("10.1.2.3")), ErrDestinationDenied) // not on the allow list

	// An allow range lifts it.
	d, err = ParseDestinations([]string{"169.254.169.254"}, nil)
	require.NoError(t, err)
	require.NoError(t, d.checkAddr("svc", addr("169.254.169.254")))

	// Deny wins over allow.
	d, err = ParseDestinations([]string{"10.0.0.0/8"}, []string{"10.9.0.0/16", "*.internal"})
	require.NoError(t, err)
	require.NoError(t, d.checkAddr("svc", addr("10.1.2.3")))
	require.ErrorIs(t, d.checkAddr("svc", addr("10.9.1.1")), ErrDestinationDenied)
	require.ErrorIs(t, d.checkHost("db.internal"), ErrDestinationDenied)

	// Unspecified addresses count as both loopback addresses, embedded IPv4
	// addresses as themselves.
	d, err = ParseDestinations(nil, []string{"::1"})
	require.NoError(t, err)
	require.ErrorIs(t, d.checkAddr("svc", addr("0.0.0.0")), ErrDestinationDenied)
	require.ErrorIs(t, d.checkAddr("svc", addr("0.1.2.3")), ErrDestinationDenied)
	require.NoError(t, d.checkAddr("svc", addr("127.0.0.1")))
	d, err = ParseDestinations([]string{"10.0.0.0/8", "127.0.0.1"}, nil)
	require.NoError(t, err)
	require.ErrorIs(t, d.checkAddr("svc", addr("::")), ErrDestinationDenied, "::1 is not allowed")
	require.ErrorIs(t, d.checkAddr("svc", addr("::a00:1")), ErrDestinationDenied, "the IPv6 address is not allowed")
	require.NoError(t, d.checkAddr("svc", addr("::ffff:10.0.0.1")))
	require.Equal(t, []netip.Addr{addr("64:ff9b::a00:1"), addr("10.0.0.1")}, reaches(addr("64:ff9b::10.0.0.1")))
	require.Equal(t, []netip.Addr{addr("::1")}, reaches(addr("::1")))
	require.Equal(t, []netip.Addr{addr("2001:db8::1")}, reaches(addr("2001:db8::1%eth0")))

	// Names ending in a number are IPv4 addresses to some resolvers.
	for _, h := range []string{"127.1", "0x7f000001", "1.2.3.4.", "a.0x", "a.08"} {
		require.True(t, numericHost(h), h)
	}
	for _, h := range []string{"hooks.example.com", "1.example", "example.0xg", "a1.b2", "localhost"} {
		require.False(t, numericHost(h), h)
	}
}

// TestValidateTopicDestinations checks the refusal at topic configuration:
// a 400 on delivery.url that says why.
func TestValidateTopicDestinations(t *testing.T) {
	t.Parallel()
	d := New(Config{LookupNetIPFunc: func(_ context.Context, _, host string) ([]netip.Addr, error) {
		if host == "meta.example.com" {
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		}
		return nil, errors.New("no such host")
	}})
	t.Cleanup(d.CloseIdleConnections)
	requireDenied(t, d.ValidateTopic(webhookTopic("http://169.254.169.254/latest/meta-data")), "link-local or cloud metadata")
	requireDenied(t, d.ValidateTopic(webhookTopic("http://[fe80::1]:8080/")), "link-local")
	requireDenied(t, d.ValidateTopic(webhookTopic("http://metadata.google.internal/computeMetadata/v1/")), "cloud metadata service")
	requireDenied(t, d.ValidateTopic(webhookTopic("https://meta.example.com/hook")), "resolves to 169.254.169.254")
	require.NoError(t, d.ValidateTopic(webhookTopic("http://127.0.0.1:9000/hook")))
	require.NoError(t, d.ValidateTopic(webhookTopic("https://not-resolvable.example/hook")))

	dests, err := ParseDestinations(nil, []string{"127.0.0.0/8"})
	require.NoError(t, err)
	d2 := New(Config{Destinations: dests})
	t.Cleanup(d2.CloseIdleConnections)
	requireDenied(t, d2.ValidateTopic(webhookTopic("http://127.0.0.1:9000/hook")), "on the deny list")
}

// TestDeliverDestinationDenied checks the refusal at delivery, after name
// resolution: a host allowed when the topic was configured that resolves
// to a denied address when the job is delivered (DNS rebinding) is never
// connected to.
func TestDeliverDestinationDenied(t *testing.T) {
	t.Parallel()
	b := setup(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	port := b.srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	dests, err := ParseDestinations(nil, []string{"127.0.0.0/8"})
	require.NoError(t, err)
	var lookups atomic.Int32
	d := New(Config{Destinations: dests, LookupNetIPFunc: func(context.Context, string, string) ([]netip.Addr, error) {
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("10.20.30.40")}, nil // at configuration
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // at delivery
	}})
	t.Cleanup(d.CloseIdleConnections)

	topic := webhookTopic("http://rebind.example:" + strconv.Itoa(int(port)) + "/hook")
	require.NoError(t, d.ValidateTopic(topic))
	err = d.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: &core.Job{ID: "j1", Topic: "hooks", Body: []byte(`1`), Attempt: 1}})
	require.ErrorContains(t, err, "webhook destination denied: rebind.example resolves to 127.0.0.1, which is on the deny list")
	require.Zero(t, b.conns.Load(), "the denied address was connected to")

	// The same server is reached when the policy allows it.
	ok := New(Config{LookupNetIPFunc: func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}})
	t.Cleanup(ok.CloseIdleConnections)
	require.NoError(t, ok.Deliver(t.Context(), &core.DeliverParams{Topic: topic, Job: &core.Job{ID: "j1", Topic: "hooks", Body: []byte(`1`), Attempt: 1}}))
	require.Equal(t, int64(1), b.conns.Load())
}

// TestDestinationSpellings tries every spelling of loopback and cloud
// metadata addresses that Go's URL parser accepts, against the deny list
// of the security review (127.0.0.0/8 and ::1) and the built-in denials:
// each is refused by ValidateTopic on delivery.url and again at delivery,
// and the receiver listening on 127.0.0.1 sees no connection.
func TestDestinationSpellings(t *testing.T) {
	t.Parallel()
	b := setup(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	port := strconv.Itoa(int(b.srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()))
	dests, err := ParseDestinations(nil, []string{"127.0.0.0/8", "::1"})
	require.NoError(t, err)
	d := New(Config{Destinations: dests})
	t.Cleanup(d.CloseIdleConnections)

	// The receiver is reachable, and denied, as 127.0.0.1.
	open := New(Config{})
	t.Cleanup(open.CloseIdleConnections)
	job := &core.Job{ID: "j1", Topic: "hooks", Body: []byte(`1`), Attempt: 1}
	require.NoError(t, open.Deliver(t.Context(), &core.DeliverParams{Topic: webhookTopic("http://127.0.0.1:" + port + "/"), Job: job}))
	require.Equal(t, int64(1), b.conns.Load())

	for _, host := range []string{
		// Loopback.
		"127.0.0.1", "127.0.0.1.", "127.1", "127.0.1", "0x7f000001", "0x7F.1", "2130706433", "0177.0.0.1",
		"0177.1", "017700000001", "127.0.0.01", "１２７.０.０.１",
		"localhost", "LOCALHOST.", "Localhost", "api.localhost",
		"[::1]", "[0::1]", "[0:0:0:0:0:0:0:1]", "[::1%25lo]",
		"[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:7f00:1]", "[::ffff:127.1.2.3]",
		// Unspecified addresses reach the local host.
		"0.0.0.0", "0", "0.0", "0x0", "00.0.0.0", "[::]", "[0::]", "[::ffff:0.0.0.0]", "[::ffff:0:0]",
		// IPv4-compatible and NAT64 forms of loopback.
		"[::127.0.0.1]", "[::7f00:1]", "[64:ff9b::127.0.0.1]", "[64:ff9b::7f00:1]",
		// Cloud metadata, denied by default.
		"169.254.169.254", "0xa9fea9fe", "0xA9.0xFE.0xA9.0xFE", "2852039166", "0251.0376.0251.0376",
		"169.254.43518", "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "[0:0:0:0:0:ffff:a9fe:a9fe]",
		"[::169.254.169.254]", "[64:ff9b::169.254.169.254]", "[64:ff9b::a9fe:a9fe]",
		"[fd00:ec2::254]", "[FD00:EC2:0:0:0:0:0:254]", "[fe80::a9fe:a9fe%25eth0]", "[fd20:ce::254]",
		"100.100.100.200", "0x646464c8", "[::ffff:100.100.100.200]", "[64:ff9b::6464:64c8]",
		"192.0.0.192", "[::ffff:c000:c0]", "168.63.129.16", "[::ffff:a83f:8110]",
		"metadata.google.internal", "METADATA.GOOGLE.INTERNAL.",
	} {
		u := "http://" + host + ":" + port + "/hook"
		requireDenied(t, d.ValidateTopic(webhookTopic(u)), "")
		err := d.Deliver(t.Context(), &core.DeliverParams{Topic: webhookTopic(u), Job: job})
		require.ErrorContains(t, err, "webhook destination denied", u)
	}
	require.Equal(t, int64(1), b.conns.Load(), "a denied spelling reached the receiver")
}
