package redisstore

import (
	"testing"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// harness opens stores on url: each Open is a new client and store, as a
// separate delayq instance would have, over the namespace's prefix.
func harness(url string) storetest.Harness {
	return storetest.Harness{
		Open: func(t *testing.T, ns string) core.Store {
			return openStore(t, url, "st-"+ns)
		},
		Durable: true,
	}
}

// TestStoreStandalone runs the conformance suite on a standalone server.
func TestStoreStandalone(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness(standaloneURL(t)))
}

// TestStoreCluster runs the conformance suite on a 3-master Redis Cluster.
func TestStoreCluster(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness(clusterURL(t)))
}
