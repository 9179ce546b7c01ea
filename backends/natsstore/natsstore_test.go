package natsstore

import (
	"testing"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// TestStoreEmbedded runs the conformance suite on the in-process server:
// each namespace is a stream prefix of its own.
func TestStoreEmbedded(t *testing.T) {
	t.Parallel()
	srv := sharedEmbedded(t)
	storetest.Run(t, storetest.Harness{
		ListInStreamOrder:  true,
		FinishedSuperseded: true,
		Open: func(t *testing.T, ns string) core.Store {
			nc, err := srv.Connect()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			return openStore(t, nc, ns)
		},
		OpenRetention: func(t *testing.T, ns string, retention time.Duration) core.Store {
			nc, err := srv.Connect()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			return openStore(t, nc, ns, func(c *Config) { c.Retention = retention })
		},
		Durable: true,
	})
}

// TestStoreExternal runs the conformance suite against a nats-server in a
// separate process, over TCP.
func TestStoreExternal(t *testing.T) {
	t.Parallel()
	srv := sharedExternal(t)
	storetest.Run(t, storetest.Harness{
		ListInStreamOrder:  true,
		FinishedSuperseded: true,
		Open: func(t *testing.T, ns string) core.Store {
			return openStore(t, connectURL(t, srv.URL()), ns)
		},
		OpenRetention: func(t *testing.T, ns string, retention time.Duration) core.Store {
			return openStore(t, connectURL(t, srv.URL()), ns, func(c *Config) { c.Retention = retention })
		},
		Durable: true,
	})
}
