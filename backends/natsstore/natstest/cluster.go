package natstest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Cluster is a JetStream cluster of nats-server processes on 127.0.0.1,
// routed to each other.
type Cluster struct {
	nodes []*Server
}

// ClusterOptions configure StartClusterWith.
type ClusterOptions struct {
	// SyncInterval, when set, is the nodes' JetStream sync_interval
	// ("always", or a duration such as "1s"); nats-server's default is 2
	// minutes, and a replicated stream then flushes its writes to its
	// files asynchronously.
	SyncInterval string
}

// StartCluster starts n nats-server processes (n >= 3 for a JetStream
// quorum that survives a node) with JetStream in dir/<attempt>/<node>,
// routed to each other, and returns once every node is ready and JetStream
// answers with a meta leader, failing tb otherwise. A cluster whose
// JetStream does not come up is started again on other ports, up to three
// times: a port picked free may be taken by another test's server before
// the node binds it. The nodes do not advertise their client URLs, so
// that clients keep to the URLs they were given (a test's proxies).
func StartCluster(tb testing.TB, dir string, n int) *Cluster {
	return StartClusterWith(tb, dir, n, ClusterOptions{})
}

// StartClusterWith is StartCluster with opts.
func StartClusterWith(tb testing.TB, dir string, n int, opts ClusterOptions) *Cluster {
	tb.Helper()
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		c := startCluster(tb, fmt.Sprintf("%s/%d", dir, attempt), n, opts)
		if err = c.awaitJetStream(); err == nil {
			return c
		}
		tb.Logf("natstest: cluster attempt %d: %v", attempt, err)
		for _, s := range c.nodes {
			tb.Logf("natstest: log of %s:\n%s", s.URL(), s.tail())
			s.Kill()
		}
	}
	tb.Fatal(err)
	return nil
}

func startCluster(tb testing.TB, dir string, n int, opts ClusterOptions) *Cluster {
	tb.Helper()
	name := fmt.Sprintf("natstest-%d", freePort(tb))
	routes := make([]string, n)
	ports := make([]int, n)
	for i := range n {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(freePort(tb))
		ports[i] = freePort(tb)
	}
	c := &Cluster{}
	var extra []string
	if v := opts.SyncInterval; v != "" {
		conf := dir + "/sync.conf"
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(conf, []byte("jetstream {\n  sync_interval: "+v+"\n}\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
		extra = []string{"-c", conf}
	}
	for i := range n {
		c.nodes = append(c.nodes, Start(tb, Options{
			Dir:  fmt.Sprintf("%s/n%d", dir, i),
			Port: ports[i],
			Args: append([]string{"--server_name", fmt.Sprintf("n%d", i), "--cluster_name", name,
				"--cluster", routes[i], "--routes", strings.Join(routes, ","),
				"--no_advertise"}, extra...),
		}))
	}
	return c
}

// clusterReadyTimeout bounds how long one attempt of StartCluster waits for
// JetStream to answer.
const clusterReadyTimeout = 30 * time.Second

// awaitJetStream waits until JetStream answers through every node (the
// cluster elected a meta leader), up to clusterReadyTimeout.
func (c *Cluster) awaitJetStream() error {
	deadline := time.Now().Add(clusterReadyTimeout)
	for _, s := range c.nodes {
		nc, err := nats.Connect(s.URL())
		if err != nil {
			return fmt.Errorf("connect to %s: %w", s.URL(), err)
		}
		for {
			m, err := nc.Request("$JS.API.INFO", nil, time.Second)
			if err == nil && !strings.Contains(string(m.Data), `"error"`) {
				break
			}
			if time.Now().After(deadline) {
				nc.Close()
				if err == nil {
					err = errors.New(string(m.Data))
				}
				return fmt.Errorf("JetStream of the cluster not ready after %s: %w", clusterReadyTimeout, err)
			}
			time.Sleep(50 * time.Millisecond) // a server start, polled: nothing to wait on
		}
		nc.Close()
	}
	return nil
}

// URLs returns the client URLs of every node, comma-separated, for
// nats.Connect.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// NodeURL returns node i's client URL.
func (c *Cluster) NodeURL(i int) string { return c.nodes[i].URL() }

// Kill kills node i with SIGKILL and waits for it to end.
func (c *Cluster) Kill(i int) { c.nodes[i].Kill() }

// Restart starts node i again, after Kill, on its ports and directory.
func (c *Cluster) Restart(tb testing.TB, i int) {
	tb.Helper()
	c.nodes[i] = c.nodes[i].Restart(tb)
}
