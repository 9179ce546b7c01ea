package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// InstallSentinel says how to get redis-sentinel.
const InstallSentinel = "install redis-sentinel (Debian/Ubuntu: apt-get install redis-sentinel; macOS: brew install redis)"

// RequireSentinel is Require for tests that also need redis-sentinel.
func RequireSentinel(tb testing.TB) {
	tb.Helper()
	Require(tb)
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("redistest: redis-sentinel is not on PATH: %s", InstallSentinel)
		}
		tb.Skipf("redistest: redis-sentinel is not on PATH: %s", InstallSentinel)
	}
}

// StartReplica starts a redis-server replicating master (--replicaof) on a
// free loopback port and returns once it is in sync with it.
func StartReplica(master *Server, opts Options) (*Server, error) {
	host, port, _ := net.SplitHostPort(master.Addr)
	opts.Args = append(append([]string(nil), opts.Args...), "--replicaof", host, port)
	r, err := start(opts, false)
	if err != nil {
		return nil, err
	}
	if err := r.awaitInfo("replication", 20*time.Second, "master_link_status:up"); err != nil {
		r.Kill()
		return nil, err
	}
	return r, nil
}

// Sentinel is a Redis master with replicas, watched by redis-sentinel
// processes that promote a replica when the master fails.
type Sentinel struct {
	// Name is the master's name in the Sentinels.
	Name string
	// Servers are the master as started, then the replicas.
	Servers []*Server
	// Sentinels are the redis-sentinel processes.
	Sentinels []*Server
}

// SentinelDownAfter is how long the Sentinels of StartSentinel wait before
// they take an unanswering master for down (down-after-milliseconds).
const SentinelDownAfter = time.Second

// StartSentinel starts a master, replicas replicas of it and sentinels
// Sentinels (a quorum of a majority) watching it as "mymaster", each in its
// own directory under opts.Dir, and returns once every replica is in sync
// and every Sentinel knows the replicas and can reach a quorum and a
// majority to authorize a failover (SENTINEL CKQUORUM).
func StartSentinel(replicas, sentinels int, opts Options) (*Sentinel, error) {
	if opts.Dir == "" {
		return nil, errors.New("redistest: Options.Dir is required")
	}
	g := &Sentinel{Name: "mymaster"}
	at := func(name string) Options {
		o := opts
		o.Dir = filepath.Join(opts.Dir, name)
		return o
	}
	master, err := start(at("master"), false)
	if err != nil {
		return nil, err
	}
	g.Servers = append(g.Servers, master)
	for i := range replicas {
		r, err := StartReplica(master, at("replica"+strconv.Itoa(i)))
		if err != nil {
			g.Stop()
			return nil, err
		}
		g.Servers = append(g.Servers, r)
	}
	host, port, _ := net.SplitHostPort(master.Addr)
	conf := func(int) string {
		return fmt.Sprintf("sentinel monitor %s %s %s %d\n"+
			"sentinel down-after-milliseconds %[1]s %[5]d\n"+
			"sentinel failover-timeout %[1]s 10000\n"+
			"sentinel parallel-syncs %[1]s 1\n", g.Name, host, port, sentinels/2+1, SentinelDownAfter.Milliseconds())
	}
	for i := range sentinels {
		o := at("sentinel" + strconv.Itoa(i))
		o.AppendFsync, o.Args = "", nil
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			g.Stop()
			return nil, err
		}
		sn, err := startBin("redis-sentinel", o, false, conf)
		if err != nil {
			g.Stop()
			return nil, err
		}
		g.Sentinels = append(g.Sentinels, sn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, sn := range g.Sentinels {
		for {
			q, qerr := sn.Do("SENTINEL", "CKQUORUM", g.Name)
			reps, rerr := sn.Do("SENTINEL", "REPLICAS", g.Name)
			ready := qerr == nil && strings.Contains(q, fmt.Sprintf("%d usable", sentinels)) &&
				rerr == nil && strings.Count(reps, "\nflags\nslave\n") == replicas && !strings.Contains(reps, "s_down")
			if ready {
				break
			}
			select {
			case <-ctx.Done():
				g.Stop()
				return nil, fmt.Errorf("redistest: Sentinel %s not ready after 30s: CKQUORUM %q %v; replicas %q %v", sn.Addr, q, qerr, reps, rerr)
			case <-time.After(50 * time.Millisecond): // Sentinels discover each other every 2s: polled
			}
		}
	}
	return g, nil
}

// URL returns the form redis+sentinel://s1:p1,s2:p2,.../Name that
// redisstore.ParseURL reads.
func (g *Sentinel) URL() string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + g.Name
}

