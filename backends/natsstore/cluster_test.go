package natsstore

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/natsstore/natstest"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
)

// The package's shared three-node cluster, started on first use.
var (
	clusterOnce sync.Once
	clusterDir  string
	clusterSrv  *natstest.Cluster
)

func sharedCluster(t *testing.T) *natstest.Cluster {
	t.Helper()
	clusterOnce.Do(func() {
		var err error
		clusterDir, err = os.MkdirTemp("", "natsstore-cluster-*")
		require.NoError(t, err)
		clusterSrv = natstest.StartCluster(t, clusterDir, 3)
	})
	require.NotNil(t, clusterSrv, "the cluster did not start")
	return clusterSrv
}

// TestStoreCluster runs the conformance suite on a three-node cluster with
// every stream kept by three servers.
func TestStoreCluster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	replicated := func(retention time.Duration) func(*Config) {
		return func(cfg *Config) { cfg.Replicas, cfg.Retention = 3, retention }
	}
	storetest.Run(t, storetest.Harness{
		ListInStreamOrder:  true,
		CountsLag:          time.Second,
		FinishedSuperseded: true,
		Open: func(t *testing.T, ns string) core.Store {
			return openStore(t, connectURL(t, c.URLs()), ns, replicated(0))
		},
		OpenRetention: func(t *testing.T, ns string, retention time.Duration) core.Store {
			return openStore(t, connectURL(t, c.URLs()), ns, replicated(retention))
		},
		Durable: true,
	})
}

// TestClusterNodeKill kills one node of the cluster with SIGKILL while jobs
// are put, claimed and acknowledged, restarts it, and requires every job
// whose put was answered to be delivered and acknowledged.
func TestClusterNodeKill(t *testing.T) {
	c := sharedCluster(t)
	s := openStore(t, connectURL(t, c.URLs()), uniquePrefix(), func(cfg *Config) { cfg.Replicas = 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, n = "kill", 2000
	var (
		mu       sync.Mutex
		answered = map[string]bool{}
		acked    = map[string]bool{}
		putDone  = make(chan struct{})
		killAt   = make(chan struct{})
		once     sync.Once
		puts     atomic.Int64
	)
	go func() {
		defer close(putDone)
		for i := 0; i < n/20 && ctx.Err() == nil; i++ {
			batch := make([]*core.Job, 20)
			for k := range batch {
				batch[k] = job(topic, 0)
				batch[k].TTR = time.Minute
			}
			res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: batch})
			if err != nil {
				continue // not answered: the jobs need not exist
			}
			mu.Lock()
			for k, r := range res {
				if r.Err == nil {
					answered[batch[k].ID] = true
				}
			}
			mu.Unlock()
			if puts.Add(20) >= n/4 {
				once.Do(func() { close(killAt) })
			}
		}
	}()
	go func() {
		<-killAt
		c.Kill(1)
		time.Sleep(2 * time.Second) // the node stays down a while
		c.Restart(t, 1)
	}()
	for {
		mu.Lock()
		left := 0
		for id := range answered {
			if !acked[id] {
				left++
			}
		}
		mu.Unlock()
		select {
		case <-putDone:
			if left == 0 {
				return
			}
		default:
		}
		if ctx.Err() != nil {
			mu.Lock()
			for id := range answered {
				if !acked[id] {
					j, err := s.GetJob(context.Background(), id)
					t.Errorf("answered job %s not acknowledged: %+v %v", id, j, err)
					if m, err := s.load(context.Background(), id); err == nil && m != nil {
						t.Logf("its message: seq %d %s", m.seq, m.subject)
					}
					break
				}
			}
			mu.Unlock()
			logConsumer(t, s, topic)
			t.Fatalf("%d answered jobs not acknowledged", left)
		}
		jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic, Max: 100, Wait: time.Second})
		if err != nil {
			t.Logf("claim: %v", err) // the node's loss: claim again
			continue
		}
		for _, j := range jobs {
			for ctx.Err() == nil {
				_, err := s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})
				if err == nil || errorsIsSettled(err) {
					break
				}
				t.Logf("ack %s: %v", j.ID, err)
				time.Sleep(50 * time.Millisecond) // the cluster's recovery: nothing to wait on
			}
			mu.Lock()
			acked[j.ID] = true
			mu.Unlock()
		}
	}
}

// errorsIsSettled reports whether an ack's error says the job is no longer
// under that lease (an ack retried after the server applied it).
func errorsIsSettled(err error) bool {
	return errors.Is(err, core.ErrLeaseLost) || errors.Is(err, core.ErrNotFound)
}

// logConsumer logs the state of topic's due consumer, for a failure.
func logConsumer(t *testing.T, s *Store, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := s.stream.Consumer(ctx, s.names.dueConsumer(topic))
	if err != nil {
		t.Logf("consumer: %v", err)
		return
	}
	ci, err := c.Info(ctx)
	if err != nil {
		t.Logf("consumer info: %v", err)
		return
	}
	si, err := s.stream.Info(ctx)
	if err == nil {
		t.Logf("stream: %+v cluster %+v", si.State, si.Cluster)
	}
	t.Logf("consumer: pending %d, ack pending %d, redelivered %d, waiting %d, delivered %+v, ack floor %+v, cluster %+v",
		ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Delivered, ci.AckFloor, ci.Cluster)
}
