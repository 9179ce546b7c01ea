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
	require.ErrorIs(t, none.checkAddr("svc", addr("fd00:ec2::254")), ErrDestinationDenied)
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
	err = d.Deliver(t.Context(), topic, &core.Job{ID: "j1", Topic: "hooks", Body: []byte(`1`), Attempt: 1})
	require.ErrorContains(t, err, "webhook destination denied: rebind.example resolves to 127.0.0.1, which is on the deny list")
	require.Zero(t, b.conns.Load(), "the denied address was connected to")

	// The same server is reached when the policy allows it.
	ok := New(Config{LookupNetIPFunc: func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}})
	t.Cleanup(ok.CloseIdleConnections)
	require.NoError(t, ok.Deliver(t.Context(), topic, &core.Job{ID: "j1", Topic: "hooks", Body: []byte(`1`), Attempt: 1}))
	require.Equal(t, int64(1), b.conns.Load())
}
