package natstest

import (
	"fmt"
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

// StartCluster starts n nats-server processes (n >= 3 for a JetStream
// quorum that survives a node) with JetStream in dir/<node>, routed to each
// other, and returns once every node is ready and JetStream answers with a
// meta leader, failing tb otherwise.
func StartCluster(tb testing.TB, dir string, n int) *Cluster {
	tb.Helper()
	name := fmt.Sprintf("natstest-%d", freePort(tb))
	routes := make([]string, n)
	ports := make([]int, n)
	for i := range n {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(freePort(tb))
		ports[i] = freePort(tb)
	}
	c := &Cluster{}
	for i := range n {
		c.nodes = append(c.nodes, Start(tb, Options{
			Dir:  fmt.Sprintf("%s/n%d", dir, i),
			Port: ports[i],
			Args: []string{"--server_name", fmt.Sprintf("n%d", i), "--cluster_name", name,
				"--cluster", routes[i], "--routes", strings.Join(routes, ",")},
		}))
	}
	c.awaitJetStream(tb)
	return c
}

// awaitJetStream waits until JetStream answers through every node (the
// cluster elected a meta leader), up to ReadyTimeout.
func (c *Cluster) awaitJetStream(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(ReadyTimeout)
	for _, s := range c.nodes {
		nc, err := nats.Connect(s.URL())
		if err != nil {
			tb.Fatalf("natstest: connect to %s: %v", s.URL(), err)
		}
		for {
			m, err := nc.Request("$JS.API.INFO", nil, time.Second)
			if err == nil && !strings.Contains(string(m.Data), `"error"`) {
				break
			}
			if time.Now().After(deadline) {
				nc.Close()
				tb.Fatalf("natstest: JetStream of the cluster not ready after %s: %v %s", ReadyTimeout, err, m.Data)
			}
			time.Sleep(50 * time.Millisecond) // a server start, polled: nothing to wait on
		}
		nc.Close()
	}
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

// Kill kills node i with SIGKILL and waits for it to end.
func (c *Cluster) Kill(i int) { c.nodes[i].Kill() }

// Restart starts node i again, after Kill, on its ports and directory.
func (c *Cluster) Restart(tb testing.TB, i int) {
	tb.Helper()
	c.nodes[i] = c.nodes[i].Restart(tb)
}
