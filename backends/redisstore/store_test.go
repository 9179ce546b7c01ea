package redisstore

import (
	"testing"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// harness opens stores on url: each Open is a new client and store, as a
// separate delayq instance would have, over the namespace's prefix.
func harness(url string, mod ...func(*Config)) storetest.Harness {
	return storetest.Harness{
		Open: func(t *testing.T, ns string) core.Store {
			return openStore(t, url, "st-"+ns, mod...)
		},
		OpenRetention: func(t *testing.T, ns string, retention time.Duration) core.Store {
			return openStore(t, url, "st-"+ns, append(mod, func(c *Config) { c.Retention = retention })...)
		},
		OpenClock: func(t *testing.T, ns string, clock core.Clock) core.Store {
			return openStore(t, url, "st-"+ns, append(mod, func(c *Config) { c.Clock, c.TimeFromClock = clock, true })...)
		},
		Durable: true,
	}
}

// TestStoreStandalone runs the conformance suite on a standalone server,
// with its default of one shard.
func TestStoreStandalone(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness(standaloneURL(t)))
}

// TestStoreStandaloneSharded runs it with 16 shards on a standalone
// server, where each promotion, claim and lease script serves several,
// with jobs stored as hashes, the form of the prefixes made before
// packed jobs (the other runs pack them), and on a server without
// functions, where the store runs scripts (the others call its library).
func TestStoreStandaloneSharded(t *testing.T) {
	t.Parallel()
	h := harness(scriptsOnlyURL(t), func(c *Config) { c.Shards = 16; c.JobForm = JobFormHash })
	h.FinishedPerShard = true
	storetest.Run(t, h)
}

// TestStoreCluster runs the conformance suite on a 3-master Redis Cluster.
func TestStoreCluster(t *testing.T) {
	t.Parallel()
	h := harness(clusterURL(t))
	h.FinishedPerShard = true
	storetest.Run(t, h)
}