// MasterAddr returns the master's address as the first Sentinel that
// answers reports it (SENTINEL GET-MASTER-ADDR-BY-NAME).
func (g *Sentinel) MasterAddr() (string, error) {
	var err error
	for _, sn := range g.Sentinels {
		var out string
		if out, err = sn.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.Name); err == nil {
			host, port, ok := strings.Cut(out, "\n")
			if !ok {
				return "", fmt.Errorf("redistest: SENTINEL GET-MASTER-ADDR-BY-NAME answered %q", out)
			}
			return net.JoinHostPort(host, port), nil
		}
	}
	return "", err
}

// Server returns the server of g at addr, nil when none is.
func (g *Sentinel) Server(addr string) *Server {
	for _, s := range g.Servers {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// AwaitReplicated polls, up to timeout, until the server the Sentinels
// name master is one and a replica confirms its writes (a write and WAIT 1
// on one connection, twice in a row), and returns its address: after a
// failover, the master that stayed (a first promotion may fail and
// Sentinel try another replica) with the replica Sentinel pointed at it.
// INFO's "state=online" is not enough: a replica so listed has been seen
// not to answer WAIT for seconds after.
func (g *Sentinel) AwaitReplicated(timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	confirmed := ""
	for {
		addr, err := g.MasterAddr()
		if s := g.Server(addr); err == nil && s != nil {
			if err = s.confirmedByReplica(); err == nil && confirmed == addr {
				return addr, nil
			}
			if err == nil {
				confirmed = addr
			} else {
				confirmed = ""
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("redistest: no master whose writes a replica confirms after %s (the Sentinels name %q: %v)", timeout, addr, err)
		}
		time.Sleep(100 * time.Millisecond) // other processes' state: polled
	}
}

// confirmedByReplica writes a key on s and waits up to 500 ms for a
// replica to confirm it, on one connection (WAIT counts the connection's
// own writes): nil when one did.
func (s *Server) confirmedByReplica() error {
	replies, err := s.doAll([]string{"SET", "redistest:await", "1"}, []string{"WAIT", "1", "500"})
	if err != nil {
		return err
	}
	if replies[1] == "0" {
		return fmt.Errorf("redistest: no replica of %s confirmed a write within 500ms", s.Addr)
	}
	return nil
}

// Stop kills the Sentinels and the servers. Idempotent.
func (g *Sentinel) Stop() {
	for _, s := range g.Sentinels {
		s.Kill()
	}
	for _, s := range g.Servers {
		s.Kill()
	}
}

// Role returns the server's role as INFO replication reports it: master or
// slave.
func (s *Server) Role() (string, error) {
	info, err := s.Do("INFO", "replication")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("redistest: INFO replication of %s has no role", s.Addr)
}

// awaitInfo polls INFO section until it contains want, up to timeout.
func (s *Server) awaitInfo(section string, timeout time.Duration, want string) error {
	deadline := time.Now().Add(timeout)
	for {
		info, err := s.Do("INFO", section)
		if err == nil && strings.Contains(info, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: INFO %s of %s has no %q after %s: %q %v", section, s.Addr, want, timeout, info, err)
		}
		time.Sleep(20 * time.Millisecond) // another process's state: polled
	}
}
